"""KVCacheCoordinator: fans every request-level operation out to one manager per KV cache group.

Also the two simple coordinators: no prefix cache, and a single group ("unitary").

Mirrors: vllm/v1/core/kv_cache_coordinator.py::{KVCacheCoordinator,
KVCacheCoordinatorNoPrefixCache, UnitaryKVCacheCoordinator}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvlab.core.block_pool import BlockPool
from kvlab.core.single_type_kv_cache_manager import (
    CrossAttentionManager,
    get_manager_for_kv_cache_spec,
)

if TYPE_CHECKING:
    from kvlab.core.kv_cache_interface import KVCacheConfig
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector
    from kvlab.core.kv_cache_utils import BlockHash, KVCacheBlock
    from kvlab.core.request import Request

__all__ = ["KVCacheCoordinator", "KVCacheCoordinatorNoPrefixCache", "UnitaryKVCacheCoordinator"]


class KVCacheCoordinator(ABC):
    """Owns the BlockPool and one SingleTypeKVCacheManager per KV cache group.

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator. kvlab adds ``recorder``
    (None = off); only the hybrid coordinator reports through it (``fixed_point``).

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
        self.recorder = None
        self.block_pool = BlockPool(
            num_gpu_blocks=kv_cache_config.num_blocks,
            enable_caching=enable_caching,
            hash_block_size=hash_block_size,
            enable_kv_cache_events=enable_kv_cache_events,
            metrics_collector=metrics_collector,
        )
        groups = kv_cache_config.kv_cache_groups
        # Groups that drop their last hit block under EAGLE; none flagged -> all of them.
        self.eagle_group_ids: set[int] = {i for i, g in enumerate(groups) if g.is_eagle_group}
        if use_eagle and not self.eagle_group_ids:
            self.eagle_group_ids = set(range(len(groups)))
        self.single_type_managers = tuple(
            get_manager_for_kv_cache_spec(
                kv_cache_spec=group.kv_cache_spec,
                max_num_batched_tokens=max_num_batched_tokens,
                max_model_len=max_model_len,
                block_pool=self.block_pool,
                enable_caching=enable_caching,
                kv_cache_group_id=i,
                dcp_world_size=dcp_world_size,
                pcp_world_size=pcp_world_size,
            )
            for i, group in enumerate(groups)
        )
        # NOTE: isinstance against the ABC-based manager classes is slow; asked once here.
        self.cross_attention_flags: tuple[bool, ...] = tuple(
            isinstance(m, CrossAttentionManager) for m in self.single_type_managers
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
        """Free blocks the allocation would consume, summed over groups (blocks).

        Cross attention asks for ``num_encoder_tokens`` slots (one static allocation).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.get_num_blocks_to_allocate
        """
        total = 0
        cross_flags = self.cross_attention_flags
        for i, manager in enumerate(self.single_type_managers):
            if cross_flags[i]:
                total += manager.get_num_blocks_to_allocate(
                    request_id, num_encoder_tokens, [], 0, num_encoder_tokens, apply_admission_cap
                )
            else:
                total += manager.get_num_blocks_to_allocate(
                    request_id, num_tokens, new_computed_blocks[i], total_computed_tokens,
                    num_tokens_main_model, apply_admission_cap,
                )  # fmt: skip
        return total

    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: tuple[Sequence[KVCacheBlock], ...],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
    ) -> None:
        """Give each group its hit blocks (and external-token blocks).

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
        """Grow every group to ``num_tokens`` slots (cross attention: ``num_encoder_tokens``).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.allocate_new_blocks

        Returns:
            The new blocks of each group.
        """
        return tuple(
            [
                manager.allocate_new_blocks(
                    request_id, num_encoder_tokens if cross else num_tokens, num_tokens_main_model
                )
                for manager, cross in zip(self.single_type_managers, self.cross_attention_flags)
            ]
        )

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Cache each group's full blocks up to ``num_computed_tokens`` tokens.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.cache_blocks
        """
        for manager in self.single_type_managers:
            manager.cache_blocks(request, num_computed_tokens)

    def free(self, request_id: str) -> None:
        """Free the request's blocks in every group (group order).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.free
        """
        for manager in self.single_type_managers:
            manager.free(request_id)

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        """Common prefix blocks per group (blocks).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.get_num_common_prefix_blocks
        """
        return [
            manager.get_num_common_prefix_blocks(running_request_id)
            for manager in self.single_type_managers
        ]

    def remove_skipped_blocks(self, request_id: str, total_computed_tokens: int) -> None:
        """Null out and free the blocks outside each group's attention window.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.remove_skipped_blocks
        """
        for manager in self.single_type_managers:
            manager.remove_skipped_blocks(request_id, total_computed_tokens)

    def get_blocks(self, request_id: str) -> tuple[list[KVCacheBlock], ...]:
        """The request's blocks per group (empty lists for an unknown request).

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.get_blocks
        """
        return tuple(
            manager.req_to_blocks.get(request_id) or [] for manager in self.single_type_managers
        )

    @abstractmethod
    def find_longest_cache_hit(
        self, block_hashes: list[BlockHash], max_cache_hit_length: int
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """Hit blocks per group and hit length (tokens), at most ``max_cache_hit_length``."""

    def new_step_starts(self) -> None:
        """Tell every manager a scheduler step begins.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::KVCacheCoordinator.new_step_starts
        """
        for manager in self.single_type_managers:
            manager.new_step_starts()


class KVCacheCoordinatorNoPrefixCache(KVCacheCoordinator):
    """Coordinator when prefix caching is off: any number of groups (even 0), never a hit.

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
        """Zeros: without prefix caching no block is shared."""
        return [0] * self.num_single_type_manager

    def find_longest_cache_hit(
        self, block_hashes: list[BlockHash], max_cache_hit_length: int
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """No hit: empty lists and 0 tokens."""
        return tuple([] for _ in range(self.num_single_type_manager)), 0


class UnitaryKVCacheCoordinator(KVCacheCoordinator):
    """Coordinator for exactly one KV cache group (one attention type).

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::UnitaryKVCacheCoordinator

    Raises:
        ValueError: More than one group, or caching on with ``hash_block_size`` different from
            the (DCP/PCP-scaled) block size.
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
        if enable_caching and hash_block_size != self.block_size:
            raise ValueError(
                f"UnitaryKVCacheCoordinator needs hash_block_size == block_size, got "
                f"{hash_block_size} != {self.block_size}"
            )
        if len(self.kv_cache_config.kv_cache_groups) != 1:
            raise ValueError("UnitaryKVCacheCoordinator needs exactly one KV cache group")

    def find_longest_cache_hit(
        self, block_hashes: list[BlockHash], max_cache_hit_length: int
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
