"""`pylowbit.torch.RMSNorm`: the Llama-family RMSNorm in one pylowbit call on the eager path."""
from __future__ import annotations

import torch
from torch import nn

from pylowbit import _ops
from pylowbit.torch._ops import ADDR_DTYPES

# transformers' RMSNorm classes that compute weight * (x / sqrt(mean(x^2) + eps)).to(dtype) in
# float32 (Gemma's (1 + weight) form is not among them)
RMS_NORM_CLASSES = ("BitNetRMSNorm", "LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm")


class RMSNorm(nn.Module):
    """y = weight * (x / sqrt(mean(x**2, -1) + eps)), normalized in float32 and rounded to x's dtype
    before the weight, as transformers' Llama-family RMSNorm computes it.  Eager CPU inference on
    float32 / bfloat16 runs it as one liblowbit call (one call instead of about eight torch ops a
    norm, four norms a layer); autograd, torch.compile and other dtypes or devices run the same
    torch ops as transformers."""

    def __init__(self, weight: nn.Parameter, eps: float):
        super().__init__()
        self.weight = weight  # the converted module's own Parameter: shared, not copied
        self.eps = float(eps)

    @classmethod
    def from_module(cls, module: nn.Module) -> "RMSNorm":
        """A transformers RMSNorm of RMS_NORM_CLASSES (its weight Parameter and epsilon)."""
        if type(module).__name__ not in RMS_NORM_CLASSES:
            raise TypeError(f"RMSNorm.from_module takes one of {RMS_NORM_CLASSES}, "
                            f"got {type(module).__name__}")
        return cls(module.weight, getattr(module, "variance_epsilon", getattr(module, "eps", None)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        code = ADDR_DTYPES.get(x.dtype)
        if code is not None and w.dtype is x.dtype and type(x) is torch.Tensor and x.is_cpu \
                and w.is_cpu and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)) \
                and x.is_contiguous() and w.is_contiguous() and x.dim() >= 1 \
                and x.shape[-1] == w.numel() and not torch.compiler.is_compiling():
            y = torch.empty_like(x)
            n = x.shape[-1]
            _ops.addr_rms_norm(x.data_ptr(), x.numel() // n if n else 0, n, w.data_ptr(), self.eps,
                               y.data_ptr(), code)
            return y
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * h.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}"
