"""`pylowbit.torch.Linear`: a linear layer whose weight stays in a pylowbit format.

The weight is one uint8 buffer holding the matrix exactly as a GGUF file stores it (the format's
blocks, I2_S with its fp32 tensor scale after the codes): the layer keeps no float or unpacked copy
of it, and `state_dict` saves and loads those bytes.  The forward is one `torch.ops.pylowbit.gemm`.
"""
from __future__ import annotations

import logging
import weakref

import numpy as np
import torch
from torch import nn

from pylowbit import _lowbit
from pylowbit.core import DECODE_ONLY, format_info, quantize, tensor_nbytes
# (importing _ops registers torch.ops.pylowbit)
from pylowbit.torch._ops import WEIGHT_TYPE_IDS, gemm_cpu, gemm_packed_cpu, kernel_threads

log = logging.getLogger("pylowbit.torch")

# Formats whose codes are -1, 0, +1 times one scale: from_linear ternarizes a float weight for them
# as BitNet b1.58 trains it (absmean) before packing, so the packing itself is lossless.
TERNARY = frozenset({"tq1_0", "tq2_0", "i2_s", "ptq1_0"})
VALUES_PER_BYTE = 4  # transformers' BitNet packing: four 2-bit codes a byte, along the output rows


class Linear(nn.Module):
    """y = x W^T (+ bias), W (out_features x in_features) held in pylowbit format `format`.

    Inputs are float32, bfloat16 or float16 (the output has the input's dtype); the kernels
    quantize activations as the format's owner does (I2_S: int8 per token, 127 / max|x|, the rule
    of transformers' BitLinear).  `norm` (optional) is applied to the input first, as
    transformers' BitLinear(use_rms_norm=True) does."""

    def __init__(self, in_features: int, out_features: int, format: str = "i2_s", bias: bool = False,
                 dtype: torch.dtype = torch.float32, norm: nn.Module | None = None):
        super().__init__()
        info = format_info(format)
        if in_features % info.block_size:
            raise ValueError(f"{info.name}: in_features {in_features} is not a multiple of the "
                             f"block size {info.block_size}")
        self.in_features, self.out_features, self.info = int(in_features), int(out_features), info
        self.type_id = info.type_id
        self.register_buffer("weight", torch.zeros(tensor_nbytes(info, in_features * out_features),
                                                   dtype=torch.uint8))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype) if bias else None)
        self.norm = norm
        self._packed = None  # (PackedMatrix, weight, its address, its version) after repack()
        self.siblings: SharedInput | None = None  # quantize_ groups q/k/v and gate/up
        self.quantization_error: float | None = None  # relative, when made from float weights

    format = property(lambda self: self.info.name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm is not None:
            x = self.norm(x)
        if type(x) is torch.Tensor and x.is_cpu and not (x.requires_grad and torch.is_grad_enabled()) \
                and not torch.compiler.is_compiling():
            # Eager inference: the op's own CPU kernel, without the dispatcher's Python round trip
            # (nothing to record for autograd, no fake or traced tensor to dispatch on).
            packed = self._packed_matrix()
            if packed is None:
                y = gemm_cpu(x, self.weight, self.type_id, self.out_features, self.in_features)
            elif self.siblings is not None:
                y = self.siblings.output(self, x)
            else:
                y = gemm_packed_cpu(x, (packed,))[0]
                read_ahead_next(self, x)
        else:
            y = torch.ops.pylowbit.gemm(x, self.weight, self.type_id, self.out_features,
                                        self.in_features)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"format={self.format}, bias={self.bias is not None}, "
                f"weight_bytes={self.weight.numel()}" + (", repacked" if self._packed else ""))

    def repack(self, enable: bool = True) -> "Linear":
        """Opt in to pylowbit's repacked layout for eager inference (lb.pack: the decoder's layout,
        about twice as fast at batch 1 for the ternary formats).  It is a second copy of the weight,
        owned by C beside the `weight` buffer (which state_dict, autograd, torch.compile and
        torch.export keep using): the layer's memory doubles.  Results are bit for bit the same.
        enable=False drops the copy."""
        self._packed = None
        if enable:
            m = _lowbit.PackedMatrix(self.weight.numpy(), self.type_id, self.out_features,
                                     self.in_features, torch.get_num_threads())
            w = self.weight
            self._packed = (m, w, w.data_ptr(), version_of(w))
        return self

    def packed_matrices(self):
        """(this layer's PackedMatrix,), or None if it is not repacked."""
        m = self._packed_matrix()
        return None if m is None else (m,)

    @property
    def repacked_nbytes(self) -> int:
        """Bytes of the repacked copy (0: none, or a format that is not repacked)."""
        return self._packed[0].nbytes if self._packed else 0

    def _packed_matrix(self):
        p = self._packed
        if p is None:
            return None
        w = p[1]
        if w is not self._buffers["weight"] or p[2] != w.data_ptr() or p[3] != version_of(w):
            self.repack()  # the weight bytes changed (load_state_dict, copy_): pack them again
            p = self._packed
        return p[0]

    # The format travels with the bytes: loading a state_dict of another format or shape fails.
    def get_extra_state(self):
        return {"format": self.format, "in_features": self.in_features,
                "out_features": self.out_features}

    def set_extra_state(self, state):
        mine = self.get_extra_state()
        if state != mine:
            raise ValueError(f"pylowbit.torch.Linear: the state_dict holds {state}, this layer is {mine}")

    def dequantize(self) -> torch.Tensor:
        """The weight as a new float32 (out_features, in_features) tensor (for checks)."""
        return torch.ops.pylowbit.dequantize(self.weight, self.info.type_id, self.out_features,
                                             self.in_features)

    # ---- constructors ----------------------------------------------------------------------

    @classmethod
    def from_float_weight(cls, weight: torch.Tensor, format: str = "i2_s", bias=None,
                          norm: nn.Module | None = None, ternary: bool | None = None) -> "Linear":
        """Quantize a float (out, in) weight.  Ternary formats are first ternarized with BitNet
        b1.58's absmean rule (scale = mean|W|, codes round(W / scale) clamped to [-1, 1]) unless
        ternary=False; other formats take pylowbit's quantizer (the format owner's rule).  The
        layer's `quantization_error` is ||W - W_q|| / ||W||."""
        info = format_info(format)
        if info.name in DECODE_ONLY:
            raise ValueError(f"pylowbit.torch.Linear: {info.name} can be read (from_gguf) but not "
                             f"quantized to")
        if weight.dim() != 2:
            raise ValueError(f"expected a 2-D weight, got shape {tuple(weight.shape)}")
        out_f, in_f = weight.shape
        w = weight.detach().to("cpu", torch.float32)
        if ternary if ternary is not None else info.name in TERNARY:
            scale = 1.0 / w.abs().mean().clamp(min=1e-5)
            w = (w * scale).round().clamp(-1, 1) / scale
        dtype = bias.dtype if bias is not None else (weight.dtype if weight.is_floating_point()
                                                     else torch.float32)
        layer = cls(in_f, out_f, info.name, bias is not None, dtype, norm)
        layer._set_bytes(quantize(np.ascontiguousarray(w.numpy()), info).data)
        ref = weight.detach().to("cpu", torch.float32)
        layer.quantization_error = float((layer.dequantize() - ref).norm() / ref.norm().clamp(min=1e-30))
        if bias is not None:
            layer.bias.copy_(bias.detach())
        return layer

    @classmethod
    def from_linear(cls, linear: nn.Linear, format: str = "i2_s", ternary: bool | None = None) -> "Linear":
        """A float nn.Linear, quantized to `format` (see from_float_weight)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"from_linear takes an nn.Linear, got {type(linear).__name__}")
        layer = cls.from_float_weight(linear.weight, format, linear.bias, ternary=ternary)
        log.info("pylowbit.torch: %s -> %s, relative quantization error %.4g",
                 tuple(linear.weight.shape), layer.format, layer.quantization_error)
        return layer

    @classmethod
    def from_bitlinear(cls, module: nn.Module) -> "Linear":
        """transformers' BitLinear or AutoBitLinear, read as it is: the same ternary codes and
        weight_scale (as I2_S's tensor scale), bias and optional RMSNorm; no requantization."""
        name = type(module).__name__
        norm = getattr(module, "rms_norm", None)
        if name == "BitLinear":
            packed = module.weight
            if packed.dtype != torch.uint8 or packed.dim() != 2 \
                    or packed.shape != (module.out_features // VALUES_PER_BYTE, module.in_features) \
                    or module.out_features % VALUES_PER_BYTE:
                raise ValueError(f"BitLinear weight of {packed.dtype} {tuple(packed.shape)} is not "
                                 f"transformers' packing of a {module.out_features}x"
                                 f"{module.in_features} ternary matrix")
            codes = unpack_bitnet_codes(packed)
            if bool((codes > 2).any()):
                raise ValueError("BitLinear weight holds code 3, which transformers' packing never writes")
            # BitLinear divides by weight_scale: W = (codes - 1) / weight_scale.
            step = float(1.0 / module.weight_scale.detach().float().reshape(()))
        elif name == "AutoBitLinear":
            if module.online_quant:  # WeightQuant: absmean of the float weight, every forward
                return cls.from_float_weight(module.weight, "i2_s", module.bias, norm, ternary=True)
            w = module.weight.detach().to("cpu")
            if not torch.isin(w, torch.tensor([-1.0, 0.0, 1.0], dtype=w.dtype)).all():
                raise ValueError("AutoBitLinear(offline) weight is not ternary (-1, 0, 1)")
            codes = (w + 1).to(torch.uint8)
            step = float(module.weight_scale.detach().float().reshape(()))
        else:
            raise TypeError(f"from_bitlinear takes transformers' BitLinear or AutoBitLinear, got {name}")
        bias = module.bias
        if bias is not None and name == "AutoBitLinear":  # its forward scales the bias too
            bias = bias.detach() * module.weight_scale.detach().reshape(())
        dtype = bias.dtype if bias is not None else module.weight_scale.dtype
        layer = cls(module.in_features, module.out_features, "i2_s", bias is not None, dtype, norm)
        layer._set_bytes(i2s_bytes(codes, step))
        if bias is not None:
            layer.bias.copy_(bias.detach())
        return layer

    @classmethod
    def from_gguf(cls, tensor, bias=None, dtype: torch.dtype = torch.float32) -> "Linear":
        """A 2-D GGUF tensor (pylowbit.gguf.TensorInfo, or a pylowbit.QTensor), its bytes copied
        once as they are: no dequantization.  GGUF's (rows, cols) = (out_features, in_features)."""
        shape, data, info = tuple(tensor.shape), tensor.data, format_info(tensor.type_id)
        if len(shape) != 2:
            raise ValueError(f"from_gguf needs a 2-D tensor, got shape {shape}")
        if info.type_id not in WEIGHT_TYPE_IDS:
            raise ValueError(f"pylowbit cannot multiply GGUF tensors of type {info.name}")
        layer = cls(shape[1], shape[0], info.name, bias is not None, dtype)
        layer._set_bytes(np.asarray(data, dtype=np.uint8).reshape(-1))
        if bias is not None:
            layer.bias.copy_(torch.as_tensor(bias))
        return layer

    def _set_bytes(self, data: np.ndarray) -> None:
        if data.nbytes != self.weight.numel():
            raise ValueError(f"{self.format} ({self.out_features}, {self.in_features}) takes "
                             f"{self.weight.numel()} bytes, got {data.nbytes}")
        data = data if data.flags.writeable else data.copy()  # torch wraps only writeable arrays
        self.weight.copy_(torch.from_numpy(data))


def version_of(t: torch.Tensor):
    """t's version counter (bumped by every in-place change); None for an inference tensor, which
    has none (it cannot be changed in place outside inference mode)."""
    return None if t.is_inference() else t._version


_last_multiply = None  # weakref to the Linear / SharedInput whose repacked multiply ran last


def read_ahead_next(owner, x: torch.Tensor) -> None:
    """Eager decoding multiplies the same layers in the same order every token.  After `owner`'s
    one-vector multiply: note `owner` as what followed the previous one, and ask the pool's idle
    threads to start reading the first weights of what followed `owner` last time
    (lowbit_matrix_readahead), while torch runs the ops in between (norms, rotary, attention).  A
    wrong guess costs some bandwidth, never a result."""
    global _last_multiply
    prev = _last_multiply() if _last_multiply is not None else None
    if prev is not None and prev is not owner:
        prev.__dict__["_next_multiply"] = weakref.ref(owner)  # a plain attribute, not a submodule
    _last_multiply = weakref.ref(owner)
    ref = owner.__dict__.get("_next_multiply")
    nxt = ref() if ref is not None else None
    threads = kernel_threads()
    if nxt is None or threads < 2 or x.numel() != x.shape[-1]:
        return
    mats = nxt.packed_matrices()
    if mats is not None:
        _lowbit.addr_matrix_readahead(mats, threads)


class SharedInput:
    """Sibling layers that their parent calls one after another on the same input: an attention's
    q, k and v projections, an MLP's gate and up.  On the eager path (Linear.forward), with every
    sibling repacked, the first call multiplies the input by all of them in one gemm_multi (one
    activation quantization, one thread-pool job instead of three) and keeps the others' outputs;
    a sibling's own call then takes its output if it comes with that very tensor (the same object,
    and for a tensor that tracks versions, unmodified since), and is computed on its own
    otherwise.  The kept input and outputs are released as soon as every sibling has taken its."""

    def __init__(self, layers):
        self.layers = tuple(layers)
        self._x, self._version, self._outs = None, None, {}

    def packed_matrices(self):
        """Every sibling's PackedMatrix, or None unless all are repacked."""
        mats = tuple(m._packed_matrix() for m in self.layers)
        return None if any(m is None for m in mats) else mats

    def output(self, layer: "Linear", x: torch.Tensor) -> torch.Tensor:
        outs = self._outs
        if self._x is x and layer in outs and self._version == version_of(x):
            y = outs.pop(layer)
            if not outs:
                self._x = None
            return y
        mats = self.packed_matrices()
        if mats is None:
            return gemm_packed_cpu(x, (layer._packed_matrix(),))[0]
        ys = gemm_packed_cpu(x, mats)
        read_ahead_next(self, x)
        self._x, self._version = x, version_of(x)
        self._outs = {m: y for m, y in zip(self.layers, ys) if m is not layer}
        return ys[self.layers.index(layer)]


def unpack_bitnet_codes(packed: torch.Tensor) -> torch.Tensor:
    """transformers' BitNet packing (uint8 (out/4, in); output row r = k * out/4 + j sits in byte
    row j at bits 2k) as uint8 codes 0, 1, 2 (= -1, 0, +1) of shape (out, in)."""
    p = packed.detach().to("cpu")
    return torch.cat([(p >> (2 * k)) & 3 for k in range(VALUES_PER_BYTE)], dim=0)


def i2s_bytes(codes: torch.Tensor, step: float) -> np.ndarray:
    """The I2_S bytes of the matrix (codes - 1) * step, codes uint8 0..2 of shape (out, in): the
    codes moved into I2_S's groups (docs/FORMATS.md: 128 weights in 32 bytes, byte p holding
    weights p, p + 32, p + 64, p + 96 at shifts 6, 4, 2, 0; I2_S's codes are transformers' codes),
    then the tensor-scale tail as pylowbit's quantizer writes it for `step`."""
    if not (step > 0 and np.isfinite(step)):
        raise ValueError(f"the ternary step must be positive and finite, got {step}")
    if codes.shape[-1] % 128:
        raise ValueError(f"I2_S needs rows of a multiple of 128 weights, got {tuple(codes.shape)}")
    c = codes.reshape(-1, 4, 32)
    body = (c[:, 0] << 6) | (c[:, 1] << 4) | (c[:, 2] << 2) | c[:, 3]
    tail = quantize(np.full(128, step, dtype=np.float32), "i2_s").data[32:]
    return np.concatenate([body.reshape(-1).numpy(), tail])
