"""The caller's arrays, whatever their framework: how they travel to the extension (as DLPack or
buffer-protocol arrays, never copied), where they live, and how outputs are made in the same
framework."""

from __future__ import annotations

import numpy as np

# Element types a framework dtype names by itself. Frameworks have no MX types: MX codes and E8M0
# scales travel as bytes, their element type named by `formats=`.
TYPE_OF_DTYPE = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int32": "i32",
    "int64": "i64",
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
    "float8_e8m0fnu": "e8m0",
}
_BYTE_DTYPES = {"uint8", "int8", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
                "float4_e2m1fn_x2"}
# ml_dtypes' FP6 and FP4 arrays hold one element a byte; mxattn reads them packed.
_UNPACKED_DTYPES = {"float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"}

_DLPACK_CPU = 1
_DLPACK_CUDA = 2


def framework_of(x) -> str:
    root = type(x).__module__.split(".")[0]
    if root == "torch":
        return "torch"
    if root == "cupy":
        return "cupy"
    if root in ("jax", "jaxlib"):
        return "jax"
    return "numpy"


def dtype_name(x) -> str:
    name = str(getattr(x, "dtype", type(x).__name__))
    return name[len("torch."):] if name.startswith("torch.") else name


def check_array(name: str, x) -> None:
    if not (hasattr(x, "__dlpack__") or isinstance(x, np.ndarray)):
        raise TypeError(f"{name} must be an array (NumPy, PyTorch, CuPy, JAX or any DLPack "
                        f"tensor), found {type(x).__name__}")


def _unsigned_view(x, itemsize: int):
    """The same memory as unsigned integers of `itemsize` bytes (a view, never a copy), for dtypes
    that DLPack exporters refuse: ml_dtypes' NumPy types, PyTorch's float8 types."""
    if framework_of(x) == "torch":
        import torch

        return x.view(torch.uint8)
    return x.view(np.uint8 if itemsize == 1 else np.uint16)


def transport(name: str, x, element_type: str | None = None):
    """(array for the extension, mxattn element type name) for a tensor argument. `element_type`
    names MX data held as bytes; without it the type follows the array's dtype."""
    check_array(name, x)
    if framework_of(x) == "torch":
        x = x.detach()  # DLPack refuses tensors that require grad; this is the same memory
    storage = dtype_name(x)
    if storage in _UNPACKED_DTYPES:
        raise ValueError(f"{name} is an ml_dtypes {storage} array, one element a byte; mxattn reads "
                         "FP6 and FP4 packed (FP4: 2 elements a byte, FP6: 4 in 3 bytes): pass the "
                         "packed bytes (as mxattn.quantize returns them) with formats=")
    inferred = TYPE_OF_DTYPE.get(storage)
    if element_type is None:
        if inferred is None and storage in _BYTE_DTYPES:
            raise ValueError(f"{name} holds {storage} elements: name its element type with formats= "
                             "(e4m3, e5m2, e2m3, e3m2, e2m1)")
        if inferred is None:
            raise ValueError(f"{name} holds {storage} elements; mxattn takes float32, float16, "
                             "bfloat16, or MX codes as uint8 with formats=")
        element_type = inferred
    if storage == "bfloat16" and framework_of(x) == "numpy":
        x = _unsigned_view(x, 2)
    elif storage in _BYTE_DTYPES and storage not in ("uint8", "int8") and \
            framework_of(x) in ("numpy", "torch"):
        x = _unsigned_view(x, 1)
    return x, element_type


def device_of(x) -> tuple[bool, int]:
    """(on a GPU, device index) of an array."""
    if hasattr(x, "__dlpack_device__"):
        kind, index = x.__dlpack_device__()
        return int(kind) == _DLPACK_CUDA, int(index)
    return False, 0


def host_int32(name: str, x, batch: int | None = None):
    """Metadata (kv_len, prefix_offset, block table, sparse layout) as a host int32 array: it is
    read on the host when a call is validated and planned, and is small, so device or int64
    inputs are converted here. An int broadcasts over the `batch` entries."""
    if x is None:
        return None
    if isinstance(x, (int, np.integer)) and batch is not None:
        return np.full((batch,), int(x), dtype=np.int32)
    framework = framework_of(x)
    if framework == "torch":
        x = x.detach().cpu().numpy()
    elif framework == "cupy":
        x = x.get()
    array = np.asarray(x)
    if array.dtype == np.int32:
        return array
    if array.dtype.kind not in "iu" and array.size > 0:
        raise ValueError(f"{name} must hold integers, found {array.dtype}")
    info = np.iinfo(np.int32)
    if array.size and (array.min() < info.min or array.max() > info.max):
        raise ValueError(f"{name} holds values outside int32")
    return array.astype(np.int32)


def _numpy_dtype(element_type: str):
    if element_type == "bf16":
        try:
            import ml_dtypes
        except ImportError as e:
            raise ValueError("bf16 NumPy arrays need the ml_dtypes package "
                             "(pip install ml_dtypes)") from e
        return ml_dtypes.bfloat16
    return {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u8": np.uint8}[element_type]


def _torch_dtype(element_type: str):
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "i32": torch.int32, "u8": torch.uint8}[element_type]


def empty_like_framework(like, shape, element_type: str):
    """A new array of `shape` (element type f32, f16, bf16, i32, or u8 for bytes) in the framework
    and on the device of `like`."""
    framework = framework_of(like)
    on_gpu, index = device_of(like)
    if framework == "torch":
        import torch

        return torch.empty(tuple(shape), dtype=_torch_dtype(element_type), device=like.device)
    if framework == "cupy":
        import cupy

        if element_type == "bf16":
            raise ValueError("CuPy has no bfloat16: pass out= as another framework's tensor")
        with cupy.cuda.Device(index):
            return cupy.empty(tuple(shape), dtype=_numpy_dtype(element_type))
    if on_gpu:
        raise NotImplementedError(f"cannot allocate {framework} arrays on a GPU here: pass out= (a "
                                  "PyTorch or CuPy tensor)")
    return np.empty(tuple(shape), dtype=_numpy_dtype(element_type))


def to_framework_of(like, array):
    """`array` (made by empty_like_framework) as the caller sees results: JAX arrays are
    immutable, so JAX callers get theirs converted from the host array."""
    if framework_of(like) == "jax":
        import jax.numpy as jnp

        return jnp.asarray(array)
    return array


def current_stream(like, on_gpu: bool) -> int:
    """The stream the caller's framework is queueing work on (0: the legacy default stream)."""
    if not on_gpu:
        return 0
    framework = framework_of(like)
    if framework == "torch":
        import torch

        return int(torch.cuda.current_stream(like.device).cuda_stream)
    if framework == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return 0
