"""KVCacheManager: the scheduler's single door to the KV cache.

The scheduler asks it for prefix-cache hits (``get_computed_blocks``), for slots
(``allocate_slots``) and to give blocks back (``free``); everything below (coordinator,
per-type managers, BlockPool) stays hidden behind KVCacheBlocks.

What ``allocate_slots`` sees of a request, token positions left to right (tokens)::

    |<- comp ->|<- new_comp ->|<- ext_comp ->|<--- new --->|<- lookahead ->|
    |  held    | prefix-cache | KV from a    | computed in | draft slots   |
    |  blocks  | hits (maybe  | connector    | this step   |               |
    |          | still free)  |              |             |               |
    |<------- total_computed_tokens -------->|
    |<---- nulled if outside the window ---->|
               |<---------- this call may take blocks for these ---------->|
               |<--- cached, up to request.num_tokens ---->|

    comp      = request.num_computed_tokens
    new_comp  = num_new_computed_tokens  (= len(hit blocks) * block_size)
    ext_comp  = num_external_computed_tokens
    new       = num_new_tokens (drafts included)
    lookahead = num_lookahead_tokens (never cached: drafts may be rejected)

Mirrors: vllm/v1/core/kv_cache_manager.py. kvlab adds a recorder (``set_recorder``) and checks
caller input before changing anything (vLLM asserts or fails half-way).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kvlab.core import kv_cache_manager_checks as checks
from kvlab.core.kv_cache_blocks import KVCacheBlocks
from kvlab.core.kv_cache_coordinator import get_kv_cache_coordinator
from kvlab.core.kv_cache_interface import get_kv_cache_spec_kind, get_kv_cache_spec_sliding_window
from kvlab.core.kv_cache_manager_alloc import allocate_slots_general, fast_path_layout
from kvlab.core.kv_cache_manager_queries import KVCacheManagerQueries
from kvlab.core.metrics import PrefixCacheStats
from kvlab.core.request import Request

if TYPE_CHECKING:
    from kvlab.core.kv_cache_interface import KVCacheConfig
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector
    from kvlab.core.kv_cache_utils import KVCacheBlock
    from kvlab.core.recorder import KVRecorder

# The logger vLLM's tests patch (kv_cache_manager.logger); the same one the queries use.
logger = logging.getLogger(__name__)

__all__ = ["KVCacheBlocks", "KVCacheManager"]

# allocate_slots' fast path tests its zero defaults by identity (CPython shares small ints).
_ZERO = 0


class KVCacheManager(KVCacheManagerQueries):
    """Prefix-cache lookups, slot allocation and release for every KV cache group.

    Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager. Differs: ``recorder`` /
    ``set_recorder``; bad input raises before any change; ``get_num_common_prefix_blocks``
    rejects an unknown request (vLLM would silently add an empty entry that zeroes every later
    answer); a CrossAttentionSpec group with ``enable_caching=True`` is rejected at
    construction (vLLM fails at the first lookup or allocation).

    Args:
        kv_cache_config: Groups and number of blocks.
        max_model_len: Longest sequence (tokens).
        hash_block_size: Block size the requests' block hashes use (tokens).
        max_num_batched_tokens: Token budget per step (tokens); None -> ``max_model_len``
            (the sliding-window admission cap then never binds).
        enable_caching: Prefix caching on.
        use_eagle: EAGLE drafting (the last hit block is recomputed).
        log_stats: Keep PrefixCacheStats.
        enable_kv_cache_events: Queue KV events for ``take_events``.
        dcp_world_size: Decode context-parallel world size.
        pcp_world_size: Prefill context-parallel world size.
        metrics_collector: Optional block-residency metrics.
        recorder: None (off) or a ``kvlab.core.recorder.KVRecorder``; see ``set_recorder``.

    Raises:
        ValueError: A size is not a positive int, or the coordinator rejects the groups.
    """

    def __init__(
        self,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        hash_block_size: int,
        max_num_batched_tokens: int | None = None,
        enable_caching: bool = True,
        use_eagle: bool = False,
        log_stats: bool = False,
        enable_kv_cache_events: bool = False,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
        metrics_collector: KVCacheMetricsCollector | None = None,
        recorder: KVRecorder | None = None,
    ) -> None:
        checks.check_manager_config(
            kv_cache_config, max_model_len, hash_block_size, max_num_batched_tokens, enable_caching
        )
        groups = kv_cache_config.kv_cache_groups
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.use_eagle = use_eagle
        self.log_stats = log_stats
        self.metrics_collector = metrics_collector
        self.prefix_cache_stats = PrefixCacheStats() if log_stats else None
        self.coordinator = get_kv_cache_coordinator(
            kv_cache_config=kv_cache_config,
            max_model_len=self.max_model_len,
            # None: the sliding-window admission cap collapses to "no cap".
            max_num_batched_tokens=max_num_batched_tokens or max_model_len,
            use_eagle=self.use_eagle,
            enable_caching=self.enable_caching,
            enable_kv_cache_events=enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=self.metrics_collector,
        )
        self.num_kv_cache_groups = len(groups)
        self.block_pool = self.coordinator.block_pool
        self.kv_cache_config = kv_cache_config
        self.hash_block_size = hash_block_size
        # (kind, sliding window) per group, stamped on BlockStored events by take_events().
        self.kv_cache_event_metadata = tuple(
            (get_kv_cache_spec_kind(spec).value, get_kv_cache_spec_sliding_window(spec))
            for spec in (g.kv_cache_spec for g in groups)
        )
        # NOTE: shared and immutable (tuples): returned whenever there is nothing to return.
        self.empty_kv_cache_blocks = KVCacheBlocks(
            tuple(() for _ in range(self.num_kv_cache_groups))
        )
        self._fast_groups, self._windowed_managers, self._cache_alignment = fast_path_layout(
            self.coordinator
        )
        self.recorder: KVRecorder | None = None
        self.set_recorder(recorder)

    def set_recorder(self, recorder: KVRecorder | None) -> None:
        """Attach (or with None detach) a recorder to this manager and everything below it.

        Sets it on the coordinator, every single-type manager and the block pool (which sets
        it on its free queue).
        """
        self.recorder = recorder
        self.coordinator.recorder = recorder
        for manager in self.coordinator.single_type_managers:
            manager.recorder = recorder
        self.block_pool.set_recorder(recorder)

    @property
    def usage(self) -> float:
        """Fraction of usable blocks (the null block excluded) not in the free queue, 0.0-1.0."""
        return self.block_pool.get_usage()

    def make_prefix_cache_stats(self) -> PrefixCacheStats | None:
        """Return the stats gathered since the last call and start new ones (None if off)."""
        if not self.log_stats:
            return None
        stats = self.prefix_cache_stats
        self.prefix_cache_stats = PrefixCacheStats()
        return stats

    # ------------------------------------------------------------------ lookup
    def get_computed_blocks(self, request: Request) -> tuple[KVCacheBlocks, int]:
        """The request's prefix-cache hit: blocks per group and the hit length (tokens).

        The hit is capped at ``request.num_tokens - 1`` tokens: the last token is always
        recomputed to get logits (so a fully cached prompt recomputes its last block).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_computed_blocks

        Returns:
            ``(blocks, num_new_computed_tokens)``; ``(empty, 0)`` when caching is off or the
            request skips reading the prefix cache.

        Raises:
            TypeError: ``request`` is not a Request (None, a str, ...).
            ValueError: The request has no tokens (and a lookup would run).
        """
        if type(request) is not Request:
            checks.check_request(request, "get_computed_blocks")
        skip = not self.enable_caching or request.skip_reading_prefix_cache
        if not skip and request.num_tokens < 1:
            raise ValueError(
                f"request {request.request_id!r} has no tokens; get_computed_blocks needs >= 1"
            )
        rec = self.recorder
        if rec is not None:
            args = (request.num_tokens, len(request.block_hashes))
            rec.begin_call("get_computed_blocks", request.request_id, args)
        if skip:
            if rec is not None:
                rec.end_call("get_computed_blocks", (0,))
            return self.empty_kv_cache_blocks, 0
        computed_blocks, num_new_computed_tokens = self.coordinator.find_longest_cache_hit(
            request.block_hashes, request.num_tokens - 1
        )
        if self.log_stats:
            assert self.prefix_cache_stats is not None
            self.prefix_cache_stats.record(
                num_tokens=request.num_tokens,
                num_hits=num_new_computed_tokens,
                preempted=request.num_preemptions > 0,
            )
        if rec is not None:
            rec.end_call("get_computed_blocks", (num_new_computed_tokens,))
        return self.create_kv_cache_blocks(computed_blocks), num_new_computed_tokens

    # ------------------------------------------------------------------ allocation
    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: KVCacheBlocks | None = None,
        num_lookahead_tokens: int = 0,
        num_external_computed_tokens: int = 0,
        delay_cache_blocks: bool = False,
        num_encoder_tokens: int = 0,
        full_sequence_must_fit: bool = False,
    ) -> KVCacheBlocks | None:
        """Make room for the request's next tokens; None if the pool cannot.

        See the module docstring for the token layout. Stages: (0) with
        ``full_sequence_must_fit``, refuse unless the whole request fits; (1) null out blocks
        outside the window (kept even if the call then fails); (2) refuse (None, nothing else
        changed) unless the free blocks cover new blocks plus evictable hits; (3) touch the
        hits, pad skipped positions with the null block, allocate blocks for ``ext_comp``;
        (4) allocate up to ``new + lookahead``; (5) cache the full blocks (unless caching is
        off or ``delay_cache_blocks``).

        Speed: a call with no hits, no external or encoder tokens and default flags (a running
        request's next chunk or decode step) takes a fast path: one exact-type test per
        argument, and only the group calls that can change something.
        Every other call is validated in full (``kvlab.core.kv_cache_manager_alloc``).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots

        Args:
            request: The request.
            num_new_tokens: Tokens to compute this step, drafts included (tokens).
            num_new_computed_tokens: Local prefix-cache hit tokens (tokens).
            new_computed_blocks: The hit blocks from ``get_computed_blocks``.
            num_lookahead_tokens: Extra slots for speculative tokens (tokens).
            num_external_computed_tokens: Tokens whose KV a connector provides (tokens).
            delay_cache_blocks: Skip caching (the KV arrives later, P/D transfer).
            num_encoder_tokens: Encoder tokens for cross attention (tokens); 0 otherwise.
            full_sequence_must_fit: Admission gate: refuse unless the whole request fits
                (sliding window / chunked local counted at their per-request cap).

        Returns:
            The newly allocated blocks per group, or None when out of blocks.

        Raises:
            ValueError: Negative count, nothing to allocate, hit blocks that do not fit the
                groups / ``num_new_computed_tokens`` / the request's state, or missing hashes.
            TypeError: ``request`` is not a Request, or a count is not an int (bool too).
        """
        fast = self._fast_groups
        if (
            # The common case (a request asking for its next tokens: no hits, no external or
            # encoder tokens, default flags) goes straight through; everything else takes the
            # general path (kv_cache_manager_alloc), which validates every argument in full.
            fast is None
            or type(request) is not Request
            or type(num_new_tokens) is not int
            or type(num_lookahead_tokens) is not int
            or num_new_tokens <= 0
            or num_lookahead_tokens < 0
            # `is` against the shared small int: numpy zeros etc. take the general path.
            or num_new_computed_tokens is not _ZERO
            or num_external_computed_tokens is not _ZERO
            or num_encoder_tokens is not _ZERO
            or delay_cache_blocks is not False
            or full_sequence_must_fit is not False
            or (new_computed_blocks is not None
                and new_computed_blocks is not self.empty_kv_cache_blocks)
        ):  # fmt: skip
            return allocate_slots_general(
                self, request, num_new_tokens, num_new_computed_tokens, new_computed_blocks,
                num_lookahead_tokens, num_external_computed_tokens, delay_cache_blocks,
                num_encoder_tokens, full_sequence_must_fit,
            )  # fmt: skip
        # NOTE: the fast path makes exactly the general path's calls minus those that cannot
        # change anything (nor emit a recorder event): remove_skipped_blocks only for windowed
        # groups, allocate_new_blocks only when a group grows (or has no entry yet),
        # cache_blocks only when a group has a newly full block. The differential oracle
        # checks it against vLLM, tests/core/test_kv_cache_manager_fast_path.py against the
        # general path.
        request_id = request.request_id
        num_computed_tokens = request.num_computed_tokens
        max_model_len = self.max_model_len
        total_computed_tokens = min(num_computed_tokens, max_model_len)
        num_tokens_main_model = total_computed_tokens + num_new_tokens
        num_tokens_need_slot = min(num_tokens_main_model + num_lookahead_tokens, max_model_len)
        enable_caching = self.enable_caching
        if enable_caching:
            num_tokens_to_cache = min(num_tokens_main_model, request.num_tokens)
            if num_tokens_to_cache // self.hash_block_size > len(request.block_hashes):
                checks.check_hashes_cover(self, request, num_tokens_to_cache)
        rec = self.recorder
        if rec is not None:
            rec.begin_call("allocate_slots", request_id,
                           (int(num_computed_tokens), 0, 0, num_new_tokens, num_lookahead_tokens,
                            0, 0, 0))  # fmt: skip
        for manager in self._windowed_managers:
            manager.remove_skipped_blocks(request_id, total_computed_tokens)
        num_blocks_to_allocate = 0
        grows = False
        for manager, block_size in fast:
            held = manager.req_to_blocks.get(request_id)
            if held is not None and request_id in manager.num_cached_block:
                num_new = -(-num_tokens_need_slot // block_size) - len(held)
                if num_new > 0:
                    num_blocks_to_allocate += num_new
                    grows = True
            else:
                num_blocks_to_allocate += manager.get_num_blocks_to_allocate(
                    request_id, num_tokens_need_slot, (), num_computed_tokens,
                    num_tokens_main_model,
                )  # fmt: skip
                grows = True
        if not grows:
            new_blocks = self.empty_kv_cache_blocks
        elif num_blocks_to_allocate > self.block_pool.get_num_free_blocks():
            if rec is not None:
                rec.end_call("allocate_slots", (0, num_blocks_to_allocate))
            return None
        else:
            new_blocks = self.create_kv_cache_blocks(
                self.coordinator.allocate_new_blocks(
                    request_id, num_tokens_need_slot, num_tokens_main_model, 0
                )
            )
        if enable_caching:
            alignment = self._cache_alignment
            num_aligned = num_tokens_to_cache // alignment * alignment
            for manager, block_size in fast:
                if num_aligned // block_size > manager.num_cached_block.get(request_id, 0):
                    self.coordinator.cache_blocks(request, num_tokens_to_cache)
                    break
        if rec is not None:
            rec.end_call("allocate_slots", (1, num_blocks_to_allocate))
        return new_blocks

    # ------------------------------------------------------------------ release
    def free(self, request: Request) -> None:
        """Free the request's blocks in every group, tail first (the tail is evicted first).

        An unknown request is a no-op (aborted before allocation), as in vLLM.
        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.free

        Raises:
            TypeError: ``request`` is not a Request (None, a str, ...); nothing changed.
        """
        if type(request) is not Request:
            checks.check_request(request, "free")
        rec = self.recorder
        if rec is not None:
            rec.begin_call("free", request.request_id, ())
        self.coordinator.free(request.request_id)
        if rec is not None:
            rec.end_call("free", ())

    def remove_skipped_blocks(self, request_id: str, total_computed_tokens: int) -> None:
        """Null out and free the blocks outside every group's attention window.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.remove_skipped_blocks

        Args:
            request_id: The request (unknown ids are a no-op, as in vLLM).
            total_computed_tokens: Local plus external computed tokens (tokens).

        Raises:
            ValueError / TypeError: ``total_computed_tokens`` is not an int >= 0.
        """
        checks.check_count("total_computed_tokens", total_computed_tokens)
        rec = self.recorder
        if rec is not None:
            rec.begin_call("remove_skipped_blocks", request_id, (int(total_computed_tokens),))
        self.coordinator.remove_skipped_blocks(request_id, total_computed_tokens)
        if rec is not None:
            rec.end_call("remove_skipped_blocks", ())

    def evict_blocks(self, block_ids: set[int]) -> None:
        """Drop the given blocks from the prefix cache (ref counts and free queue unchanged).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.evict_blocks

        Args:
            block_ids: Block ids; iterated in the given (set) order, as in vLLM.

        Raises:
            ValueError / TypeError: An id is not an int in ``[0, num_gpu_blocks)``.
        """
        ids = checks.check_block_ids(block_ids, self.block_pool.num_gpu_blocks)
        rec = self.recorder
        if rec is not None:
            rec.begin_call("evict_blocks", None, tuple(sorted(int(i) for i in ids)))
        self.block_pool.evict_blocks(ids)
        if rec is not None:
            rec.end_call("evict_blocks", ())

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash (e.g. after new weights); refused while blocks are in use.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.reset_prefix_cache

        Returns:
            True if reset, False if some request still holds blocks.
        """
        rec = self.recorder
        if rec is not None:
            rec.begin_call("reset_prefix_cache", None, ())
        ok = bool(self.block_pool.reset_prefix_cache())
        if ok and self.log_stats:
            assert self.prefix_cache_stats is not None
            self.prefix_cache_stats.reset = True
        if rec is not None:
            rec.end_call("reset_prefix_cache", (1 if ok else 0,))
        return ok

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Cache the request's full blocks up to ``num_computed_tokens`` (no-op if caching off).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.cache_blocks

        Raises:
            ValueError: Negative count, or it covers blocks the request lacks (or their hashes).
            TypeError: ``request`` is not a Request, or the count is not an int.
        """
        if type(request) is not Request:
            checks.check_request(request, "cache_blocks")
        checks.check_count("num_computed_tokens", num_computed_tokens)
        if self.enable_caching:
            checks.check_cache_blocks(self, request, num_computed_tokens)
        rec = self.recorder
        if rec is not None:
            rec.begin_call("cache_blocks", request.request_id, (int(num_computed_tokens),))
        if self.enable_caching:
            self.coordinator.cache_blocks(request, num_computed_tokens)
        if rec is not None:
            rec.end_call("cache_blocks", ())

    def create_kv_cache_blocks(self, blocks: tuple[list[KVCacheBlock], ...]) -> KVCacheBlocks:
        """Wrap ``blocks``; the shared empty instance when every group is empty."""
        return KVCacheBlocks(blocks) if any(blocks) else self.empty_kv_cache_blocks

    def new_step_starts(self) -> None:
        """Tell the managers a scheduler step begins (Mamba forgets this step's cached hashes)."""
        rec = self.recorder
        if rec is None and self._fast_groups is not None:
            return  # full / sliding-window / chunked-local groups have nothing to do
        if rec is not None:
            rec.begin_call("new_step_starts", None, ())
        self.coordinator.new_step_starts()
        if rec is not None:
            rec.end_call("new_step_starts", ())
