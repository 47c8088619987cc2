"""mxattn: exact multi-head attention forward (split-KV flash decoding, OCP MX inputs,
block-sparse, GQA, paged KV) on CPU engines and Hopper kernels, over any DLPack tensor.

Tensors from NumPy, PyTorch, CuPy or JAX are read in place (no copies), on the host or a GPU;
results come back in the caller's framework. Invalid arguments raise ValueError with the
library's message, and nothing is written then.
"""

from ._attention import (BatchAttention, DecodePlan, SparseLayout, attention, combine, merge_states, plan,
                         ragged_attention)
from ._mx import dequantize, quantize, quantize_keys, write_kv
from . import _mxattn

__all__ = ["attention", "ragged_attention", "BatchAttention", "combine", "merge_states", "plan", "DecodePlan", "SparseLayout", "quantize",
           "dequantize", "quantize_keys", "write_kv", "cuda_available", "build_info", "__version__"]


def build_info() -> dict:
    """What this build holds: version, cuda (the CUDA engines), cuda_prefill, cuda_architectures,
    cpu_kernel_sets (the fast CPU engine's sets this CPU runs) and cpu_kernel_set (the one it
    uses)."""
    return _mxattn.build_info()


__version__ = build_info()["version"]


def cuda_available() -> bool:
    """Whether this build holds the CUDA decode engine (MXATTN_CUDA=ON pip install .)."""
    return _mxattn.cuda_engine_built()
