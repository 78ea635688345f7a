"""pylowbit inside PyTorch: `torch.ops.pylowbit.*` operators, a low-bit `Linear`, and `quantize_`,
which converts a model in place (transformers' BitNet layers losslessly, float linears on request).

Optional: `pip install "pylowbit[torch]"`.  `import pylowbit` never imports this module.
"""
from pylowbit.torch._ops import FLOAT_DTYPES, kernel_threads, set_threads
from pylowbit.torch.gguf_model import load_gguf
from pylowbit.torch.linear import Linear, SharedInput, unpack_bitnet_codes
from pylowbit.torch.norm import RMSNorm
from pylowbit.torch.quantize import quantize_

__all__ = ["Linear", "load_gguf", "RMSNorm", "SharedInput", "quantize_", "unpack_bitnet_codes", "FLOAT_DTYPES", "set_threads", "kernel_threads"]
