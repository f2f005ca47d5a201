"""Block hashes: how a full block of tokens becomes a prefix-cache key.

Mirrors: the hashing half of vllm/v1/core/kv_cache_utils.py (BlockHash, BlockHashWithGroupId,
NONE_HASH, init_none_hash, need_extra_keys, generate_block_hash_extra_keys, hash_block_tokens,
get_request_block_hasher, BlockHashListWithBlockSize). Re-exported by ``kvlab.core.kv_cache_utils``.

A block's hash chains in its parent's, so equal hashes mean equal *prefixes*, not just equal
blocks::

    tokens   [ t0 .. t3 ][ t4 .. t7 ][ t8 .. t11 ][ t12 t13 ]   (block_size = 4)
    hashes     H0          H1          H2           (not full: no hash)
    H0 = hash_fn((NONE_HASH, (t0..t3), extra_keys_0))
    H1 = hash_fn((H0,        (t4..t7), extra_keys_1))

Examples:
    >>> from kvlab.core.hashing import sha256
    >>> init_none_hash(sha256)
    >>> h0 = hash_block_tokens(sha256, None, [1, 2, 3, 4])
    >>> h1 = hash_block_tokens(sha256, h0, [5, 6, 7, 8])
    >>> len(h1), get_group_id(make_block_hash_with_group_id(h1, 3))
    (32, 3)
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NewType, TypeAlias

from kvlab.core.hashing import sha256_cbor, xxhash_cbor

if TYPE_CHECKING:
    from kvlab.core.request import Request

logger = logging.getLogger(__name__)

__all__ = [
    "BlockHash",
    "BlockHashList",
    "BlockHashListWithBlockSize",
    "BlockHashWithGroupId",
    "ExternalBlockHash",
    "generate_block_hash_extra_keys",
    "get_block_hash",
    "get_group_id",
    "get_request_block_hasher",
    "hash_block_tokens",
    "init_none_hash",
    "make_block_hash_with_group_id",
    "maybe_convert_block_hash",
    "need_extra_keys",
]

BlockHash = NewType("BlockHash", bytes)
"""The hash of one full block (32 bytes for sha256*, 16 for xxhash*)."""

BlockHashWithGroupId = NewType("BlockHashWithGroupId", bytes)
"""A BlockHash followed by its kv_cache_group_id as 4 big-endian bytes: the cached-map key."""

ExternalBlockHash: TypeAlias = bytes | int
"""What KV events carry: the raw bytes, or their low 64 bits as an int (vLLM's default)."""

# NOTE: vLLM reads VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (default "1"); kvlab reads the same
# variable once at import. Tests may flip this module attribute.
KV_EVENTS_USE_INT_BLOCK_HASHES: bool = bool(
    int(os.getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1"))
)

# NOTE: NONE_HASH (the parent of every first block) is created by init_none_hash(); it is
# deliberately absent until then, so reading it early fails loudly (vLLM: NameError).
_CBOR_HASH_FUNCTIONS = frozenset({sha256_cbor, xxhash_cbor})


def make_block_hash_with_group_id(block_hash: BlockHash, group_id: int) -> BlockHashWithGroupId:
    """Pack a block hash and a kv_cache_group_id into one bytes key.

    Mirrors: vllm/v1/core/kv_cache_utils.py::make_block_hash_with_group_id.

    Args:
        block_hash: The block's hash.
        group_id: The kv_cache_group_id, 0 <= group_id < 2**32.

    Returns:
        ``block_hash + group_id.to_bytes(4, "big")``.

    Raises:
        OverflowError: If ``group_id`` is negative or does not fit in 4 bytes.
    """
    return BlockHashWithGroupId(block_hash + group_id.to_bytes(4, "big", signed=False))


def get_block_hash(key: BlockHashWithGroupId) -> BlockHash:
    """Return the BlockHash part of a BlockHashWithGroupId (all but the last 4 bytes).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_block_hash.
    """
    return BlockHash(key[:-4])


def get_group_id(key: BlockHashWithGroupId) -> int:
    """Return the kv_cache_group_id packed in the last 4 bytes of ``key``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_group_id.
    """
    return int.from_bytes(key[-4:], "big", signed=False)


def maybe_convert_block_hash(hash_bytes: BlockHash) -> ExternalBlockHash:
    """Convert a hash to its KV-event form.

    Mirrors: vllm/v1/core/kv_cache_utils.py::maybe_convert_block_hash.

    Args:
        hash_bytes: A BlockHash.

    Returns:
        The low 64 bits of the big-endian integer value when ``KV_EVENTS_USE_INT_BLOCK_HASHES``
        (env ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``, default on), else the bytes unchanged.
    """
    if not KV_EVENTS_USE_INT_BLOCK_HASHES:
        return hash_bytes
    return int.from_bytes(hash_bytes, byteorder="big") & ((1 << 64) - 1)


def init_none_hash(hash_fn: Callable[[Any], bytes]) -> None:
    """Set the module-wide NONE_HASH, the parent hash of every first block.

    Mirrors: vllm/v1/core/kv_cache_utils.py::init_none_hash. With ``PYTHONHASHSEED`` set,
    ``NONE_HASH = hash_fn(os.environ["PYTHONHASHSEED"])`` (the *string*), so hashes agree with
    vLLM's for the same seed and hash function; unset, it is 32 random bytes.

    Args:
        hash_fn: The prefix-cache hash function (``kvlab.core.hashing``).

    Raises:
        TypeError: If ``hash_fn`` is not callable (e.g. the name ``"sha256"``; NONE_HASH kept).
    """
    global NONE_HASH
    _check_hash_fn(hash_fn, "hash_fn")
    hash_seed = os.getenv("PYTHONHASHSEED")
    if hash_seed is None and hash_fn in _CBOR_HASH_FUNCTIONS:
        logger.warning(
            "PYTHONHASHSEED is not set: CBOR block hashes will not be reproducible across "
            "processes. Set PYTHONHASHSEED to a fixed value for reproducible hashes."
        )
    if hash_seed is None:
        NONE_HASH = BlockHash(os.urandom(32))
    else:
        NONE_HASH = BlockHash(hash_fn(hash_seed))


def _check_hash_fn(hash_fn: Any, name: str) -> None:
    if not callable(hash_fn):
        hint = (
            f"; for a name use get_hash_fn_by_name({hash_fn!r})" if isinstance(hash_fn, str) else ""
        )
        raise TypeError(
            f"{name} must be a hash function (callable: bytes-like or object -> bytes, e.g. "
            f"kvlab.core.hashing.sha256), got {type(hash_fn).__name__} {hash_fn!r}{hint}"
        )


def _get_none_hash() -> BlockHash:
    try:
        return NONE_HASH  # type: ignore[name-defined]
    except NameError:
        raise RuntimeError(
            "NONE_HASH is not initialised: call kvlab.core.kv_cache_utils.init_none_hash(hash_fn) "
            "once before hashing blocks (vLLM does this when the engine starts)."
        ) from None


def need_extra_keys(request: Request) -> bool:
    """Whether the request's block hashes need extra keys (multimodal, LoRA or cache_salt).

    Mirrors: vllm/v1/core/kv_cache_utils.py::need_extra_keys.
    """
    return (
        bool(request.mm_features)
        or request.lora_request is not None
        or request.cache_salt is not None
    )


def _gen_mm_extra_hash_keys(
    request: Request, start_token_idx: int, end_token_idx: int, start_mm_idx: int
) -> tuple[list[Any], int]:
    """(identifier, offset of the item relative to block start) for each mm item in the block.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_gen_mm_extra_hash_keys. ``mm_features`` must be
    sorted by ``mm_position.offset``; ``start_mm_idx == -1`` means "start at the last item".
    """
    extra_keys: list[Any] = []
    mm_features = request.mm_features
    if not mm_features:
        return extra_keys, start_mm_idx
    last_pos = mm_features[-1].mm_position
    if last_pos.offset + last_pos.length <= start_token_idx:
        return extra_keys, start_mm_idx  # the block lies after every mm item
    if start_mm_idx < 0:
        if -start_mm_idx > len(mm_features):
            raise ValueError(
                f"start_mm_idx {start_mm_idx} out of range for {len(mm_features)} mm items"
            )
        start_mm_idx += len(mm_features)

    curr_mm_idx = start_mm_idx
    while curr_mm_idx < len(mm_features):
        feature = mm_features[curr_mm_idx]
        if feature.identifier is None:
            raise ValueError(f"mm_features[{curr_mm_idx}].identifier is None; every item needs one")
        offset, length = feature.mm_position.offset, feature.mm_position.length
        if end_token_idx <= offset:
            break  # the block ends before this item starts
        if start_token_idx >= offset + length:
            curr_mm_idx += 1  # the block starts after this item ends
            continue
        extra_keys.append((feature.identifier, offset - start_token_idx))
        if end_token_idx >= offset + length:
            curr_mm_idx += 1  # the item ends inside this block; the next may start here too
        else:
            break  # the item runs past this block
    return extra_keys, curr_mm_idx


def tensor_data(block_embeds: Any) -> bytes | memoryview:
    """Raw bytes of a slice of prompt embeddings (torch tensor or numpy-like), row-major.

    Mirrors: vllm/v1/utils.py::tensor_data (imported by vLLM's kv_cache_utils; kvlab also takes
    numpy arrays). Raises TypeError for anything else.
    """
    torch = sys.modules.get("torch")  # NOTE: never imported here; present if a tensor was passed
    if torch is not None and isinstance(block_embeds, torch.Tensor):
        flat = block_embeds.flatten().cpu().contiguous().view(torch.uint8)
        return flat.numpy().data
    tobytes = getattr(block_embeds, "tobytes", None)
    if tobytes is None:
        raise TypeError(
            f"prompt_embeds must be a torch.Tensor or numpy array, got {type(block_embeds)!r}"
        )
    return tobytes()


def _gen_prompt_embeds_extra_hash_keys(
    request: Request, start_token_idx: int, end_token_idx: int
) -> list[bytes]:
    """SHA-256 of the block's prompt embeddings, cached per (start, end) on the request.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_gen_prompt_embeds_extra_hash_keys.
    """
    if request.prompt_embeds is None:
        return []
    block_range = (start_token_idx, end_token_idx)
    embeds_hash = request._prompt_embeds_per_block_hashes.get(block_range)
    if embeds_hash is None:
        block_embeds = request.prompt_embeds[start_token_idx:end_token_idx]
        # NOTE: looked up in kv_cache_utils at call time, where vLLM's tests patch it.
        to_bytes = getattr(sys.modules.get("kvlab.core.kv_cache_utils"), "tensor_data", tensor_data)
        embeds_hash = hashlib.sha256(to_bytes(block_embeds)).digest()
        request._prompt_embeds_per_block_hashes[block_range] = embeds_hash
    return [embeds_hash]


def generate_block_hash_extra_keys(
    request: Request, start_token_idx: int, end_token_idx: int, start_mm_idx: int
) -> tuple[tuple[Any, ...] | None, int]:
    """Extra keys of one block: LoRA name, mm items, cache_salt (first block only), embeds hash.

    Mirrors: vllm/v1/core/kv_cache_utils.py::generate_block_hash_extra_keys (same key order:
    ``lora + mm + cache_salt + prompt_embeds``).

    Args:
        request: The request (kvlab.core.request.Request or vLLM's).
        start_token_idx: First token of the block (tokens).
        end_token_idx: One past the last token of the block (tokens).
        start_mm_idx: Index into ``request.mm_features`` to start from (-1 = the last item).

    Returns:
        ``(extra_keys or None if there are none, the mm index the next block starts from)``.
    """
    mm_keys, next_mm_idx = _gen_mm_extra_hash_keys(
        request, start_token_idx, end_token_idx, start_mm_idx
    )
    lora_keys = [request.lora_request.lora_name] if request.lora_request else []
    salt_keys = [request.cache_salt] if (start_token_idx == 0 and request.cache_salt) else []
    embeds_keys = _gen_prompt_embeds_extra_hash_keys(request, start_token_idx, end_token_idx)
    extra_keys = lora_keys + mm_keys + salt_keys + embeds_keys
    if not extra_keys:
        return None, next_mm_idx
    return tuple(extra_keys), next_mm_idx


def hash_block_tokens(
    hash_function: Callable[[Any], bytes],
    parent_block_hash: BlockHash | None,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None = None,
) -> BlockHash:
    """Hash one full block, chained to its parent.

    Mirrors: vllm/v1/core/kv_cache_utils.py::hash_block_tokens.

    Args:
        hash_function: A function from ``kvlab.core.hashing``.
        parent_block_hash: The previous block's hash; None (or empty) for the first block,
            which then chains to NONE_HASH.
        curr_block_token_ids: The block's token ids (a full block: block_size tokens).
        extra_keys: From generate_block_hash_extra_keys, or None.

    Returns:
        ``hash_function((parent_or_NONE_HASH, tuple(curr_block_token_ids), extra_keys))``.

    Raises:
        RuntimeError: If init_none_hash has not been called and the block has no parent.
    """
    if not parent_block_hash:
        parent_block_hash = _get_none_hash()
    return BlockHash(hash_function((parent_block_hash, tuple(curr_block_token_ids), extra_keys)))


def get_request_block_hasher(
    block_size: int, caching_hash_fn: Callable[[Any], bytes]
) -> Callable[[Request], list[BlockHash]]:
    """Build the function a Request calls to hash its newly full blocks.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_request_block_hasher.

    Args:
        block_size: Hash granularity (tokens per hashed block; vLLM's hash_block_size).
        caching_hash_fn: A function from ``kvlab.core.hashing``.

    Returns:
        ``hasher(request) -> list[BlockHash]``: hashes of the full blocks after the
        ``len(request.block_hashes)`` already hashed, chained to the last of them.

    Raises:
        ValueError: If ``block_size`` is not a positive int.
        TypeError: If ``caching_hash_fn`` is not callable.
    """
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size <= 0:
        raise ValueError(f"block_size must be a positive int (tokens), got {block_size!r}")
    _check_hash_fn(caching_hash_fn, "caching_hash_fn")

    def request_block_hasher(request: Request) -> list[BlockHash]:
        start_token_idx = len(request.block_hashes) * block_size
        num_tokens = request.num_tokens
        if start_token_idx + block_size > num_tokens:
            return []  # no new full block
        # NOTE: past the first block only the last mm item can still overlap new blocks.
        curr_mm_idx = -1 if start_token_idx > 0 else 0
        prev_block_hash = request.block_hashes[-1] if request.block_hashes else None
        new_block_hashes: list[BlockHash] = []
        while start_token_idx + block_size <= num_tokens:
            end_token_idx = start_token_idx + block_size
            extra_keys, curr_mm_idx = generate_block_hash_extra_keys(
                request, start_token_idx, end_token_idx, curr_mm_idx
            )
            block_tokens = request.all_token_ids[start_token_idx:end_token_idx]
            prev_block_hash = hash_block_tokens(
                caching_hash_fn, prev_block_hash, block_tokens, extra_keys
            )
            new_block_hashes.append(prev_block_hash)
            start_token_idx = end_token_idx
        return new_block_hashes

    return request_block_hasher


class BlockHashListWithBlockSize:
    """A lazy view of block hashes at a coarser block size (concatenated hashes).

    Mirrors: vllm/v1/core/kv_cache_utils.py::BlockHashListWithBlockSize. Hashes computed every
    ``hash_block_size`` tokens are joined ``scale_factor`` at a time::

        hash_block_size 4:   | A | B | C | D | E |       target_block_size 8:  | AB | CD |
                                                         (E is not a full 8-token block)

    Args:
        block_hashes: Hashes at ``hash_block_size`` (the list is read live, not copied).
        hash_block_size: Tokens per hash in ``block_hashes``.
        target_block_size: Tokens per block of the view; a multiple of ``hash_block_size``.

    Raises:
        ValueError: If ``target_block_size`` is not a positive multiple of ``hash_block_size``.
    """

    def __init__(self, block_hashes: list[BlockHash], hash_block_size: int, target_block_size: int):
        if hash_block_size <= 0 or target_block_size <= 0 or target_block_size % hash_block_size:
            raise ValueError(
                f"target_block_size ({target_block_size}) must be a positive multiple of "
                f"hash_block_size ({hash_block_size})"
            )
        self.block_hashes = block_hashes
        self.scale_factor = target_block_size // hash_block_size

    def __len__(self) -> int:
        return len(self.block_hashes) // self.scale_factor

    def __getitem__(self, idx):
        if isinstance(idx, int):
            return self._get_value_at(idx)
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            return [self._get_value_at(i) for i in range(start, stop, step)]
        raise TypeError(f"Invalid index type: {type(idx)!r}")

    def __iter__(self) -> Iterator[BlockHash]:
        for i in range(len(self)):
            yield self._get_value_at(i)

    def _get_value_at(self, idx: int) -> BlockHash:
        # NOTE: like vLLM, no bounds check and no negative-index wrap-around.
        base = idx * self.scale_factor
        return BlockHash(b"".join(self.block_hashes[base : base + self.scale_factor]))


BlockHashList = list[BlockHash] | BlockHashListWithBlockSize
