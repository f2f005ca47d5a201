"""HybridKVCacheCoordinator: prefix-cache hits across several attention types at once.

Groups with equal specs form one *attention group* (searched together). A hit length must
suit every attention group and be a multiple of the LCM of their block sizes. The search is a
fixed point: each attention group either accepts the candidate length or shortens it, and any
shortening restarts the round. Full attention goes first (its left-to-right scan gives the
tightest first bound) and is searched only once: a full-attention hit of L tokens contains
the hit for every shorter length, so later rounds just truncate it.

Example (full + a sliding window needing 2 blocks, 3 cached blocks, the sliding-window copy of
block 2 evicted): round 0: full -> 3 blocks, sliding window (max 3 blocks) -> 2 blocks. With
exactly these two attention groups one round is enough; the full hit is cut to 2 blocks. With
a third attention group (another window) a shrink starts round 1, where full attention is
only truncated (``reused``) and the others are searched again with the shorter maximum.

Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator
"""

from __future__ import annotations

from math import lcm
from typing import TYPE_CHECKING

from kvlab.core.coordinators.base import KVCacheCoordinator
from kvlab.core.kv_cache_interface import FullAttentionSpec
from kvlab.core.kv_cache_utils import BlockHashListWithBlockSize

if TYPE_CHECKING:
    from kvlab.core.kv_cache_interface import KVCacheConfig, KVCacheSpec
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector
    from kvlab.core.kv_cache_utils import BlockHash, BlockHashList, KVCacheBlock
    from kvlab.core.request import Request
    from kvlab.core.single_type_kv_cache_manager import SingleTypeKVCacheManager

__all__ = ["HybridKVCacheCoordinator"]


class HybridKVCacheCoordinator(KVCacheCoordinator):
    """Coordinator for models with several KV cache types (several attention groups).

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator. kvlab reports each
    attention group's turn of the fixed point to ``recorder.fixed_point``.

    Attributes:
        attention_groups: ``(spec, group ids, manager class)`` per distinct spec, full
            attention first.
        lcm_block_size: LCM of the attention groups' block sizes (tokens).
        eagle_attn_group_indices: Indices into ``attention_groups`` holding an EAGLE group.

    Raises:
        ValueError: A block size is not a multiple of ``hash_block_size``, DCP/PCP is used,
            fewer than two distinct specs exist, or equal specs map to different managers.
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
        # Hashes are computed at hash_block_size; a group's block may span several of them.
        self.hash_block_size = hash_block_size
        for g in kv_cache_config.kv_cache_groups:
            if g.kv_cache_spec.block_size % hash_block_size != 0:
                raise ValueError(
                    f"block_size {g.kv_cache_spec.block_size} is not a multiple of "
                    f"hash_block_size {hash_block_size}"
                )
        if dcp_world_size != 1 or pcp_world_size != 1:
            raise ValueError(
                "hybrid KV cache groups do not support DCP/PCP (world sizes must be 1)"
            )
        self.verify_and_split_kv_cache_groups()

    def verify_and_split_kv_cache_groups(self) -> None:
        """Merge groups with equal specs into attention groups; full attention first; LCM.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator.verify_and_split_kv_cache_groups

        Raises:
            ValueError: Fewer than two attention groups, or equal specs with different managers.
        """
        attention_groups: list[tuple[KVCacheSpec, list[int], type[SingleTypeKVCacheManager]]] = []
        for i, g in enumerate(self.kv_cache_config.kv_cache_groups):
            manager_cls = self.single_type_managers[i].__class__
            spec = g.kv_cache_spec
            for existing_spec, group_ids, existing_cls in attention_groups:
                if existing_spec == spec:
                    if manager_cls is not existing_cls:
                        raise ValueError("identical KV cache specs must use the same manager class")
                    group_ids.append(i)
                    break
            else:
                attention_groups.append((spec, [i], manager_cls))
        if len(attention_groups) <= 1:
            raise ValueError(
                "HybridKVCacheCoordinator needs at least two distinct KV cache specs; "
                "identical groups form one attention group"
            )
        # Stable sort: full attention first, the rest in group order.
        self.attention_groups = sorted(
            attention_groups, key=lambda x: not isinstance(x[0], FullAttentionSpec)
        )
        # Hits are whole blocks in every group, so their length is a multiple of the LCM.
        self.lcm_block_size = lcm(*(spec.block_size for spec, _, _ in attention_groups))
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
            manager.cache_blocks(request, num_computed_tokens, alignment_tokens=self.lcm_block_size)

    def _get_block_hashes(
        self, block_hashes: list[BlockHash], kv_cache_spec: KVCacheSpec
    ) -> BlockHashList:
        if kv_cache_spec.block_size == self.hash_block_size:
            return block_hashes
        return BlockHashListWithBlockSize(
            block_hashes, self.hash_block_size, kv_cache_spec.block_size
        )

    def find_longest_cache_hit(
        self, block_hashes: list[BlockHash], max_cache_hit_length: int
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """The fixed-point search described in the module docstring.

        EAGLE attention groups search one block further (capped at ``max_cache_hit_length``)
        and drop one block, at most once per candidate length; a shrink by a non-EAGLE search
        forgets those verifications. With exactly two attention groups, full attention first,
        one round suffices.

        Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator.find_longest_cache_hit

        Args:
            block_hashes: The request's block hashes at ``hash_block_size``.
            max_cache_hit_length: Longest hit allowed (tokens).

        Returns:
            The hit blocks of every group (group order) and the hit length (tokens).
        """
        hit_length = max_cache_hit_length
        hit_blocks_by_group: list[list[KVCacheBlock] | None] = [None] * len(
            self.kv_cache_config.kv_cache_groups
        )
        is_simple_hybrid = len(self.attention_groups) == 2 and isinstance(
            self.attention_groups[0][0], FullAttentionSpec
        )
        eagle_verified: set[int] = set()
        iteration = 0
        while True:
            curr_hit_length = hit_length
            for idx in range(len(self.attention_groups)):
                curr_hit_length = self._fixed_point_turn(
                    iteration,
                    idx,
                    curr_hit_length,
                    max_cache_hit_length,
                    block_hashes,
                    hit_blocks_by_group,
                    eagle_verified,
                )
            if curr_hit_length >= hit_length:
                break
            hit_length = curr_hit_length
            iteration += 1
            if is_simple_hybrid:
                break
        # Full attention was searched once: cut it to the final length.
        spec, group_ids, _ = self.attention_groups[0]
        if isinstance(spec, FullAttentionSpec):
            num_blocks = hit_length // spec.block_size
            for group_id in group_ids:
                blks = hit_blocks_by_group[group_id]
                if blks is not None:
                    del blks[num_blocks:]
        return tuple(
            blocks if blocks is not None else [] for blocks in hit_blocks_by_group
        ), hit_length

    def _fixed_point_turn(
        self,
        iteration: int,
        idx: int,
        curr_hit_length: int,
        max_cache_hit_length: int,
        block_hashes: list[BlockHash],
        hit_blocks_by_group: list[list[KVCacheBlock] | None],
        eagle_verified: set[int],
    ) -> int:
        """One attention group's turn: returns the (possibly shorter) candidate length (tokens)."""
        spec, group_ids, manager_cls = self.attention_groups[idx]
        rec = self.recorder
        if isinstance(spec, FullAttentionSpec) and hit_blocks_by_group[group_ids[0]] is not None:
            # Downward-closed: truncate the earlier hit instead of searching again.
            new_hit_length = curr_hit_length // spec.block_size * spec.block_size
            if rec is not None:
                num_blocks = new_hit_length // spec.block_size
                kept = tuple(
                    tuple(b.block_id for b in hit_blocks_by_group[g][:num_blocks])  # type: ignore[index]
                    for g in group_ids
                )
                rec.fixed_point(
                    iteration, tuple(group_ids), curr_hit_length, new_hit_length, True, kept
                )
            return new_hit_length
        use_eagle = idx in self.eagle_attn_group_indices and idx not in eagle_verified
        max_length = curr_hit_length
        if use_eagle:
            # Match one block more, then drop it.
            max_length = min(curr_hit_length + spec.block_size, max_cache_hit_length)
        hit_blocks = manager_cls.find_longest_cache_hit(
            block_hashes=self._get_block_hashes(block_hashes, spec),
            max_length=max_length,
            kv_cache_group_ids=group_ids,
            block_pool=self.block_pool,
            kv_cache_spec=spec,
            use_eagle=use_eagle,
            alignment_tokens=self.lcm_block_size,
        )
        new_hit_length = len(hit_blocks[0]) * spec.block_size
        if use_eagle:
            eagle_verified.add(idx)
        elif new_hit_length < curr_hit_length:
            eagle_verified.clear()
        for group_id, blocks in zip(group_ids, hit_blocks):
            hit_blocks_by_group[group_id] = blocks
        if rec is not None:
            found = tuple(tuple(b.block_id for b in blocks) for blocks in hit_blocks)
            rec.fixed_point(
                iteration, tuple(group_ids), curr_hit_length, new_hit_length, False, found
            )
        return new_hit_length
