"""KV-cache utilities: blocks, the free queue, block hashing, and sizing the cache.

Mirrors: vllm/v1/core/kv_cache_utils.py, function for function and in the same order:

* block hashes: ``BlockHash``, ``BlockHashWithGroupId`` and its packing helpers, ``NONE_HASH``
  and ``init_none_hash``, the extra keys (multimodal items, LoRA name, cache_salt, prompt
  embeddings), ``hash_block_tokens``, ``get_request_block_hasher``;
* ``KVCacheBlock`` and ``FreeKVCacheBlockQueue`` (the LRU free list, a doubly linked list
  through the blocks themselves);
* sizing: from each layer's KVCacheSpec and a memory budget to KV cache groups, tensors and a
  block count (``get_kv_cache_groups``, ``get_kv_cache_config_from_groups``,
  ``get_kv_cache_configs`` and the checks and estimates around them);
* ``BlockHashListWithBlockSize``, a view of the hashes at a coarser block size.

kvlab's additions, each outside vLLM's statements: a ``recorder`` on the free queue (one line
after each operation, see ``kvlab.core.recorder``), ``guard_*`` functions called on the first
line of the public entry points (bad input raises a clear error before anything changes; the
free queue trusts callers inside kvlab.core, as vLLM's does), and ``get_kv_cache_config``
(one worker's config in one call, for notebooks).

A block's hash chains in its parent's, so equal hashes mean equal *prefixes*::

    tokens   [ t0 .. t3 ][ t4 .. t7 ][ t8 .. t11 ][ t12 t13 ]   (block_size = 4)
    hashes     H0          H1          H2           (not full: no hash)
    H0 = hash_fn((NONE_HASH, (t0..t3), extra_keys_0))
    H1 = hash_fn((H0,        (t4..t7), extra_keys_1))

The free queue links the blocks themselves between two sentinels that are never popped::

    fake_head <-> b1 <-> b2 <-> ... <-> bn <-> fake_tail
                  ^ popleft / popleft_n        ^ append / append_n
                  (evicted first)              (evicted last)

Examples:
    >>> init_none_hash(sha256)
    >>> h0 = hash_block_tokens(sha256, None, [1, 2, 3, 4])
    >>> len(h0), get_group_id(make_block_hash_with_group_id(h0, 3))
    (32, 3)
    >>> blocks = [KVCacheBlock(i) for i in range(4)]
    >>> q = FreeKVCacheBlockQueue(blocks)
    >>> q.popleft().block_id, q.num_free_blocks
    (0, 3)
    >>> q.remove(blocks[2]); q.append(blocks[0])
    >>> [b.block_id for b in q.get_all_free_blocks()]
    [1, 3, 0]
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, NewType, TypeAlias, cast, overload

from kvlab.core.logger import init_logger
from kvlab.core.config import VllmConfig
from kvlab.core.dtypes import cdiv, get_dtype_size, round_up
from kvlab.core.hashing import (  # noqa: F401 - re-exported under vLLM's module
    get_hash_fn_by_name,
    sha256,
    sha256_cbor,
    xxhash,
    xxhash_cbor,
)
from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVCacheSpecMergeError,
    KVCacheTensor,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)

if TYPE_CHECKING:
    from kvlab.core.recorder import KVRecorder
    from kvlab.core.request import Request

__all__ = [
    "NONE_HASH",
    "BlockHash",
    "BlockHashList",
    "BlockHashListWithBlockSize",
    "BlockHashWithGroupId",
    "ExternalBlockHash",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "check_enough_kv_cache_memory",
    "create_kv_cache_group_specs",
    "estimate_max_model_len",
    "generate_block_hash_extra_keys",
    "generate_scheduler_kv_cache_config",
    "get_block_hash",
    "get_group_id",
    "get_hash_fn_by_name",
    "get_kv_cache_config",
    "get_kv_cache_config_from_groups",
    "get_kv_cache_configs",
    "get_kv_cache_groups",
    "get_max_concurrency_for_kv_cache_config",
    "get_num_blocks",
    "get_request_block_hasher",
    "get_uniform_page_size",
    "group_and_unify_kv_cache_specs",
    "hash_block_tokens",
    "init_none_hash",
    "is_kv_cache_page_size_uniform",
    "is_kv_cache_spec_uniform",
    "is_kv_cache_type_attention_free",
    "make_block_hash_with_group_id",
    "max_memory_usage_bytes",
    "may_override_num_blocks",
    "maybe_convert_block_hash",
    "need_extra_keys",
    "resolve_kv_cache_block_sizes",
    "sha256",
    "sha256_cbor",
    "tensor_data",
    "unify_hybrid_kv_cache_specs",
    "unify_kv_cache_spec_page_size",
    "xxhash",
    "xxhash_cbor",
]

BlockHash = NewType("BlockHash", bytes)
"""The hash of one full block (32 bytes for sha256*, 16 for xxhash*)."""

BlockHashWithGroupId = NewType("BlockHashWithGroupId", bytes)
"""A BlockHash followed by its kv_cache_group_id as 4 big-endian bytes: the cached-map key."""

ExternalBlockHash: TypeAlias = bytes | int
"""What KV events carry: the raw bytes, or their low 64 bits as an int (vLLM's default)."""

# NOTE: vLLM reads VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (default "1") through vllm.envs on every
# call; kvlab reads the same variable once, at import. Tests may flip this module attribute.
KV_EVENTS_USE_INT_BLOCK_HASHES: bool = bool(int(os.getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1")))


def make_block_hash_with_group_id(block_hash: BlockHash, group_id: int) -> BlockHashWithGroupId:
    """Pack a block hash and a kv_cache_group_id into one bytes key (the cached-map key).

    Mirrors: vllm/v1/core/kv_cache_utils.py::make_block_hash_with_group_id

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
    """The BlockHash part of a BlockHashWithGroupId (all but its last 4 bytes).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_block_hash
    """
    return BlockHash(key[:-4])


def get_group_id(key: BlockHashWithGroupId) -> int:
    """The kv_cache_group_id packed in the last 4 bytes of ``key``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_group_id
    """
    return int.from_bytes(key[-4:], "big", signed=False)


def maybe_convert_block_hash(hash_bytes: BlockHash) -> ExternalBlockHash:
    """A hash in the form KV events carry it.

    Mirrors: vllm/v1/core/kv_cache_utils.py::maybe_convert_block_hash

    Returns:
        The low 64 bits of the big-endian integer value when ``KV_EVENTS_USE_INT_BLOCK_HASHES``
        (env ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``, default on), else the bytes unchanged.
    """
    if not KV_EVENTS_USE_INT_BLOCK_HASHES:
        return hash_bytes
    return int.from_bytes(hash_bytes, byteorder="big") & ((1 << 64) - 1)


logger = init_logger(__name__)

# NOTE: NONE_HASH, the parent of every first block, exists only once init_none_hash() ran (as in
# vLLM, where it is only annotated here); module __getattr__ below names the missing call.
NONE_HASH: BlockHash
_CBOR_HASH_FUNCTIONS = frozenset({sha256_cbor, xxhash_cbor})


def init_none_hash(hash_fn: Callable[[Any], bytes]) -> None:
    """Set the module-wide NONE_HASH, the parent hash of every first block.

    With ``PYTHONHASHSEED`` set, ``NONE_HASH = hash_fn(os.environ["PYTHONHASHSEED"])`` (the
    *string*), so hashes agree with vLLM's for the same seed and hash function; unset, it is 32
    random bytes.

    Mirrors: vllm/v1/core/kv_cache_utils.py::init_none_hash

    Args:
        hash_fn: The prefix-cache hash function (``kvlab.core.hashing``).

    Raises:
        TypeError: If ``hash_fn`` is not callable (e.g. the name ``"sha256"``); NONE_HASH kept.
    """
    guard_hash_fn(hash_fn, "hash_fn")
    global NONE_HASH

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


@dataclass(slots=True)
class KVCacheBlock:
    """Metadata of one KV-cache block (the tensors live in the worker).

    Mirrors: vllm/v1/core/kv_cache_utils.py::KVCacheBlock (same fields and repr). Differs:
    setting ``block_hash`` on a block that has one raises ValueError (vLLM asserts).

    Attributes:
        block_id: Index of the block, 0 <= block_id < num_gpu_blocks.
        ref_cnt: How many requests (per group) hold the block; 0 = free or evictable.
        prev_free_block: Free-list link; only FreeKVCacheBlockQueue writes it.
        next_free_block: Free-list link; only FreeKVCacheBlockQueue writes it.
        is_null: True for the pool's null_block (block 0), which is never cached or freed.
    """

    block_id: int
    ref_cnt: int = 0
    # NOTE: set only while the block is full AND in cached_block_hash_to_block.
    _block_hash: BlockHashWithGroupId | None = None
    prev_free_block: KVCacheBlock | None = None
    next_free_block: KVCacheBlock | None = None
    is_null: bool = False

    @property
    def block_hash(self) -> BlockHashWithGroupId | None:
        """The cached-map key (BlockHashWithGroupId) of a cached block, else None.

        Raises:
            ValueError: On assignment when the block already has a hash (reset_hash first).
        """
        return self._block_hash

    @block_hash.setter
    def block_hash(self, block_hash: BlockHashWithGroupId) -> None:
        # NOTE: vLLM asserts; a clear error names the block.
        if self.block_hash is not None:
            raise ValueError(f"block {self.block_id} already has a block_hash; call reset_hash() first")
        self._block_hash = block_hash

    def reset_hash(self) -> None:
        """Forget the block's hash (on eviction from the prefix cache)."""
        self._block_hash = None

    def __repr__(self) -> str:
        prev_block_id = self.prev_free_block.block_id if self.prev_free_block else None
        next_block_id = self.next_free_block.block_id if self.next_free_block else None
        return (
            f"KVCacheBlock(block_id={self.block_id}, "
            f"ref_cnt={self.ref_cnt}, "
            f"_block_hash={self._block_hash!r}, "
            f"prev_free_block={prev_block_id}, "
            f"next_free_block={next_block_id})"
        )


class FreeKVCacheBlockQueue:
    """The free blocks in eviction order: O(1) popleft, append and remove-from-the-middle.

    The queue starts in block_id order. BlockPool.free_blocks appends a request's blocks tail
    first, so the least recently used block, and within one request the block with the most
    hashed tokens, sits at the head and is evicted first.

    Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue. Differs: ``recorder``; a
    call from outside kvlab.core with bad input (popleft_n with n < 0, n > num_free_blocks or a
    non-int; append / append_n of a block already queued or listed twice) raises before any
    change, where vLLM asserts or corrupts the list.

    Args:
        blocks: The blocks to link, in queue order (head first).

    Attributes:
        num_free_blocks: Blocks in the queue (blocks).
        fake_free_list_head: Sentinel before the first block (block_id -1).
        fake_free_list_tail: Sentinel after the last block (block_id -1).
        recorder: None (off) or a ``kvlab.core.recorder.KVRecorder``.
    """

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.num_free_blocks = len(blocks)
        self.recorder: KVRecorder | None = None

        # Link each block to its neighbours.
        for i in range(self.num_free_blocks):
            if i > 0:
                blocks[i].prev_free_block = blocks[i - 1]
            if i < self.num_free_blocks - 1:
                blocks[i].next_free_block = blocks[i + 1]

        # NOTE: invariant: every real block in the queue has non-None prev and next links (the
        # sentinels are never popped); every block outside the queue has both links None.
        self.fake_free_list_head = KVCacheBlock(block_id=-1)
        self.fake_free_list_tail = KVCacheBlock(block_id=-1)
        if self.num_free_blocks > 0:
            self.fake_free_list_head.next_free_block = blocks[0]
            blocks[0].prev_free_block = self.fake_free_list_head
            self.fake_free_list_tail.prev_free_block = blocks[-1]
            blocks[-1].next_free_block = self.fake_free_list_tail
        else:
            self.fake_free_list_head.next_free_block = self.fake_free_list_tail
            self.fake_free_list_tail.prev_free_block = self.fake_free_list_head

    def popleft(self) -> KVCacheBlock:
        """Unlink and return the head block (the least recently used).

        Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.popleft

        Returns:
            The first free block.

        Raises:
            ValueError: If the queue is empty ("No free blocks available", as vLLM).
            RuntimeError: If the head block has no next link (corrupted list).
        """
        if (
            self.fake_free_list_head.next_free_block is self.fake_free_list_tail
            or self.fake_free_list_head.next_free_block is None
        ):
            assert self.num_free_blocks == 0, (
                f"num_free_blocks ({self.num_free_blocks}) is out of sync with the free list."
            )
            raise ValueError("No free blocks available")

        first_block: KVCacheBlock = self.fake_free_list_head.next_free_block

        if first_block.next_free_block is None:
            raise RuntimeError(
                "Invalid block found in popleft() which doesn't have a valid next_free_block"
            )

        # The head sentinel now points at the second block (or the tail sentinel).
        self.fake_free_list_head.next_free_block = first_block.next_free_block
        first_block.next_free_block.prev_free_block = self.fake_free_list_head

        first_block.prev_free_block = first_block.next_free_block = None

        self.num_free_blocks -= 1
        if self.recorder is not None:
            self.recorder.popleft(first_block.block_id)
        return first_block

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Unlink and return the first ``n`` blocks, head first.

        Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.popleft_n

        Args:
            n: Number of blocks to pop (blocks), 0 <= n <= num_free_blocks.

        Returns:
            The popped blocks in queue order (empty for n == 0).

        Raises:
            ValueError: If n < 0 or n > num_free_blocks (nothing is changed).
            TypeError: If n is not an int (nothing is changed).
        """
        guard_popleft_n(self, n)
        if n == 0:
            return []
        assert self.num_free_blocks >= n
        self.num_free_blocks -= n

        curr_block = self.fake_free_list_head.next_free_block
        ret = []
        for _ in range(n):
            assert curr_block is not None
            ret.append(curr_block)
            last_block = curr_block
            curr_block = curr_block.next_free_block
            last_block.prev_free_block = None
            last_block.next_free_block = None

        if curr_block is not None:
            # The new first block (or the tail sentinel) follows the head sentinel.
            self.fake_free_list_head.next_free_block = curr_block
            curr_block.prev_free_block = self.fake_free_list_head
        if self.recorder is not None:
            self.recorder.popleft_n([b.block_id for b in ret])
        return ret

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from anywhere in the queue (a cache hit on an evictable block).

        Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.remove

        Args:
            block: A block currently in the queue.

        Raises:
            RuntimeError: If ``block`` is not linked into the queue (as vLLM; nothing changed).
            TypeError: If ``block`` is not a KVCacheBlock (nothing changed).
        """
        guard_queue_block(block, "remove")
        if block.prev_free_block is None or block.next_free_block is None:
            raise RuntimeError(
                f"remove() called on an invalid block: {block} (allowed: a block in the free "
                "queue, i.e. with free-list links)"
            )

        block.prev_free_block.next_free_block = block.next_free_block
        block.next_free_block.prev_free_block = block.prev_free_block

        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1
        if self.recorder is not None:
            self.recorder.remove(block.block_id)

    def append(self, block: KVCacheBlock) -> None:
        """Link ``block`` at the tail (evicted last).

        Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.append

        Args:
            block: A block not currently in the queue.

        Raises:
            ValueError: If ``block`` is already in the queue (nothing changed; vLLM corrupts
                the list).
            TypeError: If ``block`` is not a KVCacheBlock (nothing changed).
            RuntimeError: If the fake tail lost its prev link (corrupted list).
        """
        guard_append(self, block)
        if self.fake_free_list_tail.prev_free_block is None:
            raise RuntimeError("prev_free_block of fake_free_list_tail should always exist")
        last_block: KVCacheBlock = self.fake_free_list_tail.prev_free_block

        last_block.next_free_block = block
        block.prev_free_block = last_block

        block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = block

        self.num_free_blocks += 1
        if self.recorder is not None:
            self.recorder.append(block.block_id)

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        """Link ``blocks`` at the tail, in the given order (blocks[0] is evicted first of them).

        Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.append_n

        Args:
            blocks: Blocks not currently in the queue, each listed once.

        Raises:
            ValueError: If a block is already in the queue or listed twice (nothing changed;
                vLLM corrupts the list).
            TypeError: If ``blocks`` is not a list of KVCacheBlock (nothing changed).
        """
        guard_append_n(self, blocks)
        if len(blocks) == 0:
            return

        last_block = self.fake_free_list_tail.prev_free_block
        assert last_block is not None, "prev_free_block of fake_free_list_tail should always exist"
        for block in blocks:
            block.prev_free_block = last_block
            last_block.next_free_block = block
            last_block = block

        last_block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = last_block

        self.num_free_blocks += len(blocks)
        if self.recorder is not None:
            self.recorder.append_n([b.block_id for b in blocks])

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """The queued blocks head to tail (O(n); for tests and views).

        Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.get_all_free_blocks

        Raises:
            RuntimeError: If the fake head lost its next link (corrupted list).
        """
        ret = []
        if self.fake_free_list_head.next_free_block is None:
            raise RuntimeError("next_free_block of fake_free_list_head should always exist")
        curr_block: KVCacheBlock = self.fake_free_list_head.next_free_block
        while curr_block.next_free_block is not None:
            ret.append(curr_block)
            curr_block = curr_block.next_free_block
        return ret


def need_extra_keys(request: Request) -> bool:
    """Whether the request's block hashes need extra keys (multimodal, LoRA or cache_salt).

    Mirrors: vllm/v1/core/kv_cache_utils.py::need_extra_keys
    """
    return (
        bool(request.mm_features)
        or (request.lora_request is not None)
        or (request.cache_salt is not None)
    )


def _gen_mm_extra_hash_keys(
    request: Request, start_token_idx: int, end_token_idx: int, start_mm_idx: int
) -> tuple[list[Any], int]:
    """(identifier, item offset relative to the block start) for each mm item in the block.

    ``mm_features`` must be sorted by ``mm_position.offset``; ``start_mm_idx == -1`` means
    "start at the last item" (a block completed by generated tokens can only overlap that one).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_gen_mm_extra_hash_keys

    Returns:
        ``(extra keys, the mm index the next block starts from)``.
    """
    extra_keys: list[Any] = []

    mm_features = request.mm_features
    if not mm_features:
        return extra_keys, start_mm_idx

    # The block lies after every mm item (late prefill, decode): nothing to add.
    last_pos = mm_features[-1].mm_position
    if last_pos.offset + last_pos.length <= start_token_idx:
        return extra_keys, start_mm_idx

    if start_mm_idx < 0:
        assert -start_mm_idx <= len(mm_features)
        start_mm_idx = len(mm_features) + start_mm_idx

    curr_mm_idx = start_mm_idx
    while mm_features and curr_mm_idx < len(mm_features):
        mm_feature = mm_features[curr_mm_idx]
        assert mm_feature.identifier is not None
        offset = mm_feature.mm_position.offset
        length = mm_feature.mm_position.length
        if end_token_idx > offset:
            if start_token_idx >= offset + length:
                # The block starts after this item ends.
                curr_mm_idx += 1
                continue

            # The item overlaps the block: key it with its offset from the block start, so the
            # same item at another position gives another hash.
            extra_keys.append((mm_feature.identifier, offset - start_token_idx))

            if end_token_idx >= offset + length:
                # The item ends inside this block; the next item may start here too.
                curr_mm_idx += 1
            else:
                # The item runs past this block.
                break
        else:
            # The block ends before this item starts.
            break
    return extra_keys, curr_mm_idx


def _gen_lora_extra_hash_keys(request: Request) -> list[str]:
    """``[lora_name]`` for a LoRA request, else ``[]``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_gen_lora_extra_hash_keys
    """
    if not request.lora_request:
        return []
    return [request.lora_request.lora_name]


def tensor_data(block_embeds: Any) -> bytes | memoryview:
    """Raw bytes of a slice of prompt embeddings (torch tensor or numpy-like), row-major.

    Mirrors: vllm/v1/utils.py::tensor_data (imported by vLLM's kv_cache_utils; kvlab also takes
    numpy arrays, and never imports torch itself).

    Raises:
        TypeError: For anything but a torch tensor or an object with ``tobytes()``.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(block_embeds, torch.Tensor):
        flat = block_embeds.flatten().cpu().contiguous().view(torch.uint8)
        return flat.numpy().data
    tobytes = getattr(block_embeds, "tobytes", None)
    if tobytes is None:
        raise TypeError(f"prompt_embeds must be a torch.Tensor or numpy array, got {type(block_embeds)!r}")
    return tobytes()


def _gen_prompt_embeds_extra_hash_keys(
    request: Request, start_token_idx: int, end_token_idx: int
) -> list[bytes]:
    """SHA-256 of the block's prompt embeddings, cached per (start, end) on the request.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_gen_prompt_embeds_extra_hash_keys
    """
    if request.prompt_embeds is None:
        return []
    block_range = (start_token_idx, end_token_idx)
    embeds_hash = request._prompt_embeds_per_block_hashes.get(block_range)
    if embeds_hash is None:
        block_prompt_embeds = request.prompt_embeds[start_token_idx:end_token_idx]
        embeds_hash = hashlib.sha256(tensor_data(block_prompt_embeds)).digest()
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
    mm_extra_keys: list[Any]
    mm_extra_keys, new_start_mm_idx = _gen_mm_extra_hash_keys(
        request, start_token_idx, end_token_idx, start_mm_idx
    )
    lora_extra_keys: list[str] = _gen_lora_extra_hash_keys(request)
    cache_salt_keys: list[str] = (
        [request.cache_salt] if (start_token_idx == 0 and request.cache_salt) else []
    )
    prompt_embeds_keys = _gen_prompt_embeds_extra_hash_keys(request, start_token_idx, end_token_idx)

    extra_keys: list[Any] = lora_extra_keys + mm_extra_keys + cache_salt_keys + prompt_embeds_keys

    if not extra_keys:
        return None, new_start_mm_idx

    return tuple(extra_keys), new_start_mm_idx


def hash_block_tokens(
    hash_function: Callable[[Any], bytes],
    parent_block_hash: BlockHash | None,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None = None,
) -> BlockHash:
    """Hash one full block, chained to its parent.

    Mirrors: vllm/v1/core/kv_cache_utils.py::hash_block_tokens

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
    guard_hash_block_tokens(parent_block_hash)
    if not parent_block_hash:
        parent_block_hash = NONE_HASH

    curr_block_token_ids_tuple = tuple(curr_block_token_ids)
    return BlockHash(hash_function((parent_block_hash, curr_block_token_ids_tuple, extra_keys)))


def resolve_kv_cache_block_sizes(
    kv_cache_config: KVCacheConfig,
    vllm_config: VllmConfig,
) -> tuple[int, int]:
    """``(scheduler_block_size, hash_block_size)`` in tokens.

    One group: ``block_size * dcp * pcp`` twice. Several: the LCM of the groups' block sizes,
    and the hash_block_size override or their GCD (or the LCM when hashing is unused, or a
    Mamba group has a block size of its own).

    Mirrors: vllm/v1/core/kv_cache_utils.py::resolve_kv_cache_block_sizes

    Raises:
        ValueError: For several groups with context parallelism, or a hash_block_size that
            does not divide every group's block size.
    """
    cache_config = vllm_config.cache_config
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    pcp = vllm_config.parallel_config.prefill_context_parallel_size
    groups = kv_cache_config.kv_cache_groups

    if len(groups) <= 1:
        bs = cache_config.block_size * dcp * pcp
        return bs, bs

    if dcp != 1 or pcp != 1:
        raise ValueError(
            "Hybrid KV cache groups with multiple block sizes do not support context "
            "parallelism (dcp_world_size/pcp_world_size > 1)."
        )

    group_block_sizes = [g.kv_cache_spec.block_size for g in groups]
    scheduler_block_size = math.lcm(*group_block_sizes)

    # Without prefix caching or a KV connector nobody reads the hashes: hash per scheduler block.
    connector_enabled = vllm_config.kv_transfer_config is not None
    if not (cache_config.enable_prefix_caching or connector_enabled):
        return scheduler_block_size, scheduler_block_size

    # A Mamba group with its own block size breaks divisibility: hash per scheduler block.
    if any(
        isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.block_size != cache_config.block_size
        for g in groups
    ):
        return scheduler_block_size, scheduler_block_size

    requested = cache_config.hash_block_size
    hash_block_size = requested if requested is not None else math.gcd(*group_block_sizes)
    if any(bs % hash_block_size != 0 for bs in group_block_sizes):
        raise ValueError(
            f"Invalid hash_block_size={hash_block_size}; all KV cache group block sizes must be "
            f"divisible by hash_block_size. Got group block sizes={group_block_sizes}."
        )
    return scheduler_block_size, hash_block_size


def get_request_block_hasher(
    block_size: int,
    caching_hash_fn: Callable[[Any], bytes],
) -> Callable[[Request], list[BlockHash]]:
    """Build the function a Request calls to hash its newly full blocks.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_request_block_hasher

    Args:
        block_size: Hash granularity (tokens per hashed block; vLLM's hash_block_size).
        caching_hash_fn: A function from ``kvlab.core.hashing``.

    Returns:
        ``request_block_hasher(request) -> list[BlockHash]``: hashes of the full blocks after
        the ``len(request.block_hashes)`` already hashed, chained to the last of them.

    Raises:
        ValueError: If ``block_size`` is not a positive int.
        TypeError: If ``caching_hash_fn`` is not callable.
    """
    guard_request_block_hasher(block_size, caching_hash_fn)

    def request_block_hasher(request: Request) -> list[BlockHash]:
        start_token_idx = len(request.block_hashes) * block_size
        num_tokens = request.num_tokens

        if start_token_idx + block_size > num_tokens:
            # No new full block.
            return []

        curr_mm_idx = 0
        if start_token_idx > 0:
            # Past the prompt's first blocks only generated tokens complete a block, so only
            # the last mm item can still overlap it (-1 = the last item).
            curr_mm_idx = -1

        prev_block_hash_value = request.block_hashes[-1] if request.block_hashes else None
        new_block_hashes: list[BlockHash] = []
        while True:
            end_token_idx = start_token_idx + block_size
            if end_token_idx > num_tokens:
                # Only full blocks are hashed.
                break

            extra_keys, curr_mm_idx = generate_block_hash_extra_keys(
                request, start_token_idx, end_token_idx, curr_mm_idx
            )

            block_tokens = request.all_token_ids[start_token_idx:end_token_idx]
            block_hash = hash_block_tokens(
                caching_hash_fn, prev_block_hash_value, block_tokens, extra_keys
            )

            new_block_hashes.append(block_hash)
            start_token_idx += block_size
            prev_block_hash_value = block_hash

        return new_block_hashes

    return request_block_hasher


def _check_enough_kv_cache_memory(
    available_memory: int,
    get_needed_memory: Callable[[], int],
    max_model_len: int,
    estimate_max_model_len: Callable[[int], int],
) -> None:
    """Raise ValueError unless ``get_needed_memory()`` bytes fit ``available_memory``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_check_enough_kv_cache_memory (the messages speak
    of kvlab's settings: there is no ``gpu_memory_utilization`` here).
    """
    if available_memory <= 0:
        raise ValueError(
            "No available memory for the cache blocks (available_memory <= 0): give the KV "
            "cache a positive budget."
        )

    needed_memory = get_needed_memory()

    if needed_memory > available_memory:
        estimated_max_len = estimate_max_model_len(available_memory)
        estimated_msg = ""
        if estimated_max_len > 0:
            estimated_msg = (
                " Based on the available memory, the estimated maximum model length is "
                f"{estimated_max_len}."
            )

        raise ValueError(
            f"To serve at least one request with the model's max seq len ({max_model_len}), "
            f"{format_gib(needed_memory)} GiB of KV cache is needed, more than the available KV "
            f"cache memory ({format_gib(available_memory)} GiB).{estimated_msg} Decrease "
            "max_model_len or give the KV cache more memory."
        )


def format_gib(num_bytes: int) -> str:
    """Bytes as GiB with two decimals. Mirrors: vllm/utils/mem_utils.py::format_gib."""
    return f"{num_bytes / (1 << 30):.2f}"


def max_memory_usage_bytes(vllm_config: VllmConfig, kv_cache_specs: Iterable[KVCacheSpec]) -> int:
    """Bytes one max_model_len request needs, summed over the given specs (bytes).

    Mirrors: vllm/v1/core/kv_cache_utils.py::max_memory_usage_bytes
    """
    return sum(spec.max_memory_usage_bytes(vllm_config) for spec in kv_cache_specs)


def estimate_max_model_len(
    vllm_config: VllmConfig,
    kv_cache_spec: dict[str, KVCacheSpec],
    available_memory: int,
) -> int:
    """Longest max_model_len whose one request fits ``available_memory`` (binary search, tokens).

    ``vllm_config.model_config.max_model_len`` is changed during the search and restored.

    Mirrors: vllm/v1/core/kv_cache_utils.py::estimate_max_model_len

    Returns:
        The length (tokens); 0 if even one token does not fit.
    """
    original_max_model_len = vllm_config.model_config.max_model_len

    def fits_in_memory(model_len: int) -> bool:
        vllm_config.model_config.max_model_len = model_len
        memory_needed = max_memory_usage_bytes(vllm_config, kv_cache_spec.values())
        return memory_needed <= available_memory

    try:
        left, right = 1, original_max_model_len

        if not fits_in_memory(left):
            return 0

        result = 1
        while left <= right:
            mid = (left + right) // 2
            if fits_in_memory(mid):
                result = mid
                left = mid + 1
            else:
                right = mid - 1
        return result
    finally:
        vllm_config.model_config.max_model_len = original_max_model_len


def check_enough_kv_cache_memory(
    vllm_config: VllmConfig,
    kv_cache_spec: dict[str, KVCacheSpec],
    available_memory: int,
) -> None:
    """Check that one request of max_model_len tokens fits the KV cache budget.

    Mirrors: vllm/v1/core/kv_cache_utils.py::check_enough_kv_cache_memory

    Args:
        vllm_config: Settings (max_model_len, ...).
        kv_cache_spec: layer name -> spec (no layers: nothing to check).
        available_memory: KV cache budget (bytes).

    Raises:
        ValueError: If the budget is <= 0, or smaller than one max_model_len request needs
            (the message names the model's max seq len and the estimated max_model_len that
            would fit).
    """
    if kv_cache_spec:
        _check_enough_kv_cache_memory(
            available_memory,
            lambda: max_memory_usage_bytes(vllm_config, kv_cache_spec.values()),
            vllm_config.model_config.max_model_len,
            lambda am: estimate_max_model_len(vllm_config, kv_cache_spec, am),
        )


def create_kv_cache_group_specs(
    kv_cache_spec: dict[str, KVCacheSpec], grouped_layer_names: list[list[str]]
) -> list[KVCacheGroupSpec]:
    """One KVCacheGroupSpec per list of layer names, with the layers' specs merged.

    Mirrors: vllm/v1/core/kv_cache_utils.py::create_kv_cache_group_specs

    Raises:
        KeyError: If a layer name is not in ``kv_cache_spec``.
        KVCacheSpecMergeError: If the layers of a group have different specs.
    """
    kv_cache_groups = []
    for layer_names_one_group in grouped_layer_names:
        layer_specs = [kv_cache_spec[layer_name] for layer_name in layer_names_one_group]
        merged_layer_spec = layer_specs[0].merge(layer_specs)
        kv_cache_groups.append(KVCacheGroupSpec(layer_names_one_group, merged_layer_spec))
    return kv_cache_groups


def is_kv_cache_spec_uniform(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether all layers' specs merge into one (True for no layers: encoder-only models).

    Mirrors: vllm/v1/core/kv_cache_utils.py::is_kv_cache_spec_uniform (kvlab's merge raises
    KVCacheSpecMergeError, an AssertionError, where vLLM's asserts).
    """
    if not kv_cache_spec:
        return True
    try:
        kv_cache_spec_values = list(kv_cache_spec.values())
        _ = kv_cache_spec_values[0].merge(kv_cache_spec_values)
    except AssertionError:
        return False
    return True


def get_max_concurrency_for_kv_cache_config(
    vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
) -> float:
    """How many max_model_len requests the pool holds at once (a float, e.g. 1.4).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_max_concurrency_for_kv_cache_config
    """
    num_layer_per_group = max(len(group.layer_names) for group in kv_cache_config.kv_cache_groups)
    max_memory_usage_per_request = num_layer_per_group * max_memory_usage_bytes(
        vllm_config, (group.kv_cache_spec for group in kv_cache_config.kv_cache_groups)
    )
    memory_per_block = (
        kv_cache_config.kv_cache_groups[0].kv_cache_spec.page_size_bytes * num_layer_per_group
    )
    num_block_per_request = cdiv(max_memory_usage_per_request, memory_per_block)
    max_concurrency = kv_cache_config.num_blocks / num_block_per_request
    return max_concurrency


def may_override_num_blocks(vllm_config: VllmConfig, num_blocks: int) -> int:
    """``cache_config.num_gpu_blocks_override`` if set, else ``num_blocks`` (blocks).

    Mirrors: vllm/v1/core/kv_cache_utils.py::may_override_num_blocks
    """
    if vllm_config.cache_config.num_gpu_blocks_override is not None:
        num_blocks = vllm_config.cache_config.num_gpu_blocks_override
    return num_blocks


def _pool_bytes_per_block(kv_cache_groups: list[KVCacheGroupSpec]) -> int:
    """Bytes one block takes in a worker's pool (the divisor that turns memory into blocks).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_pool_bytes_per_block
    """
    if len(kv_cache_groups) == 1 and isinstance(kv_cache_groups[0].kv_cache_spec, UniformTypeKVCacheSpecs):
        return kv_cache_groups[0].kv_cache_spec.page_size_bytes
    if all(isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs) for g in kv_cache_groups):
        # DeepseekV4: a shared layout sized by the largest per-page-size bucket.
        full_mla_spec = cast(UniformTypeKVCacheSpecs, kv_cache_groups[0].kv_cache_spec)
        layer_tuple_page_bytes = sum(full_mla_spec.get_page_sizes())
        num_layer_tuples = max(
            cast(UniformTypeKVCacheSpecs, g.kv_cache_spec).get_num_layer_tuples()
            for g in kv_cache_groups
        )
        return layer_tuple_page_bytes * num_layer_tuples
    group_size = max(len(g.layer_names) for g in kv_cache_groups)
    page_size = get_uniform_page_size([g.kv_cache_spec for g in kv_cache_groups])
    return page_size * group_size


def get_num_blocks(
    vllm_config: VllmConfig,
    num_layers: int,
    available_memory: int,
    page_size: int,
) -> int:
    """``max(int(available_memory // page_size // num_layers), 0)``, or the override (blocks).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_num_blocks

    Args:
        vllm_config: For num_gpu_blocks_override.
        num_layers: Layers sharing each block id, i.e. tensors per group (layers).
        available_memory: KV cache budget (bytes; int or float).
        page_size: Bytes of one block of one layer (bytes).

    Raises:
        ValueError: If num_layers or page_size is not positive.

    Examples:
        >>> # A widely read Chinese study note's Qwen3-VL premise (its own, not the real model's):
        >>> # 80 layers, 8 KV heads of 128, bf16, 16-token blocks, 56 GiB for the cache.
        >>> spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16")
        >>> spec.page_size_bytes, get_num_blocks(VllmConfig(), 80, 56 * 1024**3, spec.page_size_bytes)
        (65536, 11468)
    """
    guard_get_num_blocks(num_layers, page_size)
    num_blocks = int(available_memory // page_size // num_layers)
    num_blocks = max(num_blocks, 0)
    return may_override_num_blocks(vllm_config, num_blocks)


def get_uniform_page_size(kv_cache_specs: Iterable[KVCacheSpec]) -> int:
    """The one page size of the specs (bytes).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_uniform_page_size

    Raises:
        AssertionError: If the specs have several page sizes (as vLLM).
    """
    page_sizes = {layer.page_size_bytes for layer in kv_cache_specs}
    assert len(page_sizes) == 1, f"expected one page size, got {sorted(page_sizes)}"
    return page_sizes.pop()


def _get_kv_cache_groups_uniform_spec(
    kv_cache_specs: dict[str, KVCacheSpec],
) -> list[KVCacheGroupSpec]:
    """All layers share one spec: one group holding every layer.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_get_kv_cache_groups_uniform_spec
    """
    return create_kv_cache_group_specs(kv_cache_specs, [list(kv_cache_specs.keys())])


def _get_kv_cache_groups_uniform_type(
    spec: UniformTypeKVCacheSpecs,
) -> list[KVCacheGroupSpec]:
    """One attention type with per-layer sizes: one group of a UniformTypeKVCacheSpecs.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_get_kv_cache_groups_uniform_type
    """
    return [KVCacheGroupSpec(list(spec.kv_cache_specs.keys()), spec)]


def is_kv_cache_page_size_uniform(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether all layers have one page_size_bytes.

    Mirrors: vllm/v1/core/kv_cache_utils.py::is_kv_cache_page_size_uniform
    """
    page_sizes = {layer.page_size_bytes for layer in kv_cache_spec.values()}
    return len(page_sizes) == 1


def unify_kv_cache_spec_page_size(
    kv_cache_spec: dict[str, KVCacheSpec],
) -> dict[str, KVCacheSpec]:
    """Raise smaller layers' block_size until every page is the largest page size.

    Mirrors: vllm/v1/core/kv_cache_utils.py::unify_kv_cache_spec_page_size

    Returns:
        ``kv_cache_spec`` itself if all pages are equal, else a new dict.

    Raises:
        NotImplementedError: If a page size does not divide the largest one (as vLLM).
    """
    page_sizes = {layer.page_size_bytes for layer in kv_cache_spec.values()}
    if len(page_sizes) <= 1:
        return kv_cache_spec

    max_page_size = max(page_sizes)
    new_kv_cache_spec = {}
    for layer_name, layer_spec in kv_cache_spec.items():
        if layer_spec.page_size_bytes == max_page_size:
            new_kv_cache_spec[layer_name] = layer_spec
        else:
            layer_page_size = layer_spec.page_size_bytes
            if max_page_size % layer_page_size != 0:
                raise NotImplementedError(
                    "The page size of the layer is not divisible by the maximum page size. "
                    "Cannot unify by adjusting block_size."
                )
            ratio = max_page_size // layer_page_size
            new_block_size = layer_spec.block_size * ratio
            new_spec = replace(layer_spec, block_size=new_block_size)
            assert new_spec.page_size_bytes == max_page_size
            new_kv_cache_spec[layer_name] = new_spec
    return new_kv_cache_spec


def is_kv_cache_type_attention_free(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether the model has no KV cache layers at all.

    Mirrors: vllm/v1/core/kv_cache_utils.py::is_kv_cache_type_attention_free
    """
    return not kv_cache_spec


def _get_kv_cache_groups_uniform_page_size(
    kv_cache_spec: dict[str, KVCacheSpec],
) -> list[KVCacheGroupSpec]:
    """Hybrid models with one page size: one group per spec, every group equally many layers.

    The layers repeat a pattern (e.g. 1 full + 2 sliding-window layers, 10 times): each spec's
    layers are split into groups of ``group_size`` layers (the smallest layer count of any spec,
    or the largest when that is < 1.5x the smallest, to avoid padding), and group ``i`` of a
    spec takes ``layers[i::num_groups]`` so pipeline stages stay balanced. Every group gets its
    own block table; the model runner applies it to each layer of the group. A short group is
    padded (a warning says how much memory that may waste).

    Example: 10 full + 20 sliding-window layers -> groups (full x10), (sw.0, sw.2, ...),
    (sw.1, sw.3, ...): 3 groups of 10 layers sharing 10 tensors.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size
    """
    same_type_layers: dict[KVCacheSpec, list[str]] = defaultdict(list)
    for layer_name, layer_spec in kv_cache_spec.items():
        same_type_layers[layer_spec].append(layer_name)

    min_num_layers = min([len(layers) for layers in same_type_layers.values()])
    group_size = min_num_layers
    max_num_layers = max([len(layers) for layers in same_type_layers.values()])
    if max_num_layers < min_num_layers * 1.5:
        # Nearly equal counts (e.g. 12 sw + 13 full with an EAGLE layer): pad up to the larger.
        group_size = max_num_layers
    grouped_layers = []
    for layers in same_type_layers.values():
        num_padding_layers = group_size - len(layers) % group_size
        if num_padding_layers != group_size:
            logger.warning(
                "Add %d padding layers, may waste at most %.2f%% KV cache memory",
                num_padding_layers,
                num_padding_layers / len(layers) * 100,
            )
        num_groups = cdiv(len(layers), group_size)
        # Strided, not contiguous: with pipeline parallelism each stage then holds whole groups.
        for i in range(num_groups):
            grouped_layers.append(layers[i::num_groups])
    return create_kv_cache_group_specs(kv_cache_spec, grouped_layers)


def _get_kv_cache_config_deepseek_v4(
    vllm_config: VllmConfig,
    kv_cache_groups: list[KVCacheGroupSpec],
    available_memory: int,
) -> tuple[int, list[KVCacheTensor]]:
    """DeepseekV4's tensor layout: one tensor per (layer tuple, page size) bucket.

    Group 0 is the full-MLA group, whose page sizes are the buckets; every other group's layers
    were padded to one of those sizes. Layers are bucketed by page size and placed at the
    tuple index of their position in the bucket; each tensor is shared by the layers of every
    group at that slot.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_get_kv_cache_config_deepseek_v4

    Returns:
        ``(num_blocks, kv_cache_tensors)``.
    """
    full_mla_spec = kv_cache_groups[0].kv_cache_spec
    assert isinstance(full_mla_spec, UniformTypeKVCacheSpecs)
    page_sizes = sorted(full_mla_spec.get_page_sizes())
    layer_tuple_page_bytes = sum(page_sizes)

    # bucketed[g][page_size] = the group's layer names of that page size, in order.
    bucketed: list[dict[int, list[str]]] = []
    for group in kv_cache_groups:
        assert isinstance(group.kv_cache_spec, UniformTypeKVCacheSpecs)
        specs = group.kv_cache_spec.kv_cache_specs
        b: dict[int, list[str]] = defaultdict(list)
        for name in group.layer_names:
            b[specs[name].page_size_bytes].append(name)
        bucketed.append(b)

    num_layer_tuples = max(len(layers) for b in bucketed for layers in b.values())

    num_blocks = available_memory // (layer_tuple_page_bytes * num_layer_tuples)
    num_blocks = may_override_num_blocks(vllm_config, num_blocks)

    kv_cache_tensors: list[KVCacheTensor] = []
    for tuple_idx in range(num_layer_tuples):
        for ps in page_sizes:
            shared_by: list[str] = []
            for b in bucketed:
                bucket = b.get(ps)
                if bucket is not None and tuple_idx < len(bucket):
                    shared_by.append(bucket[tuple_idx])
            kv_cache_tensors.append(KVCacheTensor(size=ps * num_blocks, shared_by=shared_by))

    return num_blocks, kv_cache_tensors


def get_kv_cache_config_from_groups(
    vllm_config: VllmConfig,
    kv_cache_groups: list[KVCacheGroupSpec],
    available_memory: int,
) -> KVCacheConfig:
    """Size the pool and lay out the tensors for the given groups.

    The general case: ``group_size`` tensors, tensor ``i`` shared by layer ``i`` of every group
    (each group uses its own blocks of it), and
    ``num_blocks = available_memory // page_size // group_size``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_kv_cache_config_from_groups

    Args:
        vllm_config: Settings (num_gpu_blocks_override).
        kv_cache_groups: From get_kv_cache_groups.
        available_memory: KV cache budget (bytes).

    Returns:
        The KVCacheConfig (num_blocks = 1 for attention-free models: the null block).

    Raises:
        AssertionError: If the groups do not share one page size (as vLLM).
    """
    if len(kv_cache_groups) == 0:
        # Attention-free: no KV cache, but the pool still needs its null block.
        return KVCacheConfig(num_blocks=1, kv_cache_tensors=[], kv_cache_groups=kv_cache_groups)

    if len(kv_cache_groups) == 1 and isinstance(kv_cache_groups[0].kv_cache_spec, UniformTypeKVCacheSpecs):
        # One attention type with per-layer sizes: each layer gets memory by its page size.
        num_blocks = available_memory // kv_cache_groups[0].kv_cache_spec.page_size_bytes
        num_blocks = may_override_num_blocks(vllm_config, num_blocks)
        per_layer_specs = kv_cache_groups[0].kv_cache_spec.kv_cache_specs
        kv_cache_tensors = [
            KVCacheTensor(
                size=per_layer_specs[layer_name].page_size_bytes * num_blocks,
                shared_by=[layer_name],
            )
            for layer_name in kv_cache_groups[0].layer_names
        ]
    elif all(isinstance(group.kv_cache_spec, UniformTypeKVCacheSpecs) for group in kv_cache_groups):
        # DeepseekV4: several UniformTypeKVCacheSpecs groups.
        num_blocks, kv_cache_tensors = _get_kv_cache_config_deepseek_v4(
            vllm_config, kv_cache_groups, available_memory
        )
    else:
        group_size = max(len(group.layer_names) for group in kv_cache_groups)

        page_size = get_uniform_page_size([group.kv_cache_spec for group in kv_cache_groups])
        assert group_size > 0, "group_size must be greater than 0"
        num_blocks = get_num_blocks(vllm_config, group_size, available_memory, page_size)
        kv_cache_tensors = []
        for i in range(group_size):
            shared_by = []
            for j in range(len(kv_cache_groups)):
                if i < len(kv_cache_groups[j].layer_names):
                    shared_by.append(kv_cache_groups[j].layer_names[i])
            kv_cache_tensors.append(KVCacheTensor(size=page_size * num_blocks, shared_by=shared_by))

    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=kv_cache_tensors,
        kv_cache_groups=kv_cache_groups,
    )


def unify_hybrid_kv_cache_specs(kv_cache_spec: dict[str, KVCacheSpec]) -> None:
    """With the hybrid allocator off, turn local-attention layers into full attention, in place.

    When the layers are not of one type and some are FullAttentionSpec, every
    SlidingWindowSpec becomes a FullAttentionSpec that records ``sliding_window``, every
    ChunkedLocalAttentionSpec one that records ``attention_chunk_size`` (same block size, heads,
    dtype, page_size_padded), and every SlidingWindowMLASpec an MLAAttentionSpec (DeepseekV4:
    with the full layers' block size). Such layers then keep every token's KV, as full attention
    does (``--disable-hybrid-kv-cache-manager``).

    Example: ``{"l0": FullAttentionSpec(bs 16, ...), "l1": SlidingWindowSpec(bs 16, window
    1024, ...)}`` becomes ``{"l0": <same>, "l1": FullAttentionSpec(bs 16, ...,
    sliding_window=1024)}``: one group, 2 layers.

    Mirrors: vllm/v1/core/kv_cache_utils.py::unify_hybrid_kv_cache_specs

    Args:
        kv_cache_spec: layer name -> spec; replaced entries are written back into this dict.

    Raises:
        ValueError: If the layers would still not be of one type (e.g. no full-attention layer,
            or Mamba layers); the dict is then left as it was (vLLM may have rewritten part).
        KVCacheSpecMergeError: (a ValueError and an AssertionError, as vLLM asserts) If there
            are SlidingWindowMLASpec layers but no full-attention layer.
    """
    guard_unify_hybrid_kv_cache_specs(kv_cache_spec)
    if is_kv_cache_spec_uniform(kv_cache_spec) or UniformTypeKVCacheSpecs.is_uniform_type(kv_cache_spec):
        return

    logger.warning(
        "Hybrid KV cache manager is disabled for this hybrid model: no KV cache memory is saved "
        "for local-attention layers (their compute still is)."
    )

    has_full_attention = any(isinstance(spec, FullAttentionSpec) for spec in kv_cache_spec.values())
    has_sliding_window = any(isinstance(spec, SlidingWindowSpec) for spec in kv_cache_spec.values())
    has_chunked_local_attention = any(
        isinstance(spec, ChunkedLocalAttentionSpec) for spec in kv_cache_spec.values()
    )
    has_swa_mla = any(isinstance(spec, SlidingWindowMLASpec) for spec in kv_cache_spec.values())

    uniform_block_size: int | None = None
    if has_swa_mla:
        # DeepseekV4: the MLA layers take the full layers' block size.
        assert has_full_attention
        any_full_spec = next(
            iter(spec for spec in kv_cache_spec.values() if isinstance(spec, FullAttentionSpec))
        )
        uniform_block_size = any_full_spec.block_size

    if has_full_attention and (has_sliding_window or has_chunked_local_attention):
        for layer_name, spec in kv_cache_spec.items():
            if isinstance(spec, SlidingWindowMLASpec):
                kv_cache_spec[layer_name] = MLAAttentionSpec(
                    block_size=uniform_block_size if uniform_block_size is not None else spec.block_size,
                    num_kv_heads=spec.num_kv_heads,
                    head_size=spec.head_size,
                    dtype=spec.dtype,
                    page_size_padded=spec.page_size_padded,
                    cache_dtype_str=spec.cache_dtype_str,
                    alignment=spec.alignment,
                    compress_ratio=spec.compress_ratio,
                    model_version=spec.model_version,
                )
            elif isinstance(spec, SlidingWindowSpec):
                kv_cache_spec[layer_name] = FullAttentionSpec(
                    block_size=spec.block_size,
                    num_kv_heads=spec.num_kv_heads,
                    head_size=spec.head_size,
                    head_size_v=spec.head_size_v,
                    dtype=spec.dtype,
                    kv_quant_mode=spec.kv_quant_mode,
                    sliding_window=spec.sliding_window,
                    page_size_padded=spec.page_size_padded,
                )
            elif isinstance(spec, ChunkedLocalAttentionSpec):
                # NOTE: as vLLM, kv_quant_mode is not carried over for chunked-local layers.
                kv_cache_spec[layer_name] = FullAttentionSpec(
                    block_size=spec.block_size,
                    num_kv_heads=spec.num_kv_heads,
                    head_size=spec.head_size,
                    dtype=spec.dtype,
                    attention_chunk_size=spec.attention_chunk_size,
                    page_size_padded=spec.page_size_padded,
                )

    if not (is_kv_cache_spec_uniform(kv_cache_spec) or UniformTypeKVCacheSpecs.is_uniform_type(kv_cache_spec)):
        raise ValueError(
            "Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one "
            f"unified type (layer types after conversion: "
            f"{sorted({type(s).__name__ for s in kv_cache_spec.values()})}); sliding-window and "
            "chunked-local layers are only converted when full-attention layers are present"
        )


def group_and_unify_kv_cache_specs(
    kv_cache_spec: dict[str, KVCacheSpec],
) -> list[UniformTypeKVCacheSpecs] | None:
    """DeepseekV4: one UniformTypeKVCacheSpecs of the MLA layers, then one per SWA-MLA kind.

    SWA-MLA layers are grouped by ``(block_size, sliding_window)``. None when the model has no
    SlidingWindowMLASpec layer.

    Mirrors: vllm/v1/core/kv_cache_utils.py::group_and_unify_kv_cache_specs
    """
    if not any(isinstance(spec, SlidingWindowMLASpec) for spec in kv_cache_spec.values()):
        return None

    mla_specs: dict[str, KVCacheSpec] = {}
    grouped_swa_mla_specs: dict[tuple[int, int], dict[str, KVCacheSpec]] = defaultdict(dict)
    for name, spec in kv_cache_spec.items():
        if isinstance(spec, SlidingWindowMLASpec):
            grouped_swa_mla_specs[(spec.block_size, spec.sliding_window)][name] = spec
        elif isinstance(spec, MLAAttentionSpec):
            mla_specs[name] = spec

    assert len(mla_specs) > 0
    mla_uniform_spec = UniformTypeKVCacheSpecs.from_specs(mla_specs)
    assert mla_uniform_spec is not None

    swa_uniform_specs: list[UniformTypeKVCacheSpecs] = []
    for spec_dict in grouped_swa_mla_specs.values():
        uniform_spec = UniformTypeKVCacheSpecs.from_specs(spec_dict)
        assert uniform_spec is not None
        swa_uniform_specs.append(uniform_spec)

    return [mla_uniform_spec, *swa_uniform_specs]


def _approximate_gcd(values: Sequence[int], *, lower_bound: int | None = None) -> int:
    """The divisor ``d`` (>= lower_bound) that pads ``values`` up to multiples of ``d`` least.

    Brute force over ``[lower_bound, max(values)]``; ties go to the larger ``d``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_approximate_gcd

    Raises:
        ValueError: If ``values`` is empty or holds a non-positive number.
    """
    if not values:
        raise ValueError("values must be non-empty")
    if any(x <= 0 for x in values):
        raise ValueError(f"values must be positive, got: {list(values)!r}")

    min_d = max(1, lower_bound if lower_bound is not None else 1)
    max_d = max(values)
    if min_d > max_d:
        return min_d

    best_d = min_d
    best_pad: int | None = None
    for d in range(min_d, max_d + 1):
        pad = sum((d - (x % d)) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_pad = pad
            best_d = d

    return best_d


def _get_kv_cache_groups_uniform_groups(
    grouped_specs: list[UniformTypeKVCacheSpecs],
) -> list[KVCacheGroupSpec]:
    """DeepseekV4's groups: the full-MLA group, then SWA-MLA groups split to equal layer tuples.

    A layer tuple is one layer of each page size. The number of tuples per group minimises the
    padding (``_approximate_gcd``); SWA-MLA layers are padded to the nearest larger full-MLA
    page size and split strided, as ``_get_kv_cache_groups_uniform_page_size`` does.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_get_kv_cache_groups_uniform_groups
    """
    assert len(grouped_specs) > 0 and all(
        isinstance(spec, UniformTypeKVCacheSpecs) for spec in grouped_specs
    )
    full_mla_spec = grouped_specs[0]
    assert all(isinstance(spec, MLAAttentionSpec) for spec in full_mla_spec.kv_cache_specs.values())
    full_mla_group = KVCacheGroupSpec(
        layer_names=list(full_mla_spec.kv_cache_specs.keys()),
        kv_cache_spec=full_mla_spec,
    )

    num_layer_tuples_per_group: list[int] = [
        g_spec.get_num_layer_tuples() for g_spec in grouped_specs
    ]
    num_layer_tuples = _approximate_gcd(
        num_layer_tuples_per_group, lower_bound=num_layer_tuples_per_group[0]
    )
    num_layer_tuples_per_group = [round_up(x, num_layer_tuples) for x in num_layer_tuples_per_group]

    swa_mla_specs = grouped_specs[1:]
    assert all(
        isinstance(spec, SlidingWindowMLASpec)
        for group in swa_mla_specs
        for spec in group.kv_cache_specs.values()
    )

    all_page_sizes = full_mla_spec.get_page_sizes()
    swa_mla_groups = []
    for sm_spec in swa_mla_specs:
        sm_page_sizes = sm_spec.get_page_sizes()
        layers_per_size: dict[int, list[str]] = defaultdict(list)
        assert max(sm_page_sizes) <= max(all_page_sizes)

        # Each page size is padded to the nearest larger full-MLA page size.
        size_to_candidate: dict[int, int] = {}
        for ps in sm_page_sizes:
            size_to_candidate[ps] = min(x for x in all_page_sizes if x >= ps)
        for layer_name, layer_spec in sm_spec.kv_cache_specs.items():
            current_size = layer_spec.page_size_bytes
            candidate = size_to_candidate[current_size]
            if current_size < candidate:
                object.__setattr__(layer_spec, "page_size_padded", candidate)
            layers_per_size[candidate].append(layer_name)
        # NOTE: as vLLM, every page size of one UniformType group has the same number of layers.
        assert len(set(len(layers) for layers in layers_per_size.values())) == 1
        num_layers_per_size = len(next(iter(layers_per_size.values())))

        num_tuple_groups = cdiv(num_layers_per_size, num_layer_tuples)
        layer_tuples = list(zip(*layers_per_size.values()))
        for i in range(num_tuple_groups):
            group_layer_tuples = layer_tuples[i::num_tuple_groups]
            group_layer_names = [name for layer_tuple in group_layer_tuples for name in layer_tuple]
            group_layer_specs = {name: sm_spec.kv_cache_specs[name] for name in group_layer_names}
            sub_sm_spec = UniformTypeKVCacheSpecs.from_specs(group_layer_specs)
            assert sub_sm_spec is not None
            swa_mla_groups.append(
                KVCacheGroupSpec(
                    layer_names=group_layer_names,
                    kv_cache_spec=sub_sm_spec,
                )
            )

    return [full_mla_group, *swa_mla_groups]


def _annotate_eagle_groups_deepseek_v4(
    vllm_config: VllmConfig,
    kv_cache_spec: dict[str, KVCacheSpec],
    kv_cache_groups: list[KVCacheGroupSpec],
) -> None:
    """DeepseekV4 with EAGLE/MTP: flag the group holding the last (MTP) layer as the EAGLE group.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_annotate_eagle_groups_deepseek_v4
    """
    spec_config = vllm_config.speculative_config
    if spec_config is None or not spec_config.use_eagle():
        return
    if not any(getattr(spec, "model_version", None) == "deepseek_v4" for spec in kv_cache_spec.values()):
        return
    last_layer = next(reversed(kv_cache_spec))
    for group in kv_cache_groups:
        if last_layer in group.layer_names:
            group.is_eagle_group = True
            break


def get_kv_cache_groups(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec]
) -> list[KVCacheGroupSpec]:
    """Split the model's layers into KV cache groups (one block table each).

    Hybrid allocator disabled -> unify_hybrid_kv_cache_specs first (rewriting ``kv_cache_spec``
    in place); no layers -> no groups; one spec -> one group; one attention type with per-layer
    sizes -> one UniformTypeKVCacheSpecs group; DeepseekV4 -> its grouped layout; otherwise
    unify the page sizes and group by spec (hidden-state cache layers get their own groups,
    aligned to the common page size).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_kv_cache_groups

    Raises:
        ValueError: With the hybrid allocator disabled, if the layers cannot be unified.
        NotImplementedError: If the page sizes cannot be unified.
    """
    if vllm_config.scheduler_config.disable_hybrid_kv_cache_manager:
        unify_hybrid_kv_cache_specs(kv_cache_spec)

    if is_kv_cache_type_attention_free(kv_cache_spec):
        # No groups: the KVCacheManager handles attention-free models.
        return []

    if is_kv_cache_spec_uniform(kv_cache_spec):
        # Every layer has the same spec (most models): one group.
        return _get_kv_cache_groups_uniform_spec(kv_cache_spec)
    elif uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
        # One attention type with per-layer sizes: still one group.
        return _get_kv_cache_groups_uniform_type(uniform_spec)
    elif grouped_specs := group_and_unify_kv_cache_specs(kv_cache_spec):
        # DeepseekV4: full MLA plus sliding-window MLA of several sizes.
        kv_cache_groups = _get_kv_cache_groups_uniform_groups(grouped_specs)
        _annotate_eagle_groups_deepseek_v4(vllm_config, kv_cache_spec, kv_cache_groups)
        return kv_cache_groups

    # Hidden-state cache layers stay out of the page-size unification and grouping.
    hidden_specs = {k: v for k, v in kv_cache_spec.items() if isinstance(v, HiddenStateCacheSpec)}
    filtered_spec = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, HiddenStateCacheSpec)}

    # The pool allocates one page size: unify it (or raise).
    filtered_spec = unify_kv_cache_spec_page_size(filtered_spec)
    groups = _get_kv_cache_groups_uniform_page_size(filtered_spec)

    # Hidden-state layers come back as their own groups, padded to the common page size.
    if hidden_specs:
        common_page = get_uniform_page_size([g.kv_cache_spec for g in groups])
        for name, spec in hidden_specs.items():
            per_token = spec.num_kv_heads * spec.head_size * get_dtype_size(spec.dtype)
            new_bs = max(common_page // per_token, 1)
            aligned = replace(spec, block_size=new_bs, page_size_padded=common_page)
            groups.append(KVCacheGroupSpec([name], aligned))

    return groups


def generate_scheduler_kv_cache_config(
    kv_cache_configs: list[KVCacheConfig],
) -> KVCacheConfig:
    """The scheduler's config: a copy of the first worker's, one spec per UniformType group.

    Mirrors: vllm/v1/core/kv_cache_utils.py::generate_scheduler_kv_cache_config

    Raises:
        KVCacheSpecMergeError: (a ValueError and an AssertionError, as vLLM asserts) If the
            workers' num_blocks differ.
    """
    guard_scheduler_kv_cache_config(kv_cache_configs)
    assert all([cfg.num_blocks == kv_cache_configs[0].num_blocks for cfg in kv_cache_configs])
    # The workers differ only in layer names: any one serves the scheduler.
    cfg = copy.deepcopy(kv_cache_configs[0])
    for group in cfg.kv_cache_groups:
        if isinstance(group.kv_cache_spec, UniformTypeKVCacheSpecs):
            # All layers of the group have one type: any of their specs will do.
            group.kv_cache_spec = next(iter(group.kv_cache_spec.kv_cache_specs.values()))
    return cfg


def _report_kv_cache_config(vllm_config: VllmConfig, kv_cache_config: KVCacheConfig) -> None:
    """Log the pool's size in tokens and its concurrency at max_model_len.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_report_kv_cache_config
    """
    max_model_len = vllm_config.model_config.max_model_len
    max_concurrency = get_max_concurrency_for_kv_cache_config(vllm_config, kv_cache_config)

    # Tokens the pool holds at peak: concurrency x max_model_len (right for windowed groups too).
    num_tokens = int(max_concurrency * max_model_len)

    logger.info_once("GPU KV cache size: %s tokens", f"{num_tokens:,}")
    logger.info_once(
        "Maximum concurrency for %s tokens per request: %.2fx",
        f"{max_model_len:,}",
        max_concurrency,
    )


def _max_memory_usage_bytes_from_groups(
    vllm_config: VllmConfig,
    kv_cache_groups: list[KVCacheGroupSpec],
) -> int:
    """Bytes one max_model_len request takes in a pool laid out for these groups (bytes).

    With several groups every group's blocks take ``group_size`` layer pages, padding included
    (8 full + 9 sliding-window layers take 9 + 9 layer slots):
    ``group_size * page_size * sum(cdiv(group max bytes, page_size))``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_max_memory_usage_bytes_from_groups
    """
    if not kv_cache_groups:
        return 0

    if len(kv_cache_groups) == 1 and isinstance(kv_cache_groups[0].kv_cache_spec, UniformTypeKVCacheSpecs):
        per_layer_specs = kv_cache_groups[0].kv_cache_spec.kv_cache_specs
        return sum(spec.max_memory_usage_bytes(vllm_config) for spec in per_layer_specs.values())
    elif all(isinstance(group.kv_cache_spec, UniformTypeKVCacheSpecs) for group in kv_cache_groups):
        # DeepseekV4: every group reserves the global number of layer-tuple slots.
        full_mla_spec = cast(UniformTypeKVCacheSpecs, kv_cache_groups[0].kv_cache_spec)
        layer_tuple_bytes = sum(full_mla_spec.get_page_sizes())
        num_layer_tuples = max(
            cast(UniformTypeKVCacheSpecs, group.kv_cache_spec).get_num_layer_tuples()
            for group in kv_cache_groups
        )

        total_max_mem_usage_bytes = 0
        for group in kv_cache_groups:
            group_spec = cast(UniformTypeKVCacheSpecs, group.kv_cache_spec)
            g_max_mem_usage_pages = group_spec.max_memory_usage_pages(vllm_config)
            g_max_mem_usage_page_bytes = num_layer_tuples * g_max_mem_usage_pages * layer_tuple_bytes
            total_max_mem_usage_bytes += g_max_mem_usage_page_bytes
        return total_max_mem_usage_bytes

    group_size = max(len(group.layer_names) for group in kv_cache_groups)
    page_size = get_uniform_page_size([group.kv_cache_spec for group in kv_cache_groups])
    blocks_needed = sum(
        cdiv(group.kv_cache_spec.max_memory_usage_bytes(vllm_config), page_size)
        for group in kv_cache_groups
    )

    return group_size * page_size * blocks_needed


def _estimate_max_model_len_from_groups(
    vllm_config: VllmConfig,
    kv_cache_groups: list[KVCacheGroupSpec],
    available_memory: int,
) -> int:
    """Longest max_model_len whose one request fits these groups' pool (binary search, tokens).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_estimate_max_model_len_from_groups (0 if one token
    does not fit; max_model_len is restored).
    """
    original_max = vllm_config.model_config.max_model_len

    def fits(model_len: int) -> bool:
        vllm_config.model_config.max_model_len = model_len
        return _max_memory_usage_bytes_from_groups(vllm_config, kv_cache_groups) <= available_memory

    try:
        left, right = 1, original_max
        if not fits(left):
            return 0
        result = 1
        while left <= right:
            mid = (left + right) // 2
            if fits(mid):
                result = mid
                left = mid + 1
            else:
                right = mid - 1
        return result
    finally:
        vllm_config.model_config.max_model_len = original_max


def _auto_fit_max_model_len(
    vllm_config: VllmConfig,
    projected_groups_per_worker: list[list[KVCacheGroupSpec]],
    available_memory: list[int],
) -> None:
    """Lower max_model_len (in place) to the longest every worker can hold one request of.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_auto_fit_max_model_len

    Raises:
        ValueError: If not even one token fits on some worker.
    """
    original_max = vllm_config.model_config.max_model_len

    if all(not groups for groups in projected_groups_per_worker):
        logger.info_once(
            "Auto-fit max_model_len: attention-free model, using derived max_model_len=%d",
            original_max,
        )
        return

    auto_fit_max = original_max
    limiting_worker_mem = available_memory[0]
    for groups, avail_mem in zip(projected_groups_per_worker, available_memory):
        if not groups:
            continue
        worker_max = _estimate_max_model_len_from_groups(vllm_config, groups, avail_mem)
        if worker_max < auto_fit_max:
            auto_fit_max = worker_max
            limiting_worker_mem = avail_mem

    if auto_fit_max <= 0:
        raise ValueError(
            "Cannot auto-fit max_model_len: not enough memory to serve even a single token; "
            "give the KV cache more memory."
        )

    if auto_fit_max >= original_max:
        logger.info_once(
            "Auto-fit max_model_len: full model context length %d fits in available memory",
            original_max,
        )
    else:
        vllm_config.model_config.max_model_len = auto_fit_max
        logger.info_once(
            "Auto-fit max_model_len: reduced from %d to %d to fit in available memory "
            "(%s GiB available for KV cache)",
            original_max,
            auto_fit_max,
            format_gib(limiting_worker_mem),
        )


def _project_kv_cache_groups_to_worker(
    global_kv_cache_groups: list[KVCacheGroupSpec],
    worker_spec: dict[str, KVCacheSpec],
) -> list[KVCacheGroupSpec]:
    """The global groups restricted to one worker's layers (same order; a group may be empty).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_project_kv_cache_groups_to_worker

    Args:
        global_kv_cache_groups: The whole model's groups.
        worker_spec: layer name -> spec of the layers this worker holds (a pipeline stage).

    Returns:
        One KVCacheGroupSpec per global group; a UniformTypeKVCacheSpecs keeps only this
        worker's layers, and a group with no layer here is not an EAGLE group.
    """
    projected_groups: list[KVCacheGroupSpec] = []
    for group in global_kv_cache_groups:
        worker_layer_names = [
            layer_name for layer_name in group.layer_names if layer_name in worker_spec
        ]
        group_spec = group.kv_cache_spec
        if worker_layer_names and isinstance(group_spec, UniformTypeKVCacheSpecs):
            group_spec = UniformTypeKVCacheSpecs(
                block_size=group_spec.block_size,
                kv_cache_specs={
                    layer_name: group_spec.kv_cache_specs[layer_name]
                    for layer_name in worker_layer_names
                },
            )
        projected_groups.append(
            KVCacheGroupSpec(
                worker_layer_names,
                group_spec,
                is_eagle_group=group.is_eagle_group and bool(worker_layer_names),
            )
        )
    return projected_groups


def get_kv_cache_configs(
    vllm_config: VllmConfig,
    kv_cache_specs: list[dict[str, KVCacheSpec]],
    available_memory: list[int],
) -> list[KVCacheConfig]:
    """One KVCacheConfig per worker, all with the same (smallest) num_blocks.

    Steps: merge the workers' specs; group the whole model (``get_kv_cache_groups``, which
    unifies specs in place when the hybrid manager is disabled); project the groups on each
    worker; apply num_gpu_blocks_override to the budgets; auto-fit max_model_len when
    ``original_max_model_len == -1``; check each worker can hold one max_model_len request;
    size each worker; give every worker the smallest num_blocks and shrink its tensors.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_kv_cache_configs

    Args:
        vllm_config: Settings (max_model_len, num_gpu_blocks_override, ...); max_model_len is
            lowered in place by auto-fit.
        kv_cache_specs: Per worker, layer name -> spec.
        available_memory: Per worker, the KV cache budget (bytes).

    Returns:
        The workers' configs, in the order given.

    Raises:
        KVCacheSpecMergeError: (a ValueError and an AssertionError, as vLLM asserts) If one
            layer has different specs on two workers, or a worker's layer is in no group.
        ValueError: If the lists differ in length, or a worker's budget cannot hold one
            max_model_len request (or, with auto-fit, one token).
    """
    guard_get_kv_cache_configs(kv_cache_specs, available_memory)
    merged_kv_cache_specs: dict[str, KVCacheSpec] = {}
    for kv_cache_spec_one_worker in kv_cache_specs:
        for layer_name, layer_spec in kv_cache_spec_one_worker.items():
            if layer_name not in merged_kv_cache_specs:
                merged_kv_cache_specs[layer_name] = layer_spec
            else:
                assert merged_kv_cache_specs[layer_name] == layer_spec, (
                    "The KV cache specs for the same layer are different across workers. "
                    "This is not supported yet."
                )

    # NOTE: get_kv_cache_groups may unify merged_kv_cache_specs in place (hybrid manager off).
    global_kv_cache_groups = get_kv_cache_groups(vllm_config, merged_kv_cache_specs)

    projected_groups_per_worker = [
        _project_kv_cache_groups_to_worker(global_kv_cache_groups, worker_spec)
        for worker_spec in kv_cache_specs
    ]

    # With num_gpu_blocks_override the pool's size no longer follows the budget: plan every
    # later step (auto-fit, the check, sizing) against the capacity the override gives.
    override = vllm_config.cache_config.num_gpu_blocks_override
    if override is not None:
        adjusted_memory: list[int] = []
        for groups, avail_mem in zip(projected_groups_per_worker, available_memory):
            if not groups:
                adjusted_memory.append(avail_mem)
                continue
            bytes_per_block = _pool_bytes_per_block(groups)
            logger.info(
                "Overriding num_gpu_blocks=%d with num_gpu_blocks_override=%d",
                avail_mem // bytes_per_block,
                override,
            )
            adjusted_memory.append(override * bytes_per_block)
        available_memory = adjusted_memory

    if vllm_config.model_config.original_max_model_len == -1:
        _auto_fit_max_model_len(vllm_config, projected_groups_per_worker, available_memory)

    for groups, avail_mem in zip(projected_groups_per_worker, available_memory):
        if not groups:
            continue
        _check_enough_kv_cache_memory(
            avail_mem,
            partial(_max_memory_usage_bytes_from_groups, vllm_config, groups),
            vllm_config.model_config.max_model_len,
            partial(_estimate_max_model_len_from_groups, vllm_config, groups),
        )

    kv_cache_configs: list[KVCacheConfig] = []
    for projected_groups, kv_cache_spec_one_worker, available_memory_one_worker in zip(
        projected_groups_per_worker, kv_cache_specs, available_memory
    ):
        assert sum(len(group.layer_names) for group in projected_groups) == len(
            kv_cache_spec_one_worker
        ), "Some layers are not assigned to any group."
        kv_cache_configs.append(
            get_kv_cache_config_from_groups(vllm_config, projected_groups, available_memory_one_worker)
        )

    # Every worker takes the smallest num_blocks; tensors shrink in proportion.
    min_num_blocks = min(kv_cache_config.num_blocks for kv_cache_config in kv_cache_configs)
    for kv_cache_config in kv_cache_configs:
        num_blocks_old = kv_cache_config.num_blocks
        kv_cache_config.num_blocks = min_num_blocks

        for tensor in kv_cache_config.kv_cache_tensors:
            assert tensor.size % num_blocks_old == 0
            tensor.size = tensor.size // num_blocks_old * min_num_blocks

        if len(kv_cache_config.kv_cache_groups) > 0:
            _report_kv_cache_config(vllm_config, kv_cache_config)

    return kv_cache_configs


def get_kv_cache_config(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> KVCacheConfig:
    """One worker's KVCacheConfig in one call: ``get_kv_cache_configs`` for a single worker.

    kvlab only (a notebook convenience; vLLM calls ``get_kv_cache_configs`` with every worker).

    Raises:
        ValueError: If one max_model_len request does not fit (see check_enough_kv_cache_memory).
    """
    return get_kv_cache_configs(vllm_config, [kv_cache_spec], [available_memory])[0]


class BlockHashListWithBlockSize:
    """A lazy view of block hashes at a coarser block size (concatenated hashes).

    Hashes computed every ``hash_block_size`` tokens are joined ``scale_factor`` at a time::

        hash_block_size 4:   | A | B | C | D | E |       target_block_size 8:  | AB | CD |
                                                         (E is not a full 8-token block)

    Mirrors: vllm/v1/core/kv_cache_utils.py::BlockHashListWithBlockSize

    Args:
        block_hashes: Hashes at ``hash_block_size`` (the list is read live, not copied).
        hash_block_size: Tokens per hash in ``block_hashes``.
        target_block_size: Tokens per block of the view; a multiple of ``hash_block_size``.
    """

    def __init__(
        self,
        block_hashes: list[BlockHash],
        hash_block_size: int,
        target_block_size: int,
    ):
        self.block_hashes = block_hashes
        assert target_block_size % hash_block_size == 0
        self.scale_factor = target_block_size // hash_block_size

    def __len__(self) -> int:
        return len(self.block_hashes) // self.scale_factor

    @overload
    def __getitem__(self, idx: int) -> BlockHash: ...

    @overload
    def __getitem__(self, idx: slice) -> list[BlockHash]: ...

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
        end = base + self.scale_factor
        return BlockHash(b"".join(self.block_hashes[base:end]))


BlockHashList = list[BlockHash] | BlockHashListWithBlockSize


# ---------------------------------------------------------------------------------------------
# Guards: one call on the first line of a public entry point. Each accepts the common call in
# constant time and otherwise checks the arguments in full, raising a clear error that names
# what is allowed, before anything changes. Not part of vLLM.
# ---------------------------------------------------------------------------------------------

_CORE_PREFIX = "kvlab.core."


_CORE_GLOBALS: set[int] = set()  # ids of kvlab.core modules' globals, learnt on first use


def called_from_core(depth: int = 2) -> bool:
    """Whether the guarded method was called from a kvlab.core module.

    Inside kvlab.core the pool and the free queue trust their callers, as vLLM's do (the
    arguments were checked at the API's entry point); any other caller (a notebook, a user, a
    test) gets the full checks. ``depth`` counts frames from the guard: 2 = the caller of the
    method the guard sits in.
    """
    caller_globals = sys._getframe(depth + 1).f_globals
    if id(caller_globals) in _CORE_GLOBALS:
        return True
    if caller_globals.get("__name__", "").startswith(_CORE_PREFIX):
        _CORE_GLOBALS.add(id(caller_globals))
        return True
    return False


def _is_int(value: Any) -> bool:
    return type(value) is int or (hasattr(value, "__index__") and not isinstance(value, bool))


def guard_hash_fn(hash_fn: Any, name: str) -> None:
    """Refuse a hash function that is not callable (the name of one, most often)."""
    if callable(hash_fn):
        return
    hint = f"; for a name use get_hash_fn_by_name({hash_fn!r})" if isinstance(hash_fn, str) else ""
    raise TypeError(
        f"{name} must be a hash function (callable: bytes-like or object -> bytes, e.g. "
        f"kvlab.core.hashing.sha256), got {type(hash_fn).__name__} {hash_fn!r}{hint}"
    )


class NoneHashNotInitialisedError(AttributeError, RuntimeError):
    """NONE_HASH was read before init_none_hash() set it (an AttributeError too, so that
    ``hasattr(kv_cache_utils, "NONE_HASH")`` answers False)."""


_NO_NONE_HASH = (
    "NONE_HASH is not initialised: call kvlab.core.kv_cache_utils.init_none_hash(hash_fn) "
    "once before hashing blocks (vLLM does this when the engine starts)."
)


def guard_hash_block_tokens(parent_block_hash: Any) -> None:
    """Refuse to hash a first block before init_none_hash() set NONE_HASH."""
    if parent_block_hash or "NONE_HASH" in globals():
        return
    raise NoneHashNotInitialisedError(_NO_NONE_HASH)


def guard_request_block_hasher(block_size: Any, caching_hash_fn: Any) -> None:
    """Refuse a block size that is not a positive int, or a hash function that is not callable."""
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size <= 0:
        raise ValueError(f"block_size must be a positive int (tokens), got {block_size!r}")
    guard_hash_fn(caching_hash_fn, "caching_hash_fn")


def guard_popleft_n(queue: FreeKVCacheBlockQueue, n: Any) -> None:
    """popleft_n: ``n`` must be an int in ``[0, num_free_blocks]``."""
    if n.__class__ is int and 0 <= n <= queue.num_free_blocks:
        return
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(
            f"popleft_n: n must be an int in [0, num_free_blocks={queue.num_free_blocks}], got "
            f"{type(n).__name__} {n!r}"
        )
    if not 0 <= n.__index__() <= queue.num_free_blocks:
        raise ValueError(f"popleft_n({n}): n must be in [0, num_free_blocks={queue.num_free_blocks}]")


def is_block(value: Any) -> bool:
    """A KVCacheBlock, or anything with its fields (vLLM's code is duck-typed: a block class
    from a reloaded module, or a learner's, works there too)."""
    return value.__class__ is KVCacheBlock or (
        hasattr(value, "block_id") and hasattr(value, "ref_cnt") and hasattr(value, "prev_free_block")
    )


def guard_queue_block(block: Any, op: str) -> None:
    """remove / append: the argument must be a KVCacheBlock."""
    if is_block(block):
        return
    raise TypeError(f"{op}: expected a KVCacheBlock, got {type(block).__name__} {block!r:.80}")


def _already_queued(block: KVCacheBlock) -> str:
    return (
        f"block {block.block_id} is already in the free queue (ref_cnt {block.ref_cnt}); "
        "allowed: blocks outside the queue, each appended once"
    )


def guard_append(queue: FreeKVCacheBlockQueue, block: Any) -> None:
    """append: a KVCacheBlock that is in no queue (both free-list links None)."""
    guard_queue_block(block, "append")
    if block.prev_free_block is not None or block.next_free_block is not None:
        raise ValueError(_already_queued(block))


def guard_append_n(queue: FreeKVCacheBlockQueue, blocks: Any) -> None:
    """append_n: a list of KVCacheBlocks in no queue, each listed once (core's callers trusted)."""
    if blocks.__class__ is list and not blocks or called_from_core():
        return
    if queue.fake_free_list_tail.prev_free_block is None:
        return  # a corrupted queue: vLLM's own assert names it
    if not isinstance(blocks, list):
        raise TypeError(f"append_n: blocks must be a list of KVCacheBlock, got {type(blocks).__name__}")
    seen: set[int] = set()
    for block in blocks:
        guard_queue_block(block, "append_n")
        if block.prev_free_block is not None or block.next_free_block is not None or id(block) in seen:
            raise ValueError(_already_queued(block))
        seen.add(id(block))


def guard_get_num_blocks(num_layers: Any, page_size: Any) -> None:
    """get_num_blocks: layers and page size must be positive (vLLM divides by them)."""
    if num_layers <= 0 or page_size <= 0:
        raise ValueError(f"num_layers ({num_layers}) and page_size ({page_size}) must be positive")


_UNIFY_TRIAL = False


def guard_unify_hybrid_kv_cache_specs(kv_cache_spec: dict[str, KVCacheSpec]) -> None:
    """Refuse, before rewriting anything, specs the hybrid-off conversion cannot unify.

    vLLM rewrites the dict layer by layer and only then finds the result not unified; the guard
    runs the same conversion on a copy first (quietly), so a refused dict is left as it was.
    """
    global _UNIFY_TRIAL
    if _UNIFY_TRIAL:
        return
    _UNIFY_TRIAL, was_disabled, logger.disabled = True, logger.disabled, True
    try:
        unify_hybrid_kv_cache_specs(dict(kv_cache_spec))
    except AssertionError:
        raise KVCacheSpecMergeError(
            "SlidingWindowMLASpec layers need a full-attention layer to be unified with "
            "(the hybrid KV cache manager is disabled)"
        ) from None
    finally:
        _UNIFY_TRIAL, logger.disabled = False, was_disabled


def guard_get_kv_cache_configs(kv_cache_specs: Any, available_memory: Any) -> None:
    """One spec dict and one budget per worker; one spec per layer across workers."""
    if len(kv_cache_specs) != len(available_memory):
        raise ValueError(
            f"get_kv_cache_configs: {len(kv_cache_specs)} workers' specs but "
            f"{len(available_memory)} memory budgets; give one of each per worker"
        )
    merged: dict[str, KVCacheSpec] = {}
    for worker_spec in kv_cache_specs:
        for name, spec in worker_spec.items():
            if merged.setdefault(name, spec) != spec:
                raise KVCacheSpecMergeError(
                    f"The KV cache specs for the same layer are different across workers "
                    f"({name!r}: {merged[name]} vs {spec}). This is not supported yet."
                )


def guard_scheduler_kv_cache_config(kv_cache_configs: Any) -> None:
    """generate_scheduler_kv_cache_config: every worker has the same num_blocks."""
    if any(cfg.num_blocks != kv_cache_configs[0].num_blocks for cfg in kv_cache_configs):
        raise KVCacheSpecMergeError(
            f"workers disagree on num_blocks: {[cfg.num_blocks for cfg in kv_cache_configs]}"
        )


def __getattr__(name: str) -> Any:
    # NOTE: only reached while NONE_HASH does not exist yet (before init_none_hash).
    if name == "NONE_HASH":
        raise NoneHashNotInitialisedError(_NO_NONE_HASH)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
