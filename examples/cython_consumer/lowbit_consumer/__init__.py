"""An example consumer: a ternary two-layer MLP whose matrix products are pylowbit's kernels."""
from lowbit_consumer._ternary import mlp_tq2_0

__all__ = ["mlp_tq2_0"]
