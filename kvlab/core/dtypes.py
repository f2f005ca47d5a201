"""Element sizes of KV-cache dtypes, and the quantisation mode a cache dtype implies; no torch.

Mirrors: vllm/utils/torch_utils.py::get_dtype_size (which asks torch) and
vllm/v1/kv_cache_interface.py::KVQuantMode / get_kv_quant_mode. kvlab core may not import
torch, so sizes come from a table. A dtype is accepted as a string (``"bfloat16"``, ``"fp8"``,
vLLM's ``--kv-cache-dtype`` names) or as any object whose ``str()`` ends with such a name after
the last dot (``torch.float32`` -> ``"torch.float32"``; numpy's ``dtype('float16')`` ->
``"float16"``).

Examples:
    >>> get_dtype_size("bfloat16"), get_dtype_size("fp8_e4m3"), get_dtype_size("float32")
    (2, 1, 4)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = [
    "DTYPE_SIZES",
    "KVQuantMode",
    "cdiv",
    "dtype_name",
    "get_dtype_size",
    "get_kv_quant_mode",
    "is_quantized_kv_cache",
    "kv_cache_uses_per_token_head_scales",
    "nvfp4_kv_cache_full_dim",
    "round_up",
]

_SIZES_BY_BYTES: dict[int, tuple[str, ...]] = {
    8: ("float64", "double", "int64", "long", "uint64", "complex64"),
    4: ("float32", "float", "fp32", "int32", "int", "uint32"),
    2: ("float16", "half", "fp16", "bfloat16", "bf16", "int16", "short", "uint16"),
    1: (
        "int8",
        "uint8",
        "bool",
        # vLLM --kv-cache-dtype names (all stored as 1-byte elements, see STR_DTYPE_TO_TORCH_DTYPE)
        "fp8",
        "fp8_e4m3",
        "fp8_e5m2",
        "fp8_inc",
        "fp8_ds_mla",
        "int8_per_token_head",
        "fp8_per_token_head",
        "nvfp4",
        "turboquant_k8v4",
        "turboquant_4bit_nc",
        "turboquant_k3v4_nc",
        "turboquant_3bit_nc",
        # torch float8 dtype names
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    ),
}
DTYPE_SIZES: dict[str, int] = {name: n for n, names in _SIZES_BY_BYTES.items() for name in names}
"""Element size in bytes of every dtype name kvlab knows."""


def dtype_name(dtype: Any) -> str:
    """The dtype's name as looked up in DTYPE_SIZES: ``str(dtype)`` after its last dot."""
    return str(dtype).rsplit(".", 1)[-1]


def get_dtype_size(dtype: Any) -> int:
    """Bytes per element of ``dtype``.

    Mirrors: vllm/utils/torch_utils.py::get_dtype_size (torch-free: a table).

    Args:
        dtype: A name (``"float16"``) or an object whose str() ends with one (``torch.float16``).

    Returns:
        The element size in bytes.

    Raises:
        ValueError: If the dtype is not in DTYPE_SIZES.
    """
    try:
        return DTYPE_SIZES[dtype_name(dtype)]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; known: {', '.join(sorted(DTYPE_SIZES))}"
        ) from None


class KVQuantMode(IntEnum):
    """How a KV cache dtype is quantised. Mirrors: vllm/v1/kv_cache_interface.py::KVQuantMode."""

    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    NVFP4 = 4

    @property
    def is_per_token_head(self) -> bool:
        """True for the modes that store one fp32 scale per token and head."""
        return self in (KVQuantMode.INT8_PER_TOKEN_HEAD, KVQuantMode.FP8_PER_TOKEN_HEAD)

    @property
    def is_nvfp4(self) -> bool:
        """True for packed fp4 data plus fp8 block scales."""
        return self == KVQuantMode.NVFP4


def get_kv_quant_mode(kv_cache_dtype: str) -> KVQuantMode:
    """Map a ``--kv-cache-dtype`` string to its KVQuantMode. Mirrors vLLM's get_kv_quant_mode."""
    if kv_cache_dtype == "int8_per_token_head":
        return KVQuantMode.INT8_PER_TOKEN_HEAD
    if kv_cache_dtype == "fp8_per_token_head":
        return KVQuantMode.FP8_PER_TOKEN_HEAD
    if kv_cache_dtype == "nvfp4":
        return KVQuantMode.NVFP4
    if isinstance(kv_cache_dtype, str) and kv_cache_dtype.startswith("fp8"):
        return KVQuantMode.FP8_PER_TENSOR
    return KVQuantMode.NONE


def is_quantized_kv_cache(kv_cache_dtype: str) -> bool:
    """True unless ``kv_cache_dtype`` maps to KVQuantMode.NONE."""
    return get_kv_quant_mode(kv_cache_dtype) != KVQuantMode.NONE


def kv_cache_uses_per_token_head_scales(kv_cache_dtype: str) -> bool:
    """True if ``kv_cache_dtype`` needs per-token-head scales."""
    return get_kv_quant_mode(kv_cache_dtype).is_per_token_head


def nvfp4_kv_cache_full_dim(head_size: int) -> int:
    """Packed last dim of an NVFP4 cache: fp4 data (head_size/2) + fp8 scales (head_size/16)."""
    return head_size // 2 + head_size // 16


def cdiv(a: int, b: int) -> int:
    """Ceiling division: ``-(a // -b)``. Mirrors vllm/utils/math_utils.py::cdiv."""
    return -(a // -b)


def round_up(x: int, y: int) -> int:
    """Smallest multiple of ``y`` that is >= ``x``. Mirrors vllm/utils/math_utils.py::round_up."""
    return ((x + y - 1) // y) * y
