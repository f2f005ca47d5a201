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

Mirrors: vllm/v1/core/kv_cache_manager.py (KVCacheBlocks, KVCacheManager), statement for
statement. kvlab adds a recorder (``set_recorder``; a call bracket around each public method is
installed while one is set, so nothing is paid without it) and one guard call at the top of each
public method (bad caller input raises before anything changes, where vLLM asserts or fails
half-way through an allocation).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, overload

from kvlab.core.logger import init_logger
from kvlab.core.guards import (
    guard_allocate_slots,
    guard_cache_blocks,
    guard_count,
    guard_block_ids,
    guard_get_computed_blocks,
    guard_kv_cache_manager,
    guard_request,
    guard_running_request_id,
)
from kvlab.core.kv_cache_coordinator import get_kv_cache_coordinator
from kvlab.core.kv_cache_interface import (
    KVCacheConfig,
    get_kv_cache_spec_kind,
    get_kv_cache_spec_sliding_window,
)
from kvlab.core.kv_cache_utils import KVCacheBlock
from kvlab.core.kv_events import BlockStored, KVCacheEvent
from kvlab.core.metrics import PrefixCacheStats
from kvlab.core.recorder import install_call_brackets, remove_call_brackets
from kvlab.core.request import Request

if TYPE_CHECKING:
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector
    from kvlab.core.recorder import KVRecorder

logger = init_logger(__name__)

__all__ = ["KVCacheBlocks", "KVCacheManager"]


@dataclass
class KVCacheBlocks:
    """What KVCacheManager hands the scheduler: the blocks of one request, per KV cache group.

    ``blocks[i][j]`` is group ``i``'s ``j``-th block (groups outermost: groups may have
    different numbers of blocks). An empty group is ``()``; the manager shares one empty
    instance (``KVCacheManager.empty_kv_cache_blocks``) to avoid garbage.

    Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheBlocks

    Examples:
        >>> a, b, c = KVCacheBlock(1), KVCacheBlock(2), KVCacheBlock(3)
        >>> blocks = KVCacheBlocks(([a], [b])) + KVCacheBlocks(([c], []))
        >>> blocks.get_block_ids()
        ([1, 3], [2])
    """

    blocks: tuple[Sequence[KVCacheBlock], ...]

    def __add__(self, other: KVCacheBlocks) -> KVCacheBlocks:
        """Concatenate two instances group by group."""
        return KVCacheBlocks(
            tuple(list(itertools.chain(blk1, blk2)) for blk1, blk2 in zip(self.blocks, other.blocks))
        )

    @overload
    def get_block_ids(self, allow_none: Literal[False] = False) -> tuple[list[int], ...]: ...

    @overload
    def get_block_ids(self, allow_none: Literal[True] = True) -> tuple[list[int], ...] | None: ...

    def get_block_ids(self, allow_none: bool = False) -> tuple[list[int], ...] | None:
        """The block ids per group (None with ``allow_none`` when every group is empty).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheBlocks.get_block_ids
        """
        if allow_none and all(len(group) == 0 for group in self.blocks):
            return None
        return tuple([blk.block_id for blk in group] for group in self.blocks)

    def get_unhashed_block_ids(self) -> list[int]:
        """Ids of the blocks without a block_hash (one group only).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheBlocks.get_unhashed_block_ids

        Raises:
            AssertionError: With more than one group (as vLLM).
        """
        assert len(self.blocks) == 1, "Only one group is supported"
        return [block.block_id for block in self.blocks[0] if block.block_hash is None]

    def get_unhashed_block_ids_all_groups(self) -> list[list[int]]:
        """Per group, ids of the blocks without a block_hash (null padding skipped).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheBlocks.get_unhashed_block_ids_all_groups
        """
        return [
            [block.block_id for block in group if block.block_hash is None and not block.is_null]
            for group in self.blocks
        ]

    def new_empty(self) -> KVCacheBlocks:
        """An instance with the same number of groups and no blocks.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheBlocks.new_empty
        """
        return KVCacheBlocks(tuple(() for _ in range(len(self.blocks))))


class KVCacheManager:
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
        guard_kv_cache_manager(kv_cache_config, max_model_len, hash_block_size, max_num_batched_tokens, enable_caching)
        self.max_model_len = max_model_len
        # None: the sliding-window admission cap collapses to "no cap".
        if max_num_batched_tokens is None:
            max_num_batched_tokens = max_model_len

        self.enable_caching = enable_caching
        self.use_eagle = use_eagle
        self.log_stats = log_stats
        self.metrics_collector = metrics_collector
        self.prefix_cache_stats = PrefixCacheStats() if log_stats else None

        self.coordinator = get_kv_cache_coordinator(
            kv_cache_config=kv_cache_config,
            max_model_len=self.max_model_len,
            max_num_batched_tokens=max_num_batched_tokens,
            use_eagle=self.use_eagle,
            enable_caching=self.enable_caching,
            enable_kv_cache_events=enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=self.metrics_collector,
        )
        self.num_kv_cache_groups = len(kv_cache_config.kv_cache_groups)
        self.block_pool = self.coordinator.block_pool
        self.kv_cache_config = kv_cache_config
        # (kind, sliding window) per group, stamped on BlockStored events by take_events().
        self.kv_cache_event_metadata = tuple(
            (
                get_kv_cache_spec_kind(group.kv_cache_spec).value,
                get_kv_cache_spec_sliding_window(group.kv_cache_spec),
            )
            for group in kv_cache_config.kv_cache_groups
        )

        # NOTE: shared and immutable (tuples): returned whenever there is nothing to return.
        self.empty_kv_cache_blocks = KVCacheBlocks(tuple(() for _ in range(self.num_kv_cache_groups)))
        self.recorder: KVRecorder | None = None
        if recorder is not None:
            self.set_recorder(recorder)

    def set_recorder(self, recorder: KVRecorder | None) -> None:
        """Attach (or with None detach) a recorder to this manager and everything below it.

        Sets it on the coordinator, every single-type manager and the block pool (which sets it
        on its free queue), and installs the call brackets (``begin_call`` / ``end_call``
        around each public method) while one is set. kvlab only.
        """
        self.recorder = recorder
        self.coordinator.recorder = recorder
        for manager in self.coordinator.single_type_managers:
            manager.recorder = recorder
        self.block_pool.set_recorder(recorder)
        if recorder is None:
            remove_call_brackets(self)
        else:
            install_call_brackets(self, recorder)

    @property
    def usage(self) -> float:
        """Fraction of usable blocks (the null block excluded) not in the free queue, 0.0-1.0.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.usage
        """
        return self.block_pool.get_usage()

    def make_prefix_cache_stats(self) -> PrefixCacheStats | None:
        """Return the stats gathered since the last call and start new ones (None if off).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.make_prefix_cache_stats
        """
        if not self.log_stats:
            return None
        stats = self.prefix_cache_stats
        self.prefix_cache_stats = PrefixCacheStats()
        return stats

    def get_computed_blocks(self, request: Request) -> tuple[KVCacheBlocks, int]:
        """The request's prefix-cache hit: blocks per group and the hit length (tokens).

        The hit is capped at ``request.num_tokens - 1`` tokens: the last token is always
        recomputed to get its logits (and since allocate_slots needs block-aligned hits, a
        fully cached prompt recomputes its whole last block).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_computed_blocks

        Returns:
            ``(blocks, num_new_computed_tokens)``; ``(empty, 0)`` when caching is off or the
            request skips reading the prefix cache (prompt logprobs, pooling).

        Raises:
            TypeError: ``request`` is not a Request (None, a str, ...).
            ValueError: The request has no tokens (and a lookup would run).
        """
        guard_get_computed_blocks(self, request)
        if not self.enable_caching or request.skip_reading_prefix_cache:
            return self.empty_kv_cache_blocks, 0

        max_cache_hit_length = request.num_tokens - 1
        computed_blocks, num_new_computed_tokens = self.coordinator.find_longest_cache_hit(
            request.block_hashes, max_cache_hit_length
        )

        if self.log_stats:
            assert self.prefix_cache_stats is not None
            self.prefix_cache_stats.record(
                num_tokens=request.num_tokens,
                num_hits=num_new_computed_tokens,
                preempted=request.num_preemptions > 0,
            )

        return self.create_kv_cache_blocks(computed_blocks), num_new_computed_tokens

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
        outside the window (kept even if the call then fails: fewer cached blocks get evicted);
        (2) refuse (None, nothing else changed) unless the free blocks cover the new blocks plus
        the evictable hits; (3) touch the hits, pad skipped positions with the null block,
        allocate blocks for ``ext_comp``; (4) allocate up to ``new + lookahead``; (5) cache the
        full blocks (unless caching is off or ``delay_cache_blocks``), only up to
        ``request.num_tokens``: drafts beyond it may be rejected.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots

        Args:
            request: The request.
            num_new_tokens: Tokens to compute this step, drafts included (tokens).
            num_new_computed_tokens: Local prefix-cache hit tokens (tokens).
            new_computed_blocks: The hit blocks from ``get_computed_blocks``.
            num_lookahead_tokens: Extra slots for speculative tokens (tokens).
            num_external_computed_tokens: Tokens whose KV a connector provides (tokens).
            delay_cache_blocks: Skip caching (P/D: the KV arrives later, by a transfer).
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
        guard_allocate_slots(
            self, request, num_new_tokens, num_new_computed_tokens, new_computed_blocks,
            num_lookahead_tokens, num_external_computed_tokens, delay_cache_blocks,
            num_encoder_tokens,
        )  # fmt: skip
        # With an asynchronous KV load there may be nothing to compute, only external tokens.
        if num_new_tokens == 0 and num_external_computed_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0 when there are no external computed tokens")

        if new_computed_blocks is not None:
            new_computed_block_list = new_computed_blocks.blocks
        else:
            new_computed_block_list = self.empty_kv_cache_blocks.blocks

        num_local_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        total_computed_tokens = min(
            num_local_computed_tokens + num_external_computed_tokens,
            self.max_model_len,
        )

        if full_sequence_must_fit:
            # Refuse now if the whole request cannot fit (chunked prefill would otherwise
            # admit it on its first chunk alone).
            full_num_tokens = min(request.num_tokens, self.max_model_len)

            num_blocks_to_allocate = self.coordinator.get_num_blocks_to_allocate(
                request_id=request.request_id,
                num_tokens=full_num_tokens,
                new_computed_blocks=new_computed_block_list,
                num_encoder_tokens=num_encoder_tokens,
                total_computed_tokens=total_computed_tokens,
                num_tokens_main_model=full_num_tokens,
                apply_admission_cap=True,
            )
            if self.recorder is not None:
                self.recorder.num_blocks_to_allocate(num_blocks_to_allocate)
            if num_blocks_to_allocate > self.block_pool.get_num_free_blocks():
                return None

        num_tokens_main_model = total_computed_tokens + num_new_tokens
        num_tokens_need_slot = min(num_tokens_main_model + num_lookahead_tokens, self.max_model_len)

        # Free out-of-window blocks first (even if the call then fails): fewer cached blocks
        # get evicted by the allocation below.
        self.coordinator.remove_skipped_blocks(request.request_id, total_computed_tokens)

        num_blocks_to_allocate = self.coordinator.get_num_blocks_to_allocate(
            request_id=request.request_id,
            num_tokens=num_tokens_need_slot,
            new_computed_blocks=new_computed_block_list,
            num_encoder_tokens=num_encoder_tokens,
            total_computed_tokens=num_local_computed_tokens + num_external_computed_tokens,
            num_tokens_main_model=num_tokens_main_model,
        )
        if self.recorder is not None:
            self.recorder.num_blocks_to_allocate(num_blocks_to_allocate)

        if num_blocks_to_allocate > self.block_pool.get_num_free_blocks():
            return None

        if new_computed_block_list is not self.empty_kv_cache_blocks.blocks or num_external_computed_tokens > 0:
            # Hits are attached before the new blocks, so a later failure cannot lose them.
            self.coordinator.allocate_new_computed_blocks(
                request_id=request.request_id,
                new_computed_blocks=new_computed_block_list,
                num_local_computed_tokens=num_local_computed_tokens,
                num_external_computed_tokens=num_external_computed_tokens,
            )

        new_blocks = self.coordinator.allocate_new_blocks(
            request.request_id,
            num_tokens_need_slot,
            num_tokens_main_model,
            num_encoder_tokens,
        )

        # P/D: the KV arrives later; cache when it has (after the transfer).
        if not self.enable_caching or delay_cache_blocks:
            return self.create_kv_cache_blocks(new_blocks)

        # Only finalized tokens are cached: drafts beyond request.num_tokens may be rejected.
        num_tokens_to_cache = min(total_computed_tokens + num_new_tokens, request.num_tokens)
        self.coordinator.cache_blocks(request, num_tokens_to_cache)

        return self.create_kv_cache_blocks(new_blocks)

    def free(self, request: Request) -> None:
        """Free the request's blocks in every group, tail first (the tail is evicted first).

        An unknown request is a no-op (aborted before allocation), as in vLLM.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.free

        Raises:
            TypeError: ``request`` is not a Request (None, a str, ...); nothing changed.
        """
        guard_request(request, "free")
        self.coordinator.free(request.request_id)

    def remove_skipped_blocks(self, request_id: str, total_computed_tokens: int) -> None:
        """Null out and free the blocks outside every group's attention window.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.remove_skipped_blocks

        Args:
            request_id: The request (unknown ids are a no-op, as in vLLM).
            total_computed_tokens: Local plus external computed tokens (tokens).

        Raises:
            ValueError / TypeError: ``total_computed_tokens`` is not an int >= 0.
        """
        guard_count("total_computed_tokens", total_computed_tokens)
        self.coordinator.remove_skipped_blocks(request_id, total_computed_tokens)

    def evict_blocks(self, block_ids: set[int]) -> None:
        """Drop the given blocks from the prefix cache (ref counts and free queue unchanged).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.evict_blocks

        Args:
            block_ids: Block ids; iterated in the given (set) order, as in vLLM.

        Raises:
            ValueError / TypeError: An id is not an int in ``[0, num_gpu_blocks)``.
        """
        block_ids = guard_block_ids(self.block_pool, block_ids)
        self.block_pool.evict_blocks(block_ids)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash (e.g. after new weights); refused while blocks are in use.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.reset_prefix_cache

        Returns:
            True if reset, False if some request still holds blocks.
        """
        if not self.block_pool.reset_prefix_cache():
            return False
        if self.log_stats:
            assert self.prefix_cache_stats is not None
            self.prefix_cache_stats.reset = True
        return True

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        """Per group, the leading blocks every request holding blocks shares (cascade attention).

        Requests holding blocks but not scheduled this step count too (the answer may be 0).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_num_common_prefix_blocks

        Raises:
            KeyError: ``running_request_id`` holds no blocks entry in any group.
        """
        guard_running_request_id(self, running_request_id)
        return self.coordinator.get_num_common_prefix_blocks(running_request_id)

    def take_events(self) -> list[KVCacheEvent]:
        """Drain the queued KV events; BlockStored events get their group's spec kind/window.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.take_events
        """
        events = self.block_pool.take_events()
        for event in events:
            if not isinstance(event, BlockStored):
                continue
            if event.group_idx is None:
                continue
            if event.group_idx < 0 or event.group_idx >= len(self.kv_cache_event_metadata):
                logger.warning("Group index `%s` not in KV cache metadata", event.group_idx)
                continue
            # The pool emits structural events; the spec's kind and window are added here.
            kind, sliding_window = self.kv_cache_event_metadata[event.group_idx]
            event.kv_cache_spec_kind = kind
            event.kv_cache_spec_sliding_window = sliding_window
        return events

    def get_blocks(self, request_id: str) -> KVCacheBlocks:
        """The request's blocks per group (empty for an unknown request).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_blocks
        """
        return self.create_kv_cache_blocks(self.coordinator.get_blocks(request_id))

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        """The request's block ids per group (empty lists for an unknown request).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_block_ids
        """
        return self.get_blocks(request_id).get_block_ids()

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Cache the request's full blocks up to ``num_computed_tokens`` (no-op if caching off).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.cache_blocks

        Raises:
            ValueError: Negative count, or it covers blocks the request lacks (or their hashes).
            TypeError: ``request`` is not a Request, or the count is not an int.
        """
        guard_cache_blocks(self, request, num_computed_tokens)
        if self.enable_caching:
            self.coordinator.cache_blocks(request, num_computed_tokens)

    def create_kv_cache_blocks(self, blocks: tuple[list[KVCacheBlock], ...]) -> KVCacheBlocks:
        """Wrap ``blocks``; the shared empty instance when every group is empty.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.create_kv_cache_blocks
        """
        return KVCacheBlocks(blocks) if any(blocks) else self.empty_kv_cache_blocks

    def take_new_block_ids(self) -> list[int]:
        """Ids of full-attention blocks allocated since the last call (for zeroing), drained.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.take_new_block_ids
        """
        ids: list[int] = []
        for mgr in self.coordinator.single_type_managers:
            ids.extend(mgr.take_new_block_ids())
        return ids

    def new_step_starts(self) -> None:
        """Tell the managers a scheduler step begins (Mamba forgets this step's cached hashes).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.new_step_starts
        """
        self.coordinator.new_step_starts()
