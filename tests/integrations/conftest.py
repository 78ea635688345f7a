"""Tests of pylowbit inside other runtimes (PyTorch, JAX, numba) and of the server.

Collected only with ``pytest --integrations tests/integrations``; every runtime is imported
unconditionally, so a missing one is a collection error, never a skip.
"""
import os
import sys

# Sibling helpers (``from test_kernels import ...``) resolve from the parent directory too.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
