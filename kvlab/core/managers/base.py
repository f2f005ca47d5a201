"""The bookkeeping every attention type shares: one request's block list per KV cache group.

A :class:`SingleTypeKVCacheManager` owns ``req_to_blocks`` (request id -> the blocks that hold
its tokens, in token order) for one KV cache group, and knows how its attention type reads
them: which blocks a prefix-cache hit may reuse (``find_longest_cache_hit``), which tokens
the layer never looks at again (``get_num_skipped_tokens``), and therefore which blocks can
go back to the pool early (``remove_skipped_blocks``). The subclasses live next to this
module, one attention type each.

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvlab.core.block_hash_to_block_map import BlockHashToBlockMap
from kvlab.core.block_pool import BlockPool
from kvlab.core.kv_cache_interface import FullAttentionSpec, KVCacheSpec, TQFullAttentionSpec

if TYPE_CHECKING:
    from kvlab.core.kv_cache_utils import BlockHashList, KVCacheBlock
    from kvlab.core.request import Request

__all__ = ["SingleTypeKVCacheManager", "cdiv", "direct_lookup"]


def cdiv(a: int, b: int) -> int:
    """Ceiling division: how many ``b``-sized pieces cover ``a``."""
    return -(a // -b)


def direct_lookup(
    block_pool: BlockPool, kv_cache_group_ids: list[int]
) -> tuple[Any, bytes, int, Any] | None:
    """``(cached_map.get, group-id suffix, group id, recorder)`` for a direct hit scan, or None.

    A hit scan may read the cached map itself when that does exactly what
    ``block_pool.get_cached_block`` does: one group, the pool's own map and
    ``get_cached_block`` not replaced (checked once per scan, not per block). The scan then
    looks up ``block_hash + suffix`` (= make_block_hash_with_group_id), takes the first inserted
    block when several share the key (= BlockHashToBlockMap.get_one_block) and, when the
    recorder is on, reports ``lookup(block_hash, group_id, block_id or -1)`` per probe, as
    get_cached_block does.
    """
    cached = block_pool.cached_block_hash_to_block
    if (
        len(kv_cache_group_ids) != 1
        or type(cached) is not BlockHashToBlockMap
        or type(block_pool).get_cached_block is not BlockPool.get_cached_block
        or "get_cached_block" in block_pool.__dict__
    ):
        return None
    group_id = kv_cache_group_ids[0]
    suffix = group_id.to_bytes(4, "big", signed=False)
    return cached._cache.get, suffix, group_id, block_pool.recorder


def _check_world_size(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


class SingleTypeKVCacheManager(ABC):
    """Per-group block bookkeeping for one attention type (abstract).

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.
    kvlab adds ``recorder`` (``None`` = off) and reports every change of ``req_to_blocks``
    through it: ``req_blocks_add`` (in list order), ``req_blocks_null``, ``req_free``.

    Args:
        kv_cache_spec: The spec shared by the layers of this group.
        block_pool: The pool every group allocates from.
        enable_caching: Whether prefix caching is on.
        kv_cache_group_id: Index of this group in ``KVCacheConfig.kv_cache_groups``.
        dcp_world_size: Decode context-parallel world size (>= 1).
        pcp_world_size: Prefill context-parallel world size (>= 1). When
            ``dcp_world_size * pcp_world_size > 1`` one logical block holds that many times
            ``kv_cache_spec.block_size`` tokens.
        max_admission_blocks_per_request: Per-request cap (blocks) used by the admission
            check of ``get_num_blocks_to_allocate``; only set for attention types that recycle
            blocks while a request runs (sliding window, chunked local). ``None`` = no cap.

    Raises:
        ValueError: A world size is not an int >= 1.
    """

    # NOTE: invariants of the per-request state (checked by kvlab's tests after every step):
    # - req_to_blocks[r] lists the blocks of request r in token order; index i covers tokens
    #   [i * block_size, (i + 1) * block_size). Skipped positions hold the shared null_block.
    # - every non-null block in req_to_blocks[r] has been counted once in its ref_cnt for r.
    # - num_cached_block[r] <= len(req_to_blocks[r]) blocks: the prefix of r's list whose
    #   blocks already carry a block_hash (or are null). Its presence marks r as "running"
    #   (no more prefix-cache hits may be added to r).
    # - req_to_blocks is a defaultdict, as in vLLM: reading an unknown request creates an
    #   empty entry. Only FullAttentionManager.get_num_common_prefix_blocks can see such an
    #   entry (it counts entries); the recorder reports a creation that leaves the entry
    #   empty as an empty req_blocks_add.

    def __init__(
        self,
        kv_cache_spec: KVCacheSpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
        max_admission_blocks_per_request: int | None = None,
    ) -> None:
        _check_world_size("dcp_world_size", dcp_world_size)
        _check_world_size("pcp_world_size", pcp_world_size)
        self.block_size = kv_cache_spec.block_size
        self.dcp_world_size = dcp_world_size
        self.pcp_world_size = pcp_world_size
        if dcp_world_size * pcp_world_size > 1:
            self.block_size *= dcp_world_size * pcp_world_size
        self.kv_cache_spec = kv_cache_spec
        self.block_pool = block_pool
        self.enable_caching = enable_caching
        self._max_admission_blocks_per_request = max_admission_blocks_per_request
        # Ids of attention blocks handed out since the last take_new_block_ids() (for zeroing).
        self.new_block_ids: list[int] = []
        self.req_to_blocks: defaultdict[str, list[KVCacheBlock]] = defaultdict(list)
        # request id -> number of leading blocks already cached (running requests only).
        self.num_cached_block: dict[str, int] = {}
        self.kv_cache_group_id = kv_cache_group_id
        self._null_block = block_pool.null_block
        self.recorder = None
        # NOTE: vLLM tests `type(spec) in (FullAttentionSpec, TQFullAttentionSpec)` on every
        # allocation; subclasses (MLA, sink, ...) deliberately do not report new block ids.
        self._tracks_new_block_ids = type(kv_cache_spec) in (FullAttentionSpec, TQFullAttentionSpec)

    # ------------------------------------------------------------------ recorder helper
    def _req_blocks_for_update(self, request_id: str) -> list[KVCacheBlock]:
        """``self.req_to_blocks[request_id]``; a newly created (empty) entry is reported as an
        empty ``req_blocks_add`` (used where vLLM reads the defaultdict without extending)."""
        rec = self.recorder
        if rec is not None and request_id not in self.req_to_blocks:
            blocks = self.req_to_blocks[request_id]
            rec.req_blocks_add(request_id, self.kv_cache_group_id, [])
            return blocks
        return self.req_to_blocks[request_id]

    # ------------------------------------------------------------------ admission
    @classmethod
    def _get_num_evictable_blocks(cls, blocks: Sequence[KVCacheBlock]) -> int:
        num_evictable = 0
        for blk in blocks:  # (a plain loop: faster than sum() over a generator)
            if blk.ref_cnt == 0 and not blk.is_null:
                num_evictable += 1
        return num_evictable

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
    ) -> int:
        """How many free blocks the request would take from the pool to reach ``num_tokens``.

        Counts the new blocks plus the prefix-cache hits that are eviction candidates now
        (ref_cnt 0): touching them takes them out of the free queue too.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.get_num_blocks_to_allocate

        Args:
            request_id: The request.
            num_tokens: Tokens that need a slot, already-allocated ones included (tokens).
            new_computed_blocks: This group's prefix-cache hit blocks (nulls included).
            total_computed_tokens: Local plus external computed tokens (tokens).
            num_tokens_main_model: ``num_tokens`` without lookahead tokens (tokens).
            apply_admission_cap: Clamp by ``max_admission_blocks_per_request`` (admission gate).

        Returns:
            The number of blocks (blocks).
        """
        num_required_blocks = -(-num_tokens // self.block_size)  # cdiv, inlined (hot)
        if apply_admission_cap and self._max_admission_blocks_per_request is not None:
            # NOTE: the cap equals the startup pool sizer's per-request bound, so what startup
            # admits the runtime gate admits too (remove_skipped_blocks runs before each chunk).
            num_required_blocks = min(num_required_blocks, self._max_admission_blocks_per_request)
        num_req_blocks = len(self.req_to_blocks.get(request_id, ()))
        if request_id in self.num_cached_block:
            # A running request gets no new hits. Rejected draft tokens can leave it holding
            # more blocks than it needs now, hence the clamp at 0.
            assert len(new_computed_blocks) == 0
            return max(num_required_blocks - num_req_blocks, 0)

        num_skipped_blocks = self.get_num_skipped_tokens(total_computed_tokens) // self.block_size
        num_local_computed_blocks = len(new_computed_blocks) + num_req_blocks
        # Blocks are needed only past whichever is further: the window's left edge or the
        # blocks the request already has (held or hit).
        num_new_blocks = max(
            num_required_blocks - max(num_skipped_blocks, num_local_computed_blocks), 0
        )
        # Hits inside the skipped range are never touched, so they cost nothing.
        num_skipped_new_computed_blocks = max(0, num_skipped_blocks - num_req_blocks)
        num_evictable_blocks = self._get_num_evictable_blocks(
            new_computed_blocks[num_skipped_new_computed_blocks:]
        )
        return num_new_blocks + num_evictable_blocks

    # ------------------------------------------------------------------ allocation
    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[KVCacheBlock],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
    ) -> None:
        """Give a new request its prefix-cache hits (and blocks for connector-computed tokens).

        Hits before the attention window become null blocks; the rest are touched (ref_cnt += 1,
        out of the free queue) and appended; all count as cached; then external tokens get
        fresh blocks. A running request is left as is.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.allocate_new_computed_blocks

        Args:
            request_id: The request.
            new_computed_blocks: This group's hit blocks (nulls included).
            num_local_computed_tokens: Tokens computed locally, hits included (tokens).
            num_external_computed_tokens: Tokens a KV connector computed (tokens).

        Raises:
            ValueError: Hits for a running request, a non-running request that holds blocks,
                or hits while prefix caching is off.
        """
        if request_id in self.num_cached_block:
            if len(new_computed_blocks) != 0:
                raise ValueError(
                    f"request {request_id!r} is running; it cannot take new prefix-cache hits"
                )
            return
        if self.req_to_blocks.get(request_id):
            raise ValueError(
                f"request {request_id!r} already holds blocks; hits go only to new requests"
            )
        num_total_computed_tokens = num_local_computed_tokens + num_external_computed_tokens
        num_skipped_tokens = self.get_num_skipped_tokens(num_total_computed_tokens)
        num_skipped_blocks = num_skipped_tokens // self.block_size
        if num_skipped_blocks > 0:
            # Every hit may be skipped (num_skipped_blocks > len(hits)); so may external tokens.
            new_computed_blocks = new_computed_blocks[num_skipped_blocks:]
            num_external_computed_tokens = min(
                num_total_computed_tokens - num_skipped_tokens, num_external_computed_tokens
            )
        if not self.enable_caching and len(new_computed_blocks) != 0:
            raise ValueError("prefix caching is disabled: new_computed_blocks must be empty")

        if self.enable_caching:
            self.block_pool._touch_unchecked(new_computed_blocks)
        # NOTE: vLLM creates the entry before the touch; kvlab creates it with its first
        # extend so that req_to_blocks and the recorder's events agree at every event.
        rec = self.recorder
        if rec is None:
            req_blocks = self.req_to_blocks[request_id]
            if num_skipped_blocks:
                req_blocks.extend([self._null_block] * num_skipped_blocks)
            req_blocks.extend(new_computed_blocks)
        else:
            created = request_id not in self.req_to_blocks
            req_blocks = self.req_to_blocks[request_id]
            added = [self._null_block] * num_skipped_blocks + list(new_computed_blocks)
            req_blocks.extend(added)
            if added or created:
                rec.req_blocks_add(
                    request_id, self.kv_cache_group_id, [b.block_id for b in added]
                )
        # Hits (and the null padding) are cached already: cache_blocks() must start after them.
        self.num_cached_block[request_id] = len(req_blocks)
        if num_external_computed_tokens > 0:
            num_blocks = cdiv(num_total_computed_tokens, self.block_size) - len(req_blocks)
            self._extend_new_blocks(request_id, num_blocks)

    def _extend_new_blocks(self, request_id: str, num_blocks: int) -> list[KVCacheBlock]:
        """Take ``num_blocks`` fresh blocks from the pool and append them to the request's."""
        new_blocks = self.block_pool._get_new_blocks_unchecked(num_blocks)
        self.req_to_blocks[request_id].extend(new_blocks)
        rec = self.recorder
        if rec is not None and new_blocks:
            rec.req_blocks_add(request_id, self.kv_cache_group_id, [b.block_id for b in new_blocks])
        if self._tracks_new_block_ids:
            self.new_block_ids.extend([b.block_id for b in new_blocks])
        return new_blocks

    def allocate_new_blocks(
        self, request_id: str, num_tokens: int, num_tokens_main_model: int
    ) -> list[KVCacheBlock]:
        """Append fresh blocks until the request has slots for ``num_tokens`` tokens.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.allocate_new_blocks

        Args:
            request_id: The request.
            num_tokens: Tokens that need a slot, already-allocated ones included (tokens).
            num_tokens_main_model: ``num_tokens`` without lookahead tokens (tokens).

        Returns:
            The newly allocated blocks (possibly empty).
        """
        num_held = len(self.req_to_blocks.get(request_id, ()))
        num_new_blocks = -(-num_tokens // self.block_size) - num_held  # cdiv, inlined (hot)
        if num_new_blocks <= 0:
            self._req_blocks_for_update(request_id)  # vLLM creates the entry even then
            return []
        return self._extend_new_blocks(request_id, num_new_blocks)

    def take_new_block_ids(self) -> list[int]:
        """Return and forget the ids of blocks allocated since the last call.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.take_new_block_ids
        """
        ids = self.new_block_ids
        self.new_block_ids = []
        return ids

    # ------------------------------------------------------------------ prefix caching
    def cache_blocks(
        self, request: Request, num_tokens: int, alignment_tokens: int | None = None
    ) -> None:
        """Hash-register the request's blocks that became full, up to ``num_tokens`` tokens.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.cache_blocks

        Args:
            request: The request (its ``block_hashes`` must cover the full blocks).
            num_tokens: Tokens to have cached after the call, cached ones included (tokens).
            alignment_tokens: The coordinator's hit alignment (tokens). When larger than this
                group's block size, groups whose hits use only some blocks of each aligned
                segment (sliding window) leave the other blocks out of the cache.
        """
        num_cached_blocks = self.num_cached_block.get(request.request_id, 0)
        num_full_blocks = num_tokens // self.block_size
        if num_cached_blocks >= num_full_blocks:
            return
        if alignment_tokens is None or alignment_tokens <= self.block_size:
            block_mask = None
        else:
            block_mask = self._cache_block_mask(
                num_cached_blocks, num_full_blocks, alignment_tokens
            )
        self.block_pool.cache_full_blocks(
            request=request,
            blocks=self.req_to_blocks[request.request_id],
            num_cached_blocks=num_cached_blocks,
            num_full_blocks=num_full_blocks,
            block_size=self.block_size,
            kv_cache_group_id=self.kv_cache_group_id,
            block_mask=block_mask,
        )
        self.num_cached_block[request.request_id] = num_full_blocks

    def _cache_block_mask(
        self, num_cached_blocks: int, num_full_blocks: int, alignment_tokens: int
    ) -> list[bool] | None:
        """Which of blocks ``[num_cached_blocks, num_full_blocks)`` to cache; ``None`` = all."""
        return None

    # ------------------------------------------------------------------ release
    def free(self, request_id: str) -> None:
        """Release every block of the request, tail first (so the tail is evicted first).

        An unknown request id is a no-op, as in vLLM (a request aborted before allocation).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.free
        """
        req_blocks = self.req_to_blocks.pop(request_id, None)
        if req_blocks is None:
            req_blocks = []
        else:
            rec = self.recorder
            if rec is not None:
                rec.req_free(request_id, self.kv_cache_group_id)
        self.block_pool._free_blocks_unchecked(reversed(req_blocks))
        self.num_cached_block.pop(request_id, None)

    def remove_skipped_blocks(self, request_id: str, total_computed_tokens: int) -> None:
        """Free the blocks no future token attends to and put the null block in their place.

        Walks back from the last skipped block and stops at the first null block (everything
        before it was nulled by an earlier call). The freed blocks go to the pool in that
        backward order, so the later (longer-prefix) block is evicted first.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.remove_skipped_blocks

        Args:
            request_id: The request (unknown ids are a no-op, as in vLLM).
            total_computed_tokens: Local plus external computed tokens (tokens).
        """
        num_skipped_tokens = self.get_num_skipped_tokens(total_computed_tokens)
        if num_skipped_tokens <= 0:
            return
        blocks = self._req_blocks_for_update(request_id)
        # The window may already reach into tokens that have no block yet (external tokens).
        num_skipped_blocks = min(num_skipped_tokens // self.block_size, len(blocks))
        removed_blocks: list[KVCacheBlock] = []
        indices: list[int] = []
        null_block = self._null_block
        for i in range(num_skipped_blocks - 1, -1, -1):
            # NOTE: identity, not the dataclass __eq__ vLLM uses (it builds two field tuples);
            # only the null block has block_id 0, so the two agree.
            if blocks[i] is null_block:
                break
            removed_blocks.append(blocks[i])
            blocks[i] = self._null_block
            indices.append(i)
        if not removed_blocks:
            return  # (vLLM frees the empty list: no change, no event)
        rec = self.recorder
        if rec is not None:
            rec.req_blocks_null(request_id, self.kv_cache_group_id, indices)
        self.block_pool._free_blocks_unchecked(removed_blocks)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Leading tokens the next token's attention no longer reads (tokens); 0 here.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.get_num_skipped_tokens
        """
        return 0

    def new_step_starts(self) -> None:
        """Hook called once per scheduler step; nothing to do by default."""

    # ------------------------------------------------------------------ per attention type
    @abstractmethod
    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Leading blocks shared by every request that holds blocks in this group (blocks)."""
        raise NotImplementedError

    @classmethod
    @abstractmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        use_eagle: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[list[KVCacheBlock], ...]:
        """The longest prefix (at most ``max_length`` tokens) every listed group has cached.

        Args:
            block_hashes: The request's chained block hashes at this spec's block size.
            max_length: Longest hit allowed (tokens).
            kv_cache_group_ids: Groups that must all hit (they share ``kv_cache_spec``).
            block_pool: The pool whose ``cached_block_hash_to_block`` is searched.
            kv_cache_spec: The groups' spec.
            use_eagle: Drop the last matched block so EAGLE recomputes its hidden states.
            alignment_tokens: The hit length must be a multiple of this (tokens).
            dcp_world_size: Decode context-parallel world size.
            pcp_world_size: Prefill context-parallel world size.

        Returns:
            One list per group id, equally long: hit blocks, with null blocks at the positions
            the attention type never reads.
        """
        raise NotImplementedError
