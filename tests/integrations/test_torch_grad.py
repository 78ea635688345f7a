"""Gradients with respect to the input through frozen pylowbit weights: gradcheck, the dense
float64 reference, and a LoRA adapter trained on a frozen ternary layer."""
import pytest
import torch

import pylowbit.torch as pt


def _layer(fmt, out_f=32, in_f=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    lin = torch.nn.Linear(in_f, out_f, bias=True)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(out_f, in_f, generator=g))
    return pt.Linear.from_linear(lin, fmt)


def test_gradcheck_float_weights():
    # F32 weights multiply float activations: the op is the linear map itself, so finite
    # differences (in float64 around a float32 kernel, hence the coarse eps) check the backward.
    layer = _layer("f32", out_f=8)
    x = torch.randn(2, 256, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: layer(t.float()).double(), (x,), eps=1e-2, atol=1e-3,
                                    rtol=1e-3)


@pytest.mark.parametrize("fmt", ["i2_s", "tq2_0", "q8_0"])
def test_input_gradient_matches_dense_reference(fmt):
    layer = _layer(fmt)
    dense = layer.dequantize().double()
    x = torch.randn(3, 256, requires_grad=True)
    g = torch.randn(3, 32)
    layer(x).backward(g)
    torch.testing.assert_close(x.grad.double(), g.double() @ dense, rtol=1e-5, atol=1e-5)
    assert layer.weight.grad is None and not layer.weight.requires_grad


def test_no_float_copy_kept_between_calls():
    layer = _layer("i2_s")
    x = torch.randn(2, 256, requires_grad=True)
    layer(x).sum().backward()
    assert [n for n, _ in layer.named_buffers()] == ["weight", "bias"]
    assert layer.weight.dtype == torch.uint8 and not list(layer.parameters())


def test_lora_on_frozen_ternary_layer_learns():
    torch.manual_seed(0)
    base = _layer("i2_s", out_f=64)
    rank = 4
    a = torch.nn.Parameter(torch.randn(rank, 256) * 0.01)
    b = torch.nn.Parameter(torch.zeros(64, rank))
    hidden = torch.nn.Parameter(torch.zeros(256))  # a trainable input shift: gradients go through base

    def forward(x):
        h = x + hidden
        return base(h) + h @ a.T @ b.T

    x = torch.randn(32, 256)
    target = torch.randn(32, 64)
    opt = torch.optim.Adam([a, b, hidden], lr=1e-2)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(forward(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0], losses
    assert hidden.grad is not None and hidden.grad.abs().sum() > 0
