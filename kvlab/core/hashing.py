"""The four prefix-cache hash functions vLLM offers, byte-identical to vLLM 0.22.1.

Mirrors: vllm/utils/hashing.py (sha256, sha256_cbor, xxhash, xxhash_cbor, get_hash_fn_by_name).

A block hash is ``hash_fn((parent_block_hash, token_ids_tuple, extra_keys))`` (see
``kvlab.core.kv_cache_utils.hash_block_tokens``). The functions differ only in how that tuple is
turned into bytes and which digest is applied:

===============  =====================================  ======================  ============
name             serialisation                          digest                  output bytes
===============  =====================================  ======================  ============
``sha256``       ``pickle.dumps(x, HIGHEST_PROTOCOL)``  SHA-256                 32
``sha256_cbor``  ``cbor2.dumps(x, canonical=True)``     SHA-256                 32
``xxhash``       ``pickle.dumps(x, HIGHEST_PROTOCOL)``  xxh3-128                16
``xxhash_cbor``  ``cbor2.dumps(x, canonical=True)``     xxh3-128                16
===============  =====================================  ======================  ============

Examples:
    >>> sha256(1).hex()[:16]
    'bbe30a25430db256'
    >>> len(xxhash_cbor((b"", (1, 2), None)))
    16

NOTE: the pickle-based functions depend on the pickle protocol of the running Python
(HIGHEST_PROTOCOL is 5 on 3.8+), exactly as vLLM's do; the CBOR ones are language-neutral.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from typing import Any

import cbor2

try:  # xxhash is optional, as in vLLM: only the xxhash* functions need it.
    import xxhash as _xxhash

    if not hasattr(_xxhash, "xxh3_128_digest"):
        _xxhash = None
except ImportError:  # pragma: no cover - exercised only without xxhash installed
    _xxhash = None

__all__ = [
    "HASH_FN_NAMES",
    "get_hash_fn_by_name",
    "sha256",
    "sha256_cbor",
    "xxhash",
    "xxhash_cbor",
]

HASH_FN_NAMES = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")


def sha256(input: Any) -> bytes:  # noqa: A002 - vLLM's parameter name
    """SHA-256 over the pickled object.

    Mirrors: vllm/utils/hashing.py::sha256.

    Args:
        input: Any picklable object (vLLM passes ``(parent_hash, token_ids, extra_keys)``).

    Returns:
        The 32-byte digest.

    Raises:
        pickle.PicklingError: If ``input`` cannot be pickled.
    """
    return hashlib.sha256(pickle.dumps(input, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def sha256_cbor(input: Any) -> bytes:  # noqa: A002
    """SHA-256 over canonical CBOR, reproducible outside Python.

    Mirrors: vllm/utils/hashing.py::sha256_cbor.

    Args:
        input: An object cbor2 can encode (ints, bytes, str, tuples/lists, dicts, None).

    Returns:
        The 32-byte digest.

    Raises:
        cbor2.CBOREncodeError: If ``input`` holds a type CBOR cannot encode.
    """
    return hashlib.sha256(cbor2.dumps(input, canonical=True)).digest()


def _xxhash_digest(data: bytes) -> bytes:
    if _xxhash is None:
        raise ModuleNotFoundError(
            "xxhash (with xxh3_128_digest) is needed for the 'xxhash' and 'xxhash_cbor' "
            "hash functions; install it with `pip install xxhash`."
        )
    return _xxhash.xxh3_128_digest(data)


def xxhash(input: Any) -> bytes:  # noqa: A002
    """xxh3-128 over the pickled object (fast, not cryptographic).

    Mirrors: vllm/utils/hashing.py::xxhash.

    Args:
        input: Any picklable object.

    Returns:
        The 16-byte digest.

    Raises:
        ModuleNotFoundError: If the ``xxhash`` package is missing.
    """
    return _xxhash_digest(pickle.dumps(input, protocol=pickle.HIGHEST_PROTOCOL))


def xxhash_cbor(input: Any) -> bytes:  # noqa: A002
    """xxh3-128 over canonical CBOR.

    Mirrors: vllm/utils/hashing.py::xxhash_cbor.

    Args:
        input: An object cbor2 can encode.

    Returns:
        The 16-byte digest.

    Raises:
        ModuleNotFoundError: If the ``xxhash`` package is missing.
    """
    return _xxhash_digest(cbor2.dumps(input, canonical=True))


_BY_NAME: dict[str, Callable[[Any], bytes]] = {
    "sha256": sha256,
    "sha256_cbor": sha256_cbor,
    "xxhash": xxhash,
    "xxhash_cbor": xxhash_cbor,
}


def get_hash_fn_by_name(hash_fn_name: str) -> Callable[[Any], bytes]:
    """Look a hash function up by its ``--prefix-caching-hash-algo`` name.

    Mirrors: vllm/utils/hashing.py::get_hash_fn_by_name.

    Args:
        hash_fn_name: One of ``HASH_FN_NAMES``.

    Returns:
        The hash function.

    Raises:
        ValueError: If the name is not one of ``HASH_FN_NAMES``.
    """
    try:
        return _BY_NAME[hash_fn_name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unsupported hash function: {hash_fn_name!r}; allowed: {', '.join(HASH_FN_NAMES)}"
        ) from None
