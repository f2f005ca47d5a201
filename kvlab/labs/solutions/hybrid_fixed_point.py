"""Reference solution of lab ``hybrid_fixed_point``: the notebook's HybridKVCacheCoordinator cell.

Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator.find_longest_cache_hit
"""

from __future__ import annotations

import kvlab.core
from kvlab.core import BlockHashListWithBlockSize, FullAttentionSpec, KVCacheBlock

# --- notebook cell ---
class HybridKVCacheCoordinator(kvlab.core.HybridKVCacheCoordinator):
    """Several attention types: the longest hit every group can serve (kvlab's, but the lookup).

    Given by kvlab's class: ``self.attention_groups`` (``(spec, group ids, manager class)`` per
    distinct spec, full attention first), ``self.lcm_block_size``, ``self.hash_block_size``,
    ``self.eagle_attn_group_indices`` and ``self.kv_cache_config.kv_cache_groups``.

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator
    """

    def find_longest_cache_hit(self, block_hashes: list[bytes],
                               max_cache_hit_length: int) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """The hit blocks of every group (in group order) and the hit length (tokens).

        Start with ``hit_length = max_cache_hit_length`` and repeat until no attention group
        shortens it: each attention group in turn searches (``manager_cls.find_longest_cache_hit``
        with ``block_hashes`` at its block size, ``alignment_tokens = self.lcm_block_size``) for
        the longest hit within the current candidate, which becomes the new candidate. A
        full-attention group's hit is downward closed: after its first search, just cut it to
        the candidate. An EAGLE attention group searches one block further (capped at
        ``max_cache_hit_length``) with ``use_eagle=True``, once per candidate length (a shrink by
        another group makes it search again). With exactly two attention groups, full attention
        first, one round is enough. Finally cut the full-attention hit to the final length.
        """
        ### BEGIN SOLUTION
        def _get_block_hashes(kv_cache_spec):
            if kv_cache_spec.block_size == self.hash_block_size:
                return block_hashes
            return BlockHashListWithBlockSize(block_hashes, self.hash_block_size, kv_cache_spec.block_size)

        num_groups = len(self.kv_cache_config.kv_cache_groups)
        hit_length = max_cache_hit_length
        hit_blocks_by_group = [None] * num_groups
        is_simple_hybrid = len(self.attention_groups) == 2 and isinstance(self.attention_groups[0][0], FullAttentionSpec)
        eagle_verified = set()
        while True:
            curr_hit_length = hit_length
            for idx, (spec, group_ids, manager_cls) in enumerate(self.attention_groups):
                cached_blocks = hit_blocks_by_group[group_ids[0]]
                if isinstance(spec, FullAttentionSpec) and cached_blocks is not None:
                    curr_hit_length = curr_hit_length // spec.block_size * spec.block_size
                    continue
                use_eagle = idx in self.eagle_attn_group_indices and idx not in eagle_verified
                _max_length = curr_hit_length
                if use_eagle:
                    _max_length = min(curr_hit_length + spec.block_size, max_cache_hit_length)
                hit_blocks = manager_cls.find_longest_cache_hit(
                    block_hashes=_get_block_hashes(spec), max_length=_max_length, kv_cache_group_ids=group_ids,
                    block_pool=self.block_pool, kv_cache_spec=spec, use_eagle=use_eagle,
                    alignment_tokens=self.lcm_block_size)
                _new_hit_length = len(hit_blocks[0]) * spec.block_size
                if use_eagle:
                    eagle_verified.add(idx)
                elif _new_hit_length < curr_hit_length:
                    eagle_verified.clear()
                curr_hit_length = _new_hit_length
                for group_id, blocks in zip(group_ids, hit_blocks):
                    hit_blocks_by_group[group_id] = blocks
            if curr_hit_length >= hit_length:
                break
            hit_length = curr_hit_length
            if is_simple_hybrid:
                break
        spec, group_ids, _ = self.attention_groups[0]
        if isinstance(spec, FullAttentionSpec):
            num_blocks = hit_length // spec.block_size
            for group_id in group_ids:
                if (blks := hit_blocks_by_group[group_id]) is not None:
                    del blks[num_blocks:]
        return tuple(blocks if blocks is not None else [] for blocks in hit_blocks_by_group), hit_length
        ### END SOLUTION


SOLUTION = HybridKVCacheCoordinator
