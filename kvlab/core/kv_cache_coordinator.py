"""KV cache coordinators: one SingleTypeKVCacheManager per KV cache group, over one BlockPool.

=================================  =====================================================
KVCacheCoordinatorNoPrefixCache    prefix caching off (any number of groups, even 0)
UnitaryKVCacheCoordinator          one group (e.g. every layer full attention)
HybridKVCacheCoordinator           several attention types: the fixed-point hit search
=================================  =====================================================

The hybrid search, for full attention (F) + sliding window (S)::

    candidate = max_cache_hit_length
    repeat:
        for each attention type, full attention first:
            F: the longest hit <= candidate, left to right    (searched once, then cut)
            S: the longest hit <= candidate, right to left    (may shorten it)
            candidate = that hit's length
    until no type shortened the candidate

Every type either accepts the candidate or shortens it, so it converges; the hit length is
a multiple of the LCM of the groups' block sizes.

Mirrors: vllm/v1/core/kv_cache_coordinator.py, statement for statement. kvlab adds a
``recorder`` (the hybrid search reports each attention group's turn: ``fixed_point``) and one
guard call in the constructors.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import lcm
from typing import TYPE_CHECKING

from kvlab.core.block_pool import BlockPool
from kvlab.core.guards import guard_hybrid_coordinator, guard_unitary_coordinator
from kvlab.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheSpec
from kvlab.core.kv_cache_utils import BlockHash, BlockHashList, BlockHashListWithBlockSize, KVCacheBlock
from kvlab.core.single_type_kv_cache_manager import (
    CrossAttentionManager,
    SingleTypeKVCacheManager,
    get_manager_for_kv_cache_spec,
)

if TYPE_CHECKING:
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector
    from kvlab.core.recorder import KVRecorder
    from kvlab.core.request import Request

__all__ = [
    "HybridKVCacheCoordinator",
    "KVCacheCoordinator",
    "KVCacheCoordinatorNoPrefixCache",
    "UnitaryKVCacheCoordinator",
    "get_kv_cache_coordinator",
]


class KVCacheCoordinator:
    """Owns the BlockPool and one SingleTypeKVCacheManager per KV cache group.

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator. kvlab adds ``recorder``
    (None = off).

    NOTE: vLLM makes this class an ABC; kvlab's is a plain class (see SingleTypeKVCacheManager).

    Args:
        kv_cache_config: Groups and pool size.
        max_model_len: Longest sequence (tokens).
        max_num_batched_tokens: Scheduler token budget per step (tokens).
        use_eagle: EAGLE drafting on: the groups flagged ``is_eagle_group`` (all groups if
            none is flagged) drop their last hit block.
        enable_caching: Prefix caching on.
        enable_kv_cache_events: Queue BlockStored/BlockRemoved/AllBlocksCleared events.
        dcp_world_size: Decode context-parallel world size.
        pcp_world_size: Prefill context-parallel world size.
        hash_block_size: Block size the request's block hashes are computed at (tokens).
        metrics_collector: Optional block-residency metrics.
    """

    def __init__(
        self,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        max_num_batched_tokens: int,
        use_eagle: bool,
        enable_caching: bool,
        enable_kv_cache_events: bool,
        dcp_world_size: int,
        pcp_world_size: int,
        hash_block_size: int,
        metrics_collector: KVCacheMetricsCollector | None = None,
    ) -> None:
        self.kv_cache_config = kv_cache_config
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.recorder: KVRecorder | None = None

        self.block_pool = BlockPool(
            num_gpu_blocks=kv_cache_config.num_blocks,
            enable_caching=enable_caching,
            hash_block_size=hash_block_size,
            enable_kv_cache_events=enable_kv_cache_events,
            metrics_collector=metrics_collector,
        )

        # Groups that drop their last hit block under EAGLE; none flagged -> all of them.
        self.eagle_group_ids: set[int] = {
            i for i, g in enumerate(kv_cache_config.kv_cache_groups) if g.is_eagle_group
        }
        if use_eagle and not self.eagle_group_ids:
            self.eagle_group_ids = set(range(len(kv_cache_config.kv_cache_groups)))

        self.single_type_managers = tuple(
            get_manager_for_kv_cache_spec(
                kv_cache_spec=kv_cache_group.kv_cache_spec,
                max_num_batched_tokens=max_num_batched_tokens,
                max_model_len=max_model_len,
                block_pool=self.block_pool,
                enable_caching=enable_caching,
                kv_cache_group_id=i,
                dcp_world_size=dcp_world_size,
                pcp_world_size=pcp_world_size,
            )
            for i, kv_cache_group in enumerate(self.kv_cache_config.kv_cache_groups)
        )

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: tuple[Sequence[KVCacheBlock], ...],
        num_encoder_tokens: int,
        total_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
    ) -> int:
        """Blocks the request would take from the pool, summed over the groups.

        Cross-attention groups count one static allocation for the encoder tokens.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.get_num_blocks_to_allocate

        Args:
            request_id: The request.
            num_tokens: Tokens that need a slot, allocated ones included (tokens).
            new_computed_blocks: Per group, the prefix-cache hit blocks.
            num_encoder_tokens: Encoder tokens for cross attention (tokens).
            total_computed_tokens: Local plus external computed tokens (tokens).
            num_tokens_main_model: ``num_tokens`` without lookahead tokens (tokens).
            apply_admission_cap: Apply the sliding-window / chunked-local per-request cap (only
                the full-sequence admission gate sets it).

        Returns:
            The number of blocks (blocks).
        """
        num_blocks_to_allocate = 0
        for i, manager in enumerate(self.single_type_managers):
            if isinstance(manager, CrossAttentionManager):
                # One static allocation for the encoder tokens.
                num_blocks_to_allocate += manager.get_num_blocks_to_allocate(
                    request_id,
                    num_encoder_tokens,
                    [],
                    0,
                    num_encoder_tokens,
                    apply_admission_cap=apply_admission_cap,
                )
            else:
                num_blocks_to_allocate += manager.get_num_blocks_to_allocate(
                    request_id,
                    num_tokens,
                    new_computed_blocks[i],
                    total_computed_tokens,
                    num_tokens_main_model,
                    apply_admission_cap=apply_admission_cap,
                )
        return num_blocks_to_allocate

    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: tuple[Sequence[KVCacheBlock], ...],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
    ) -> None:
        """Give the request its hits (and blocks for connector-computed tokens), per group.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.allocate_new_computed_blocks
        """
        for i, manager in enumerate(self.single_type_managers):
            manager.allocate_new_computed_blocks(
                request_id,
                new_computed_blocks[i],
                num_local_computed_tokens,
                num_external_computed_tokens,
            )

    def allocate_new_blocks(
        self,
        request_id: str,
        num_tokens: int,
        num_tokens_main_model: int,
        num_encoder_tokens: int = 0,
    ) -> tuple[list[KVCacheBlock], ...]:
        """Fresh blocks until every group has slots for ``num_tokens`` tokens.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.allocate_new_blocks

        Returns:
            The newly allocated blocks, per group.
        """
        return tuple(
            manager.allocate_new_blocks(
                request_id,
                num_encoder_tokens if isinstance(manager, CrossAttentionManager) else num_tokens,
                num_tokens_main_model,
            )
            for manager in self.single_type_managers
        )

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Cache the request's full blocks up to ``num_computed_tokens`` in every group.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.cache_blocks
        """
        for manager in self.single_type_managers:
            manager.cache_blocks(request, num_computed_tokens)

    def free(self, request_id: str) -> None:
        """Free the request's blocks in every group.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.free
        """
        for manager in self.single_type_managers:
            manager.free(request_id)

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        """Per group, the leading blocks every request holding blocks shares (blocks).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.get_num_common_prefix_blocks
        """
        return [
            manager.get_num_common_prefix_blocks(running_request_id)
            for manager in self.single_type_managers
        ]

    def remove_skipped_blocks(self, request_id: str, total_computed_tokens: int) -> None:
        """Null out and free the blocks outside every group's attention window.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.remove_skipped_blocks
        """
        for manager in self.single_type_managers:
            manager.remove_skipped_blocks(request_id, total_computed_tokens)

    def get_blocks(self, request_id: str) -> tuple[list[KVCacheBlock], ...]:
        """The request's blocks per group (empty for an unknown request).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.get_blocks
        """
        return tuple(manager.req_to_blocks.get(request_id) or [] for manager in self.single_type_managers)

    def find_longest_cache_hit(
        self,
        block_hashes: list[BlockHash],
        max_cache_hit_length: int,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """The longest prefix-cache hit: blocks per group and its length (tokens).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.find_longest_cache_hit
        """
        # NOTE: vLLM's abstract method (of an ABC) has ``pass``; kvlab's base class is a plain
        # class (see SingleTypeKVCacheManager), so calling it on the base raises instead.
        raise NotImplementedError

    def new_step_starts(self) -> None:
        """Tell every manager a scheduler step begins.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.new_step_starts
        """
        for manager in self.single_type_managers:
            manager.new_step_starts()


class KVCacheCoordinatorNoPrefixCache(KVCacheCoordinator):
    """Prefix caching off (or unsupported): any number of groups, never a hit.

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinatorNoPrefixCache
    """

    def __init__(
        self,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        max_num_batched_tokens: int,
        use_eagle: bool,
        enable_kv_cache_events: bool,
        dcp_world_size: int,
        pcp_world_size: int,
        hash_block_size: int,
        metrics_collector: KVCacheMetricsCollector | None = None,
    ) -> None:
        super().__init__(
            kv_cache_config,
            max_model_len,
            max_num_batched_tokens,
            use_eagle,
            False,
            enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=metrics_collector,
        )
        self.num_single_type_manager = len(self.single_type_managers)

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        """Zero for every group.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinatorNoPrefixCache.get_num_common_prefix_blocks
        """
        return [0] * self.num_single_type_manager

    def find_longest_cache_hit(
        self,
        block_hashes: list[BlockHash],
        max_cache_hit_length: int,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """No hit: empty lists and length 0.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinatorNoPrefixCache.find_longest_cache_hit
        """
        blocks: tuple[list[KVCacheBlock], ...] = tuple([] for _ in range(self.num_single_type_manager))
        return blocks, 0


class UnitaryKVCacheCoordinator(KVCacheCoordinator):
    """One KV cache group (every layer the same attention type).

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::UnitaryKVCacheCoordinator

    Raises:
        ValueError: Not exactly one group, or (caching on) hash_block_size != block_size.
    """

    def __init__(
        self,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        max_num_batched_tokens: int,
        use_eagle: bool,
        enable_caching: bool,
        enable_kv_cache_events: bool,
        dcp_world_size: int,
        pcp_world_size: int,
        hash_block_size: int,
        metrics_collector: KVCacheMetricsCollector | None = None,
    ) -> None:
        guard_unitary_coordinator(kv_cache_config, enable_caching, dcp_world_size, pcp_world_size, hash_block_size)
        super().__init__(
            kv_cache_config,
            max_model_len,
            max_num_batched_tokens,
            use_eagle,
            enable_caching,
            enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=metrics_collector,
        )
        self.kv_cache_spec = self.kv_cache_config.kv_cache_groups[0].kv_cache_spec
        self.block_size = self.kv_cache_spec.block_size
        self.dcp_world_size = dcp_world_size
        self.pcp_world_size = pcp_world_size
        if dcp_world_size > 1:
            self.block_size *= dcp_world_size
        if pcp_world_size > 1:
            self.block_size *= pcp_world_size
        # Mamba-only models without caching use block_size = max_model_len: no hash check then.
        assert not enable_caching or (hash_block_size == self.block_size), (
            "UnitaryKVCacheCoordinator assumes hash_block_size == block_size"
        )
        assert len(self.kv_cache_config.kv_cache_groups) == 1, (
            "UnitaryKVCacheCoordinator assumes only one kv cache group"
        )

    def find_longest_cache_hit(
        self,
        block_hashes: list[BlockHash],
        max_cache_hit_length: int,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """The single manager's hit, aligned to the block size.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::UnitaryKVCacheCoordinator.find_longest_cache_hit
        """
        hit_blocks = self.single_type_managers[0].find_longest_cache_hit(
            block_hashes=block_hashes,
            max_length=max_cache_hit_length,
            kv_cache_group_ids=[0],
            block_pool=self.block_pool,
            kv_cache_spec=self.kv_cache_spec,
            use_eagle=0 in self.eagle_group_ids,
            alignment_tokens=self.block_size,
            dcp_world_size=self.dcp_world_size,
            pcp_world_size=self.pcp_world_size,
        )
        return hit_blocks, len(hit_blocks[0]) * self.block_size


class HybridKVCacheCoordinator(KVCacheCoordinator):
    """Several attention types (several groups): the fixed-point hit search.

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator

    Raises:
        ValueError: A group's block size is not a multiple of hash_block_size, DCP/PCP is on,
            or there are fewer than two distinct specs.
    """

    def __init__(
        self,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        max_num_batched_tokens: int,
        use_eagle: bool,
        enable_caching: bool,
        enable_kv_cache_events: bool,
        dcp_world_size: int,
        pcp_world_size: int,
        hash_block_size: int,
        metrics_collector: KVCacheMetricsCollector | None = None,
    ) -> None:
        guard_hybrid_coordinator(kv_cache_config, dcp_world_size, pcp_world_size, hash_block_size)
        super().__init__(
            kv_cache_config,
            max_model_len,
            max_num_batched_tokens,
            use_eagle,
            enable_caching,
            enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=metrics_collector,
        )
        # Hashes are computed at hash_block_size; a group's block may span several of them.
        self.hash_block_size = hash_block_size
        assert all(
            g.kv_cache_spec.block_size % hash_block_size == 0 for g in kv_cache_config.kv_cache_groups
        ), "block_size must be divisible by hash_block_size"
        assert dcp_world_size == 1, "DCP not support hybrid attn now."
        assert pcp_world_size == 1, "PCP not support hybrid attn now."
        self.verify_and_split_kv_cache_groups()

    def verify_and_split_kv_cache_groups(self) -> None:
        """Merge groups with equal specs into attention groups; full attention first; the LCM.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator.verify_and_split_kv_cache_groups
        """
        attention_groups: list[tuple[KVCacheSpec, list[int], type[SingleTypeKVCacheManager]]] = []

        for i, g in enumerate(self.kv_cache_config.kv_cache_groups):
            manager_cls = self.single_type_managers[i].__class__
            spec = g.kv_cache_spec

            # Groups with equal specs are searched together (one lookup per block hash).
            for existing_spec, group_ids, existing_cls in attention_groups:
                if existing_spec == spec:
                    assert manager_cls is existing_cls, (
                        "Expected same manager class for identical KV cache specs."
                    )
                    group_ids.append(i)
                    break
            else:
                attention_groups.append((spec, [i], manager_cls))

        assert len(attention_groups) > 1, "HybridKVCacheCoordinator requires at least two attention groups."

        # Full attention first (a stable sort): its left-to-right scan bounds the rest.
        self.attention_groups = sorted(
            attention_groups,
            key=lambda x: not isinstance(x[0], FullAttentionSpec),
        )

        # Hits are whole blocks in every group, so their length is a multiple of the LCM.
        block_sizes = [spec.block_size for spec, _, _ in attention_groups]
        self.lcm_block_size = lcm(*block_sizes)

        # Attention groups (indices into self.attention_groups) holding an EAGLE group.
        self.eagle_attn_group_indices: set[int] = {
            i
            for i, (_, group_ids, _) in enumerate(self.attention_groups)
            if any(gid in self.eagle_group_ids for gid in group_ids)
        }

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Cache up to the last ``lcm_block_size`` boundary only (hits never end elsewhere);
        sliding-window groups also skip blocks that can never end an aligned hit.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator.cache_blocks
        """
        num_computed_tokens = num_computed_tokens // self.lcm_block_size * self.lcm_block_size
        for manager in self.single_type_managers:
            manager.cache_blocks(
                request,
                num_computed_tokens,
                alignment_tokens=self.lcm_block_size,
            )

    def find_longest_cache_hit(
        self,
        block_hashes: list[BlockHash],
        max_cache_hit_length: int,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """The fixed-point search described in the module docstring.

        A full-attention group's hit is downward closed: it is searched once, then only cut to
        the shrinking candidate. EAGLE attention groups search one block further (capped at
        ``max_cache_hit_length``) and drop one block, at most once per candidate length; a
        shrink by a non-EAGLE search forgets those verifications. With exactly two attention
        groups, full attention first, one round suffices.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator.find_longest_cache_hit

        Args:
            block_hashes: The request's block hashes at ``hash_block_size``.
            max_cache_hit_length: Longest hit allowed (tokens).

        Returns:
            The hit blocks of every group (group order) and the hit length (tokens).
        """

        def _get_block_hashes(kv_cache_spec: KVCacheSpec) -> BlockHashList:
            if kv_cache_spec.block_size == self.hash_block_size:
                return block_hashes
            return BlockHashListWithBlockSize(block_hashes, self.hash_block_size, kv_cache_spec.block_size)

        num_groups = len(self.kv_cache_config.kv_cache_groups)
        hit_length = max_cache_hit_length
        hit_blocks_by_group: list[list[KVCacheBlock] | None] = [None] * num_groups

        # One full-attention type plus one other: one round suffices (full attention is first).
        is_simple_hybrid = len(self.attention_groups) == 2 and isinstance(
            self.attention_groups[0][0], FullAttentionSpec
        )

        # Attention groups whose EAGLE drop was verified at the current candidate length.
        eagle_verified: set[int] = set()

        while True:
            curr_hit_length = hit_length

            for idx, (spec, group_ids, manager_cls) in enumerate(self.attention_groups):
                cached_blocks = hit_blocks_by_group[group_ids[0]]
                if isinstance(spec, FullAttentionSpec) and cached_blocks is not None:
                    # Downward closed: cut the earlier hit instead of searching again.
                    curr_hit_length = curr_hit_length // spec.block_size * spec.block_size
                    if self.recorder is not None:
                        self.recorder.fixed_point(
                            idx, group_ids, hit_length, curr_hit_length, True,
                            [[b.block_id for b in hit_blocks_by_group[g][: curr_hit_length // spec.block_size]] for g in group_ids],
                        )  # fmt: skip
                    continue

                use_eagle = idx in self.eagle_attn_group_indices and idx not in eagle_verified

                _max_length = curr_hit_length
                if use_eagle:
                    # Match one block more, then drop it.
                    _max_length = min(curr_hit_length + spec.block_size, max_cache_hit_length)
                hit_blocks = manager_cls.find_longest_cache_hit(
                    block_hashes=_get_block_hashes(spec),
                    max_length=_max_length,
                    kv_cache_group_ids=group_ids,
                    block_pool=self.block_pool,
                    kv_cache_spec=spec,
                    use_eagle=use_eagle,
                    alignment_tokens=self.lcm_block_size,
                )
                _new_hit_length = len(hit_blocks[0]) * spec.block_size
                if use_eagle:
                    eagle_verified.add(idx)
                elif _new_hit_length < curr_hit_length:
                    # The candidate shrank: earlier EAGLE verifications no longer hold.
                    eagle_verified.clear()
                curr_hit_length = _new_hit_length
                for group_id, blocks in zip(group_ids, hit_blocks):
                    hit_blocks_by_group[group_id] = blocks
                if self.recorder is not None:
                    self.recorder.fixed_point(
                        idx, group_ids, hit_length, curr_hit_length, False,
                        [[b.block_id for b in hit_blocks_by_group[g]] for g in group_ids],
                    )  # fmt: skip

            if curr_hit_length >= hit_length:
                break
            hit_length = curr_hit_length
            if is_simple_hybrid:
                break

        # Full attention was searched once: cut it to the final length.
        spec, group_ids, _ = self.attention_groups[0]
        if isinstance(spec, FullAttentionSpec):
            num_blocks = hit_length // spec.block_size
            for group_id in group_ids:
                if (blks := hit_blocks_by_group[group_id]) is not None:
                    del blks[num_blocks:]

        return tuple(blocks if blocks is not None else [] for blocks in hit_blocks_by_group), hit_length


def get_kv_cache_coordinator(
    kv_cache_config: KVCacheConfig,
    max_model_len: int,
    max_num_batched_tokens: int,
    use_eagle: bool,
    enable_caching: bool,
    enable_kv_cache_events: bool,
    dcp_world_size: int,
    pcp_world_size: int,
    hash_block_size: int,
    metrics_collector: KVCacheMetricsCollector | None = None,
) -> KVCacheCoordinator:
    """Caching off -> no-prefix-cache; one group -> unitary; otherwise hybrid.

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::get_kv_cache_coordinator

    Returns:
        The coordinator (it owns the new BlockPool and managers).

    Raises:
        ValueError: The chosen coordinator rejects the configuration.
    """
    if not enable_caching:
        return KVCacheCoordinatorNoPrefixCache(
            kv_cache_config,
            max_model_len,
            max_num_batched_tokens,
            use_eagle,
            enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=metrics_collector,
        )
    if len(kv_cache_config.kv_cache_groups) == 1:
        return UnitaryKVCacheCoordinator(
            kv_cache_config,
            max_model_len,
            max_num_batched_tokens,
            use_eagle,
            enable_caching,
            enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=metrics_collector,
        )
    return HybridKVCacheCoordinator(
        kv_cache_config,
        max_model_len,
        max_num_batched_tokens,
        use_eagle,
        enable_caching,
        enable_kv_cache_events,
        dcp_world_size=dcp_world_size,
        pcp_world_size=pcp_world_size,
        hash_block_size=hash_block_size,
        metrics_collector=metrics_collector,
    )
