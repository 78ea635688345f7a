"""`pylowbit.torch.Linear`: a linear layer whose weight stays in a pylowbit format.

The weight is one uint8 buffer holding the matrix exactly as a GGUF file stores it (the format's
blocks, I2_S with its fp32 tensor scale after the codes): the layer keeps no float or unpacked copy
of it, and `state_dict` saves and loads those bytes.  The forward is one `torch.ops.pylowbit.gemm`.
After `repack()` the layer holds the weight in pylowbit's repacked layout instead (the buffer
`packed`, in place of the GGUF bytes, not a second copy) and multiplies with
`torch.ops.pylowbit.gemm_packed`; `state_dict` still saves the GGUF bytes (unpacked on save).
"""
from __future__ import annotations

import logging

import numpy as np
import torch
from torch import nn

from pylowbit import _lowbit
from pylowbit.core import DECODE_ONLY, format_info, quantize, tensor_nbytes
# (importing _ops registers torch.ops.pylowbit)
from pylowbit.torch._ops import WEIGHT_TYPE_IDS, gemm_cpu, gemm_packed_cpu, kernel_threads
from pylowbit.torch._ops_packed import empty_aligned, in_weight_memory, packed_nbytes
from pylowbit.torch.shared import READ_AHEAD_LINKS, SharedInput, read_ahead_next, version_of

log = logging.getLogger("pylowbit.torch")

# Formats whose codes are -1, 0, +1 times one scale: from_linear ternarizes a float weight for them
# as BitNet b1.58 trains it (absmean) before packing, so the packing itself is lossless.
TERNARY = frozenset({"tq1_0", "tq2_0", "i2_s", "ptq1_0"})
HUGE_PAGE = 2 << 20  # bytes of an x86 / Linux transparent huge page
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
        # repack(): the weight in pylowbit's layout for this CPU, in place of `weight` (then empty)
        self.register_buffer("packed", None, persistent=False)
        self.norm = norm
        # the PackedMatrix of the eager path, a cache: (it, the tensor it borrows (`packed`, or
        # `weight` for a type that is not repacked), its address, its version)
        self._packed = None
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
        elif self.packed is not None:
            y = torch.ops.pylowbit.gemm_packed(x, self.packed, self.type_id, self.out_features,
                                               self.in_features)
        else:
            y = torch.ops.pylowbit.gemm(x, self.weight, self.type_id, self.out_features,
                                        self.in_features)
        bias = self._buffers["bias"]
        return y if bias is None else y + bias.to(y.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"format={self.format}, bias={self.bias is not None}, "
                f"weight_bytes={tensor_nbytes(self.info, self.in_features * self.out_features)}"
                + (", repacked" if self.is_repacked else ""))

    def repack(self, enable: bool = True) -> "Linear":
        """Hold the weight in pylowbit's repacked layout (lb.pack's, the decoder's: about 1.6x as
        fast a layer at batch 1 for the ternary formats), in place of the GGUF bytes: the buffer
        `packed` (non-persistent: the layout depends on the CPU) replaces `weight` (then empty),
        so the layer still holds one copy.  The forward (eager, autograd, torch.compile,
        torch.export) multiplies from it (torch.ops.pylowbit.gemm_packed), bit for bit as from
        the GGUF bytes; state_dict saves the GGUF bytes (unpacked on save) and load_state_dict
        packs what it loads; dequantize() and file_bytes() unpack.  Formats that are not repacked
        (F16, ...; Q1_0 and Q8_0 where the variant has no kernel for their packed layouts) keep
        their bytes, which the eager path then reads through a PackedMatrix borrowing them.
        enable=False restores the GGUF bytes in `weight`."""
        if not enable:
            if self.packed is not None:
                w = self.file_bytes()
                self.packed, self.weight = None, w
            self._packed = None
            return self
        if self.packed is not None and not self.weight.numel():
            self._packed_matrix()
            return self
        self.packed, self._packed = None, None
        w = self.weight
        rows, cols = self.out_features, self.in_features
        n = packed_nbytes(self.type_id, rows, cols)
        if n == 0:  # not repacked: the eager path's matrix borrows the GGUF bytes
            if w.numel() >= HUGE_PAGE and not in_weight_memory(w):
                # streamed every token: moved once into the library's huge-page memory
                w = self.weight = empty_aligned(w.numel()).copy_(w)
            m = _lowbit.PackedMatrix(w.numpy(), self.type_id, rows, cols, kernel_threads())
            self._packed = (m, w, w.data_ptr(), version_of(w))
            return self
        buf = empty_aligned(n)
        m = _lowbit.PackedMatrix(w.detach().numpy(), self.type_id, rows, cols, kernel_threads(),
                                 out=buf.numpy())
        self.packed, self.weight = buf, torch.empty(0, dtype=torch.uint8)
        self._packed = (m, buf, buf.data_ptr(), None)
        return self

    @property
    def is_repacked(self) -> bool:
        return self.packed is not None or self._packed is not None

    def packed_matrices(self):
        """(this layer's PackedMatrix,), or None if it is not repacked."""
        m = self._packed_matrix()
        return None if m is None else (m,)

    @property
    def repacked_nbytes(self) -> int:
        """Bytes of the repacked layout the layer holds in place of the GGUF bytes (0: not
        repacked, or a format that is not repacked)."""
        return self.packed.numel() if self.packed is not None else 0

    def file_bytes(self) -> torch.Tensor:
        """The weight's GGUF bytes: `weight`, or (repacked) a new tensor unpacked from `packed`."""
        if self.packed is not None and not self.weight.numel():
            return torch.ops.pylowbit.unpack(self.packed, self.type_id, self.out_features,
                                             self.in_features)
        return self.weight

    def _packed_matrix(self):
        p = self._packed
        packed = self._buffers["packed"]
        if packed is not None:
            if self._buffers["weight"].numel():  # GGUF bytes assigned to a repacked layer
                self.packed = None
                return self.repack()._packed_matrix()
            if p is None or p[1] is not packed or p[2] != packed.data_ptr():
                # moved or replaced (share_memory, deepcopy, a pickle): the matrix in those bytes
                if packed.data_ptr() % _lowbit.PACKED_ALIGN:
                    self.packed = packed = empty_aligned(packed.numel()).copy_(packed)
                m = _lowbit.PackedMatrix.wrap(packed.numpy())
                self._packed = p = (m, packed, packed.data_ptr(), None)
            return p[0]
        if p is None:
            return None
        w = p[1]
        if w is not self._buffers["weight"] or p[2] != w.data_ptr() or p[3] != version_of(w):
            self.repack()  # the weight bytes changed (load_state_dict, copy_): borrow them again
            p = self._packed
        return p[0]

    # state_dict holds the GGUF bytes whatever the layout held: unpacked on save, packed on load.
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.packed is not None and prefix + "weight" in destination:
            destination[prefix + "weight"] = self.file_bytes()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if self.packed is None:
            return super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.repack(False)
        try:
            super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        finally:
            self.repack()

    def __getstate__(self):  # (deepcopy, pickle) the PackedMatrix is a cache, made again on use
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__
        state = dict(state)
        state["_packed"] = None
        for k in READ_AHEAD_LINKS:  # weak references to this object and its successor
            state.pop(k, None)
        return state

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
        return torch.ops.pylowbit.dequantize(self.file_bytes(), self.info.type_id,
                                             self.out_features, self.in_features)

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
