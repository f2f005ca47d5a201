"""Per-attention-type block bookkeeping: one request's block list per KV cache group.

A :class:`SingleTypeKVCacheManager` owns ``req_to_blocks`` (request id -> the blocks that hold
its tokens, in token order) for one KV cache group, and knows how its attention type reads
them: which blocks a prefix-cache hit may reuse (``find_longest_cache_hit``), which tokens the
layer never looks at again (``get_num_skipped_tokens``), and therefore which blocks can go back
to the pool early (``remove_skipped_blocks``, leaving the ``null_block`` in their place).

=============================  ==========================================================
FullAttentionManager           every token, every block kept until the request finishes
SlidingWindowManager           the last ``sliding_window`` tokens; hits searched right to left
ChunkedLocalAttentionManager   the tokens of the current ``attention_chunk_size`` chunk
MambaManager                   the state after the last token; hits are the last cached state
CrossAttentionManager          encoder tokens, allocated once, never cached
SinkFullAttentionManager       full attention plus ``sink_len`` tokens of sink blocks
=============================  ==========================================================

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py, class for class and statement for
statement. kvlab adds a ``recorder`` (a line after each change of ``req_to_blocks``: see
``kvlab.core.recorder``) and one guard call in the constructor.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvlab.core.block_pool import BlockPool
from kvlab.core.dtypes import cdiv
from kvlab.core.guards import guard_world_sizes
from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    TQFullAttentionSpec,
)
from kvlab.core.kv_cache_utils import BlockHashList, BlockHashWithGroupId, KVCacheBlock

if TYPE_CHECKING:
    from kvlab.core.recorder import KVRecorder
    from kvlab.core.request import Request

__all__ = [
    "ChunkedLocalAttentionManager",
    "CrossAttentionManager",
    "FullAttentionManager",
    "MambaManager",
    "SingleTypeKVCacheManager",
    "SinkFullAttentionManager",
    "SlidingWindowManager",
    "get_manager_for_kv_cache_spec",
    "spec_manager_map",
]


class SingleTypeKVCacheManager:
    """Per-group block bookkeeping for one attention type (the base of the six managers).

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.

    NOTE: vLLM makes this class an ABC. kvlab's is a plain class whose abstract methods raise
    NotImplementedError: an ABC makes every ``isinstance(manager, CrossAttentionManager)``
    (run per group in each allocation) several times slower, and the methods are the same.

    Args:
        kv_cache_spec: The spec shared by the layers of this group.
        block_pool: The pool every group allocates from.
        enable_caching: Whether prefix caching is on.
        kv_cache_group_id: Index of this group in ``KVCacheConfig.kv_cache_groups``.
        dcp_world_size: Decode context-parallel world size (>= 1).
        pcp_world_size: Prefill context-parallel world size (>= 1). When
            ``dcp_world_size * pcp_world_size > 1`` one logical block holds that many times
            ``kv_cache_spec.block_size`` tokens.
        max_admission_blocks_per_request: Per-request cap (blocks) used by the admission check
            of ``get_num_blocks_to_allocate``; set only for attention types that recycle blocks
            while a request runs (sliding window, chunked local). None = no cap.

    Raises:
        ValueError: A world size is not an int >= 1.
    """

    # NOTE: invariants of the per-request state (checked by kvlab's tests after every step):
    # - req_to_blocks[r] lists the blocks of request r in token order; index i covers tokens
    #   [i * block_size, (i + 1) * block_size). Skipped positions hold the shared null_block.
    # - every non-null block in req_to_blocks[r] has been counted once in its ref_cnt for r.
    # - num_cached_block[r] <= len(req_to_blocks[r]) blocks: the prefix of r's list whose
    #   blocks already carry a block_hash (or are null). Its presence marks r as running (no
    #   more prefix-cache hits may be added to r); preempted requests are not tracked.
    # - req_to_blocks is a defaultdict, as in vLLM: reading an unknown request creates an
    #   empty entry (the recorder reports that as an empty req_blocks_add).

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
        guard_world_sizes(dcp_world_size, pcp_world_size)
        self.block_size = kv_cache_spec.block_size
        self.dcp_world_size = dcp_world_size
        self.pcp_world_size = pcp_world_size
        if dcp_world_size * pcp_world_size > 1:
            self.block_size *= dcp_world_size * pcp_world_size
        self.kv_cache_spec = kv_cache_spec
        self.block_pool = block_pool
        self.enable_caching = enable_caching
        self._max_admission_blocks_per_request = max_admission_blocks_per_request
        # Ids of full-attention blocks handed out since the last take_new_block_ids() (zeroing).
        self.new_block_ids: list[int] = []

        self.req_to_blocks: defaultdict[str, list[KVCacheBlock]] = defaultdict(list)

        # request id -> number of leading blocks already cached (running requests only).
        self.num_cached_block: dict[str, int] = {}

        self.kv_cache_group_id = kv_cache_group_id
        self._null_block = block_pool.null_block
        self.recorder: KVRecorder | None = None

    @classmethod
    def _get_num_evictable_blocks(cls, blocks: Sequence[KVCacheBlock]) -> int:
        return sum(blk.ref_cnt == 0 and not blk.is_null for blk in blocks)

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
        (ref_cnt 0): touching them takes them out of the free queue too. Blocks before the
        attention window (skipped) are needed neither as new blocks nor as hits.

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
        num_required_blocks = cdiv(num_tokens, self.block_size)
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

        num_skipped_tokens = self.get_num_skipped_tokens(total_computed_tokens)
        num_local_computed_blocks = len(new_computed_blocks) + num_req_blocks
        num_skipped_blocks = num_skipped_tokens // self.block_size
        # Blocks are needed only past whichever is further: the window's left edge or the
        # blocks the request already has (held or hit).
        num_new_blocks = max(
            num_required_blocks - max(num_skipped_blocks, num_local_computed_blocks),
            0,
        )

        # Hits inside the skipped range are never touched, so they cost nothing; the held
        # blocks already cover num_req_blocks of the skipped range.
        num_skipped_new_computed_blocks = max(0, num_skipped_blocks - num_req_blocks)

        num_evictable_blocks = self._get_num_evictable_blocks(
            new_computed_blocks[num_skipped_new_computed_blocks:]
        )
        return num_new_blocks + num_evictable_blocks

    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[KVCacheBlock],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
    ) -> None:
        """Give a new request its prefix-cache hits (and blocks for connector-computed tokens).

        Hits before the attention window become null blocks; the rest are touched (ref_cnt
        += 1, out of the free queue) and appended; all count as cached; then external tokens get
        fresh blocks. A running request is left as is.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.allocate_new_computed_blocks

        Args:
            request_id: The request.
            new_computed_blocks: This group's hit blocks (nulls included).
            num_local_computed_tokens: Tokens computed locally, hits included (tokens).
            num_external_computed_tokens: Tokens a KV connector computed (tokens).
        """
        if request_id in self.num_cached_block:
            # A running request gets no new hits.
            assert len(new_computed_blocks) == 0
            return

        req_blocks = self.req_to_blocks[request_id]
        if self.recorder is not None and not req_blocks:
            self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, ())
        assert len(req_blocks) == 0
        num_total_computed_tokens = num_local_computed_tokens + num_external_computed_tokens
        num_skipped_tokens = self.get_num_skipped_tokens(num_total_computed_tokens)
        num_skipped_blocks = num_skipped_tokens // self.block_size
        if num_skipped_blocks > 0:
            # Every hit may be skipped (num_skipped_blocks > len(hits)); so may external tokens.
            new_computed_blocks = new_computed_blocks[num_skipped_blocks:]
            num_external_computed_tokens = min(
                num_total_computed_tokens - num_skipped_tokens,
                num_external_computed_tokens,
            )

        # Touch the hits so they cannot be evicted.
        if self.enable_caching:
            self.block_pool.touch(new_computed_blocks)
        else:
            assert not any(new_computed_blocks), (
                "Computed blocks should be empty when prefix caching is disabled"
            )

        req_blocks.extend([self._null_block] * num_skipped_blocks)
        if self.recorder is not None:
            self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, [self._null_block.block_id] * num_skipped_blocks)
        req_blocks.extend(new_computed_blocks)
        if self.recorder is not None:
            self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, [b.block_id for b in new_computed_blocks])
        # Hits (and the null padding) are cached already: cache_blocks() must start after them.
        self.num_cached_block[request_id] = len(req_blocks)

        if num_external_computed_tokens > 0:
            # Fresh blocks for the tokens a connector computed.
            allocated_blocks = self.block_pool.get_new_blocks(
                cdiv(num_total_computed_tokens, self.block_size) - len(req_blocks)
            )
            req_blocks.extend(allocated_blocks)
            if self.recorder is not None:
                self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, [b.block_id for b in allocated_blocks])
            if type(self.kv_cache_spec) in (FullAttentionSpec, TQFullAttentionSpec):
                self.new_block_ids.extend(b.block_id for b in allocated_blocks)

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
        req_blocks = self.req_to_blocks[request_id]
        if self.recorder is not None and not req_blocks:
            self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, ())
        num_required_blocks = cdiv(num_tokens, self.block_size)
        num_new_blocks = num_required_blocks - len(req_blocks)
        if num_new_blocks <= 0:
            return []
        else:
            new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
            req_blocks.extend(new_blocks)
            if self.recorder is not None:
                self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, [b.block_id for b in new_blocks])
            # NOTE: exact types, as vLLM: MLA, sink and other subclasses report no new ids.
            if type(self.kv_cache_spec) in (FullAttentionSpec, TQFullAttentionSpec):
                self.new_block_ids.extend(b.block_id for b in new_blocks)
            return new_blocks

    def take_new_block_ids(self) -> list[int]:
        """Return and forget the ids of blocks allocated since the last call.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.take_new_block_ids
        """
        ids = self.new_block_ids
        self.new_block_ids = []
        return ids

    def cache_blocks(self, request: Request, num_tokens: int, alignment_tokens: int | None = None) -> None:
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
            block_mask = self._cache_block_mask(num_cached_blocks, num_full_blocks, alignment_tokens)
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
        self,
        num_cached_blocks: int,
        num_full_blocks: int,
        alignment_tokens: int,
    ) -> list[bool] | None:
        """Which of blocks ``[num_cached_blocks, num_full_blocks)`` to cache; None = all.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager._cache_block_mask
        """
        return None

    def free(self, request_id: str) -> None:
        """Release every block of the request, tail first (so the tail is evicted first).

        An unknown request id is a no-op, as in vLLM (a request aborted before allocation).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.free
        """
        req_blocks = self.req_to_blocks.pop(request_id, [])
        if self.recorder is not None:
            self.recorder.req_free(request_id, self.kv_cache_group_id)

        # Tail first: a request's last blocks carry the longest prefixes, the least reusable.
        ordered_blocks = reversed(req_blocks)

        self.block_pool.free_blocks(ordered_blocks)
        self.num_cached_block.pop(request_id, None)

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Leading blocks shared by every request that holds blocks in this group (blocks).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.get_num_common_prefix_blocks
        """
        raise NotImplementedError

    @classmethod
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

        With EAGLE the last matched block is dropped (its hidden states must be recomputed
        for the draft head).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.find_longest_cache_hit

        Args:
            block_hashes: The request's chained block hashes at this spec's block size.
            max_length: Longest hit allowed (tokens).
            kv_cache_group_ids: Groups that must all hit (they share ``kv_cache_spec``).
            block_pool: The pool (anything with vLLM's ``get_cached_block`` and ``null_block``).
            kv_cache_spec: The groups' spec.
            use_eagle: Drop the last matched block so EAGLE recomputes its hidden states.
            alignment_tokens: The hit length must be a multiple of this (tokens).
            dcp_world_size: Decode context-parallel world size.
            pcp_world_size: Prefill context-parallel world size.

        Returns:
            One list per group id, equally long: hit blocks, with null blocks at the positions
            the attention type never reads (e.g. ``[NULL, NULL, block 7, block 8]`` for a
            sliding window of 8 tokens over 4-token blocks).
        """
        raise NotImplementedError

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
            # Every token is inside the window (always, for full attention).
            return
        blocks = self.req_to_blocks[request_id]
        if self.recorder is not None and not blocks:
            self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, ())
        num_skipped_blocks = num_skipped_tokens // self.block_size
        # The window may already reach into tokens that have no block yet (external tokens).
        num_skipped_blocks = min(num_skipped_blocks, len(blocks))
        removed_blocks: list[KVCacheBlock] = []
        for i in range(num_skipped_blocks - 1, -1, -1):
            if blocks[i] == self._null_block:
                # Everything before a null block was nulled by an earlier call.
                break
            removed_blocks.append(blocks[i])
            blocks[i] = self._null_block
            if self.recorder is not None:
                self.recorder.req_blocks_null(request_id, self.kv_cache_group_id, (i,))
        self.block_pool.free_blocks(removed_blocks)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Leading tokens the next token's attention no longer reads (tokens); 0 here.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.get_num_skipped_tokens
        """
        return 0

    def new_step_starts(self) -> None:
        """Hook called once per scheduler step; nothing to do by default.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.new_step_starts
        """
        return None


class FullAttentionManager(SingleTypeKVCacheManager):
    """Full (causal) attention: every block stays until the request finishes.

    A hit is the longest run of cached blocks from the start: the hashes are chained, so the
    first miss ends the prefix. Also searches chunked-local groups inside a hybrid lookup.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager
    """

    @classmethod
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
        """Left to right, stop at the first miss; then the EAGLE drop and the alignment.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager.find_longest_cache_hit
        (see the base class for the arguments).
        """
        assert isinstance(kv_cache_spec, FullAttentionSpec | ChunkedLocalAttentionSpec), (
            "FullAttentionManager can only be used for full attention and chunked local "
            "attention groups"
        )
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple([] for _ in range(len(kv_cache_group_ids)))
        block_size = kv_cache_spec.block_size
        if dcp_world_size * pcp_world_size > 1:
            block_size *= dcp_world_size * pcp_world_size
        max_num_blocks = max_length // block_size
        for block_hash in itertools.islice(block_hashes, max_num_blocks):
            # The hashes are chained: after the first miss no later block can hit.
            if cached_block := block_pool.get_cached_block(block_hash, kv_cache_group_ids):
                for computed, cached in zip(computed_blocks, cached_block):
                    computed.append(cached)
            else:
                break
        if use_eagle and computed_blocks[0]:
            # EAGLE recomputes the last matched block (its hidden states feed the draft head).
            for computed in computed_blocks:
                computed.pop()
        while (
            block_size != alignment_tokens  # the common case skips the loop
            and len(computed_blocks[0]) * block_size % alignment_tokens != 0
        ):
            for computed in computed_blocks:
                computed.pop()
        return computed_blocks

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Leading blocks of the request that every request holding blocks shares (blocks).

        A block is shared by all when its ref_cnt equals the number of ``req_to_blocks``
        entries (cascade attention's common prefix).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager.get_num_common_prefix_blocks
        """
        blocks = self.req_to_blocks[running_request_id]
        if self.recorder is not None and not blocks:
            self.recorder.req_blocks_add(running_request_id, self.kv_cache_group_id, ())
        num_common_blocks = 0
        for block in blocks:
            if block.ref_cnt == len(self.req_to_blocks):
                num_common_blocks += 1
            else:
                break
        return num_common_blocks


class SlidingWindowManager(SingleTypeKVCacheManager):
    """Sliding-window attention: a token reads only the last ``sliding_window`` tokens.

    Blocks that fall out of the window are freed (``remove_skipped_blocks``); a hit needs only
    the ``cdiv(sliding_window - 1, block_size)`` contiguous blocks before the hit's end, so the
    search runs right to left and pads the rest with null blocks.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager
    """

    def __init__(self, kv_cache_spec: SlidingWindowSpec, **kwargs: Any) -> None:
        super().__init__(kv_cache_spec, **kwargs)
        self.sliding_window = kv_cache_spec.sliding_window

    @classmethod
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
        """Right to left: the first run of enough contiguous cached blocks ends the hit.

        ``sliding_window - 1`` tokens before the next token must be cached (the token itself is
        in its window), i.e. ``cdiv(sliding_window - 1, block_size)`` contiguous blocks (one
        more with EAGLE, which then drops the last). A run at the start of the prompt shorter
        than that still counts.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager.find_longest_cache_hit
        (see the base class for the arguments).
        """
        assert isinstance(kv_cache_spec, SlidingWindowSpec), (
            "SlidingWindowManager can only be used for sliding window groups"
        )
        assert dcp_world_size == 1, "DCP not support sliding window attn now."
        assert pcp_world_size == 1, "PCP not support sliding window attn now."

        # -1: the next token is itself inside its window.
        sliding_window_contiguous_blocks = cdiv(kv_cache_spec.sliding_window - 1, kv_cache_spec.block_size)
        if use_eagle:
            # EAGLE drops the last matched block: match one more.
            sliding_window_contiguous_blocks += 1

        max_num_blocks = max_length // kv_cache_spec.block_size
        computed_blocks = tuple(
            [block_pool.null_block] * max_num_blocks for _ in range(len(kv_cache_group_ids))
        )
        block_size = kv_cache_spec.block_size
        num_contiguous_blocks = 0
        match_found = False
        for i in range(max_num_blocks - 1, -1, -1):
            if cached_block := block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids):
                # A run may only end at an aligned length.
                if num_contiguous_blocks == 0 and block_size != alignment_tokens:
                    post_pop_blocks = i if use_eagle else i + 1
                    if (post_pop_blocks * block_size) % alignment_tokens != 0:
                        continue
                for computed, cached in zip(computed_blocks, cached_block):
                    computed[i] = cached
                num_contiguous_blocks += 1
                if num_contiguous_blocks >= sliding_window_contiguous_blocks:
                    # Trim what follows the run: [NULL, NULL, 8, 3, NULL, 9] -> [NULL, NULL,
                    # 8, 3] for a run of 2.
                    for computed in computed_blocks:
                        del computed[i + num_contiguous_blocks :]
                    match_found = True
                    break
            else:
                num_contiguous_blocks = 0
        if not match_found:
            # A run starting at block 0 is a hit even if shorter than the window.
            for computed in computed_blocks:
                del computed[num_contiguous_blocks:]
            while (
                block_size != alignment_tokens
                and len(computed_blocks[0]) * block_size % alignment_tokens != 0
            ):
                for computed in computed_blocks:
                    computed.pop()
        if use_eagle and computed_blocks[0]:
            for computed in computed_blocks:
                computed.pop()
            # The pop may break the alignment (different page sizes per group): re-align.
            while (
                block_size != alignment_tokens
                and len(computed_blocks[0]) * block_size % alignment_tokens != 0
            ):
                for computed in computed_blocks:
                    computed.pop()
        return computed_blocks

    def _cache_block_mask(
        self, num_cached_blocks: int, num_full_blocks: int, alignment_tokens: int
    ) -> list[bool] | None:
        """Cache only the blocks an aligned hit can end with: the last ``tail`` of each segment.

        A hit ends at a multiple of ``alignment_tokens`` and reads the
        ``cdiv(sliding_window - 1, block_size)`` blocks before it; the segment's earlier blocks
        can never serve a hit.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager._cache_block_mask
        """
        assert alignment_tokens > self.block_size
        per_segment = alignment_tokens // self.block_size
        tail = cdiv(self.sliding_window - 1, self.block_size)
        if tail >= per_segment:
            return None
        skip = per_segment - tail
        return [i % per_segment >= skip for i in range(num_cached_blocks, num_full_blocks)]

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens before the next token's window: ``max(0, computed - sliding_window + 1)``.

        With sliding_window 4 and 7 computed tokens, the next token (index 7) reads tokens 4..7,
        so tokens 0..3 are skipped: 4.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager.get_num_skipped_tokens
        """
        return max(0, num_computed_tokens - self.sliding_window + 1)

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: a window's leading blocks are null blocks, not a shared prefix.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager.get_num_common_prefix_blocks
        """
        return 0


class ChunkedLocalAttentionManager(SingleTypeKVCacheManager):
    """Chunked local attention: a token reads only the tokens of its own chunk.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager
    """

    def __init__(self, kv_cache_spec: ChunkedLocalAttentionSpec, **kwargs: Any) -> None:
        super().__init__(kv_cache_spec, **kwargs)
        self.attention_chunk_size = kv_cache_spec.attention_chunk_size

    @classmethod
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
        """Blocks before the current chunk count as computed (null blocks); the chunk's own
        blocks are looked up left to right.

        Chunk 8, blocks of 4, max_length 15: tokens 0..7 lie outside the window of token 15,
        so ``[null, null]`` plus block 3 if it hits. max_length 16: ``[null] * 4``.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager.find_longest_cache_hit
        (see the base class for the arguments).
        """
        assert isinstance(kv_cache_spec, ChunkedLocalAttentionSpec), (
            "ChunkedLocalAttentionManager can only be used for chunked local attention groups"
        )
        assert use_eagle is False, "Hybrid KV cache is not supported for eagle + chunked local attention."
        assert dcp_world_size == 1, "DCP not support chunked local attn now."
        assert pcp_world_size == 1, "PCP not support chunked local attn now."
        assert kv_cache_spec.block_size == alignment_tokens, (
            "KV cache groups with different block sizes are not compatible with chunked local "
            "attention now"
        )
        max_num_blocks = max_length // kv_cache_spec.block_size
        if max_length > 0:
            local_attention_start_idx = (
                max_length // kv_cache_spec.attention_chunk_size * kv_cache_spec.attention_chunk_size
            )
        else:
            local_attention_start_idx = 0
        # [null] * (blocks before the current chunk), then the chunk's hits.
        local_attention_start_block_idx = local_attention_start_idx // kv_cache_spec.block_size
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple(
            [block_pool.null_block] * local_attention_start_block_idx
            for _ in range(len(kv_cache_group_ids))
        )
        for i in range(local_attention_start_block_idx, max_num_blocks):
            block_hash = block_hashes[i]
            if cached_block := block_pool.get_cached_block(block_hash, kv_cache_group_ids):
                for computed, cached in zip(computed_blocks, cached_block):
                    computed.append(cached)
            else:
                break
        return computed_blocks

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens before the current chunk: ``num_computed_tokens // chunk * chunk``.

        Chunk 8: 13 computed -> 8 skipped (the next token is in chunk 8..15); 8 computed -> 8;
        7 computed -> 0.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager.get_num_skipped_tokens
        """
        num_skipped_tokens = (num_computed_tokens // self.attention_chunk_size) * self.attention_chunk_size
        return num_skipped_tokens

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: cascade attention does not apply to chunked local attention.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager.get_num_common_prefix_blocks
        """
        return 0


class MambaManager(SingleTypeKVCacheManager):
    """Mamba (state-space) layers: a request needs only the state after its last token.

    With prefix caching a block holds the state at the end of that block; a hit is the last
    cached state, everything before it padding (null blocks). In ``"align"`` mode one
    running-state block plus ``num_speculative_blocks`` are kept per step and the state block
    of two steps ago is freed.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager
    """

    def __init__(self, kv_cache_spec: MambaSpec, block_pool: BlockPool, **kwargs: Any) -> None:
        super().__init__(kv_cache_spec, block_pool, **kwargs)
        # Hashes of blocks cached during the current step: other requests may not hit them yet.
        self.cached_blocks_this_step: set[BlockHashWithGroupId] = set()
        self.mamba_cache_mode = kv_cache_spec.mamba_cache_mode
        self.num_speculative_blocks: int = kv_cache_spec.num_speculative_blocks
        if self.mamba_cache_mode == "align":
            # request id -> index of the state block allocated in the previous step
            self.last_state_block_idx: dict[str, int] = {}
            self._allocated_block_reqs: set[str] = set()

    @classmethod
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
        """Right to left: the first cached (and aligned) block ``i`` is the hit, padded with
        ``i`` null blocks in front. ``use_eagle`` is ignored, as in vLLM.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.find_longest_cache_hit
        (see the base class for the arguments).
        """
        assert isinstance(kv_cache_spec, MambaSpec), "MambaManager can only be used for mamba groups"
        assert dcp_world_size == 1, "DCP not support mamba now."
        assert pcp_world_size == 1, "PCP not support mamba now."
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple([] for _ in range(len(kv_cache_group_ids)))

        block_size = kv_cache_spec.block_size
        max_num_blocks = max_length // block_size
        for i in range(max_num_blocks - 1, -1, -1):
            if cached_block := block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids):
                # The hit must end at an aligned length.
                if block_size != alignment_tokens and (i + 1) * block_size % alignment_tokens != 0:
                    continue
                for computed, cached in zip(computed_blocks, cached_block):
                    # Pad so that hit length == len(blocks) * block_size, like the other types.
                    computed.extend([block_pool.null_block] * i)
                    computed.append(cached)
                break  # the last cached state is all a Mamba layer needs

        return computed_blocks

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Free states no longer needed; in align mode also the state block of two steps ago.

        Draft tokens counted in ``num_computed_tokens`` may be rejected later, so
        ``num_speculative_blocks`` tokens are subtracted first.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.remove_skipped_blocks
        """
        assert isinstance(self.kv_cache_spec, MambaSpec)

        num_computed_tokens = max(0, num_computed_tokens - self.num_speculative_blocks)

        super().remove_skipped_blocks(request_id, num_computed_tokens)
        if self.mamba_cache_mode == "align":
            # The block of the previous step seeds this step's; the one before it can go.
            last_state_block_idx = self.last_state_block_idx.get(request_id)
            if (
                last_state_block_idx is not None
                and last_state_block_idx < cdiv(num_computed_tokens, self.block_size) - 1
            ):
                blocks = self.req_to_blocks[request_id]
                if self.recorder is not None and not blocks:
                    self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, ())
                if blocks[last_state_block_idx] != self._null_block:
                    self.block_pool.free_blocks([blocks[last_state_block_idx]])
                    blocks[last_state_block_idx] = self._null_block
                    if self.recorder is not None:
                        self.recorder.req_blocks_null(request_id, self.kv_cache_group_id, (last_state_block_idx,))

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: cascade attention does not apply to Mamba.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.get_num_common_prefix_blocks
        """
        return 0

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
    ) -> int:
        """As the base class, plus speculative blocks; align mode asks for at most one
        running-state block (plus the speculative ones on the first prefill).

        A hit on a block cached during this step returns ``num_gpu_blocks + 1``, so the request
        waits a step (the state may not be written yet).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.get_num_blocks_to_allocate
        """
        assert isinstance(self.kv_cache_spec, MambaSpec)
        if len(new_computed_blocks) > 0 and new_computed_blocks[-1].block_hash in self.cached_blocks_this_step:
            return self.block_pool.num_gpu_blocks + 1
        if self.mamba_cache_mode != "align":
            # Speculative decoding keeps num_speculative_blocks more state blocks.
            if self.num_speculative_blocks > 0:
                num_tokens += self.kv_cache_spec.block_size * self.num_speculative_blocks
            return super().get_num_blocks_to_allocate(
                request_id,
                num_tokens,
                new_computed_blocks,
                total_computed_tokens,
                num_tokens_main_model,
                apply_admission_cap=apply_admission_cap,
            )
        else:
            # Align mode ignores lookahead tokens: they would break the block alignment (and
            # draft models have no Mamba layers).
            num_tokens = num_tokens_main_model

            # NOTE: an over-estimate: num_tokens may include drafts that will be rejected.
            num_required_blocks = cdiv(num_tokens, self.block_size) + self.num_speculative_blocks
            num_new_blocks = num_required_blocks - len(new_computed_blocks) - len(self.req_to_blocks[request_id])
            if self.recorder is not None and not self.req_to_blocks[request_id]:
                self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, ())
            if num_new_blocks > 0:
                if request_id in self._allocated_block_reqs:
                    # The speculative blocks of the last step are reused: at most one more.
                    num_new_blocks = 1
                else:
                    # First prefill: the running state plus the speculative blocks.
                    num_new_blocks = 1 + self.num_speculative_blocks

            num_evictable_computed_blocks = self._get_num_evictable_blocks(new_computed_blocks)
            return num_new_blocks + num_evictable_computed_blocks

    def allocate_new_blocks(
        self, request_id: str, num_tokens: int, num_tokens_main_model: int
    ) -> list[KVCacheBlock]:
        """Allocate state blocks (align mode: pad with nulls, move speculative blocks, add one).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.allocate_new_blocks
        """
        assert isinstance(self.kv_cache_spec, MambaSpec)
        if self.mamba_cache_mode != "align":
            if self.num_speculative_blocks > 0:
                num_tokens += self.block_size * self.num_speculative_blocks
            return super().allocate_new_blocks(request_id, num_tokens, num_tokens_main_model)
        else:
            # Align mode ignores lookahead tokens (see get_num_blocks_to_allocate).
            num_tokens = num_tokens_main_model
            req_blocks: list[KVCacheBlock] = self.req_to_blocks[request_id]
            if self.recorder is not None and not req_blocks:
                self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, ())
            num_required_blocks = cdiv(num_tokens, self.block_size) + self.num_speculative_blocks
            if num_required_blocks == len(req_blocks):
                return []
            else:
                assert num_required_blocks > len(req_blocks), (
                    f"num_required_blocks {num_required_blocks} < len(req_blocks) {len(req_blocks)}"
                )
                prev_block_len = len(req_blocks)
                blocks_allocated = request_id in self._allocated_block_reqs
                if blocks_allocated:
                    # The running state lives in the last (1 + num_speculative_blocks) blocks.
                    self.last_state_block_idx[request_id] = prev_block_len - 1 - self.num_speculative_blocks
                elif prev_block_len > 0:
                    # A new request that hit the cache: its last block holds the hit state.
                    self.last_state_block_idx[request_id] = prev_block_len - 1

                num_skipped_blocks = num_required_blocks - self.num_speculative_blocks - 1
                if prev_block_len < num_skipped_blocks:
                    req_blocks.extend([self._null_block for _ in range(prev_block_len, num_skipped_blocks)])
                    if self.recorder is not None:
                        self.recorder.req_blocks_add(
                            request_id, self.kv_cache_group_id,
                            [self._null_block.block_id for _ in range(prev_block_len, num_skipped_blocks)],
                        )  # fmt: skip

                if blocks_allocated:
                    # Reuse last step's speculative blocks that now fall in the skipped range.
                    for block_idx in range(prev_block_len - self.num_speculative_blocks, prev_block_len):
                        if block_idx < num_skipped_blocks:
                            req_blocks.append(req_blocks[block_idx])
                            if self.recorder is not None:
                                self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, [req_blocks[-1].block_id])
                            req_blocks[block_idx] = self._null_block
                            if self.recorder is not None:
                                self.recorder.req_blocks_null(request_id, self.kv_cache_group_id, (block_idx,))
                        else:
                            break
                num_new_blocks = num_required_blocks - len(req_blocks)
                if blocks_allocated:
                    assert num_new_blocks <= 1
                else:
                    assert num_new_blocks <= self.num_speculative_blocks + 1
                new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
                req_blocks.extend(new_blocks)
                if self.recorder is not None:
                    self.recorder.req_blocks_add(request_id, self.kv_cache_group_id, [b.block_id for b in new_blocks])
                self._allocated_block_reqs.add(request_id)
                return req_blocks[prev_block_len:]

    def free(self, request_id: str) -> None:
        """Release the request's blocks and its align-mode bookkeeping.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.free
        """
        if self.mamba_cache_mode == "align":
            self._allocated_block_reqs.discard(request_id)
            self.last_state_block_idx.pop(request_id, None)
        super().free(request_id)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """All but the last computed token: only the latest state is needed (tokens).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.get_num_skipped_tokens
        """
        return num_computed_tokens - 1

    def cache_blocks(self, request: Request, num_tokens: int, alignment_tokens: int | None = None) -> None:
        """Cache as the base class and remember this step's newly cached hashes.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.cache_blocks
        """
        num_cached_blocks_before = self.num_cached_block.get(request.request_id, 0)
        super().cache_blocks(request, num_tokens, alignment_tokens=alignment_tokens)
        num_cached_blocks_after = self.num_cached_block.get(request.request_id, 0)
        if num_cached_blocks_after > num_cached_blocks_before:
            for block in self.req_to_blocks[request.request_id][num_cached_blocks_before:num_cached_blocks_after]:
                if block.is_null:
                    continue
                assert block.block_hash is not None
                self.cached_blocks_this_step.add(block.block_hash)

    def new_step_starts(self) -> None:
        """Forget the hashes cached during the previous step.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.new_step_starts
        """
        self.cached_blocks_this_step.clear()


class CrossAttentionManager(SingleTypeKVCacheManager):
    """Cross attention (encoder-decoder): encoder states, allocated once, never shared.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::CrossAttentionManager
    """

    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[KVCacheBlock],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
    ) -> None:
        """Nothing to attach: cross-attention blocks are never cached, so there are no hits.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::CrossAttentionManager.allocate_new_computed_blocks
        """
        assert len(new_computed_blocks) == 0

    def cache_blocks(self, request: Request, num_tokens: int, alignment_tokens: int | None = None) -> None:
        """Never called: prefix caching is off with cross attention.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::CrossAttentionManager.cache_blocks

        Raises:
            ValueError: Always.
        """
        raise ValueError("Should not be called as prefix caching is disabled.")

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: encoder states belong to one request.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::CrossAttentionManager.get_num_common_prefix_blocks
        """
        return 0

    @classmethod
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
        """Not supported: encoder states are per request, computed once, never a shared prefix.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::CrossAttentionManager.find_longest_cache_hit

        Raises:
            NotImplementedError: Always.
        """
        assert isinstance(kv_cache_spec, CrossAttentionSpec), (
            "CrossAttentionManager can only be used for cross-attention groups"
        )
        raise NotImplementedError("CrossAttentionManager does not support caching")


class SinkFullAttentionManager(FullAttentionManager):
    """Full attention with ``sink_len`` tokens of sink blocks, taken from the pool at start.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SinkFullAttentionManager
    """

    def __init__(
        self,
        kv_cache_spec: SinkFullAttentionSpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> None:
        super().__init__(
            kv_cache_spec,
            block_pool,
            enable_caching,
            kv_cache_group_id,
            dcp_world_size,
            pcp_world_size,
        )
        sink_len = kv_cache_spec.sink_len
        assert sink_len is not None and sink_len > 0 and sink_len % self.block_size == 0
        num_sink_block = sink_len // self.block_size
        self.sink_blocks = self.block_pool.free_block_queue.popleft_n(num_sink_block)


# NOTE: looked up by exact type(spec), as in vLLM: a spec subclass missing here is rejected.
spec_manager_map: dict[type[KVCacheSpec], type[SingleTypeKVCacheManager]] = {
    FullAttentionSpec: FullAttentionManager,
    TQFullAttentionSpec: FullAttentionManager,
    MLAAttentionSpec: FullAttentionManager,
    HiddenStateCacheSpec: FullAttentionManager,
    SlidingWindowSpec: SlidingWindowManager,
    SlidingWindowMLASpec: SlidingWindowManager,
    ChunkedLocalAttentionSpec: ChunkedLocalAttentionManager,
    MambaSpec: MambaManager,
    CrossAttentionSpec: CrossAttentionManager,
    SinkFullAttentionSpec: SinkFullAttentionManager,
}


def get_manager_for_kv_cache_spec(
    kv_cache_spec: KVCacheSpec,
    max_num_batched_tokens: int,
    max_model_len: int,
    **kwargs: Any,
) -> SingleTypeKVCacheManager:
    """Build the manager for one KV cache group.

    Sliding-window and chunked-local managers get ``max_admission_blocks_per_request`` from
    their spec (the same bound the start-up pool sizer uses).

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::get_manager_for_kv_cache_spec

    Args:
        kv_cache_spec: The group's spec.
        max_num_batched_tokens: Scheduler token budget per step (tokens).
        max_model_len: Longest sequence (tokens).
        **kwargs: The manager's constructor arguments (block_pool, enable_caching,
            kv_cache_group_id, dcp_world_size, pcp_world_size).

    Returns:
        The manager.

    Raises:
        TypeError: ``type(kv_cache_spec)`` is not a key of ``spec_manager_map``.
    """
    guard_spec_type(kv_cache_spec)
    manager_class = spec_manager_map[type(kv_cache_spec)]
    # Managers that recycle blocks across chunks cap admission as the start-up sizer does.
    if isinstance(kv_cache_spec, (SlidingWindowSpec, ChunkedLocalAttentionSpec)):
        kwargs["max_admission_blocks_per_request"] = kv_cache_spec.max_admission_blocks_per_request(
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
        )
    manager = manager_class(kv_cache_spec, **kwargs)
    return manager


def guard_spec_type(kv_cache_spec: Any) -> None:
    """get_manager_for_kv_cache_spec: the spec's exact type must have a manager."""
    if type(kv_cache_spec) in spec_manager_map:
        return
    allowed = ", ".join(sorted(t.__name__ for t in spec_manager_map))
    raise TypeError(f"no KV cache manager for spec type {type(kv_cache_spec).__name__}; known: {allowed}")
