"""Reference solution of lab ``full_attention_hit``: the notebook's FullAttentionManager cell.

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager.find_longest_cache_hit
"""

from __future__ import annotations

from kvlab.core import KVCacheBlock, SingleTypeKVCacheManager

# --- notebook cell ---
class FullAttentionManager(SingleTypeKVCacheManager):
    """Full (causal) attention: every block is kept until the request finishes.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager (the lookup only;
    everything else is kvlab's own FullAttentionManager).
    """

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool,
        kv_cache_spec,
        use_eagle: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[list[KVCacheBlock], ...]:
        """The longest prefix, at most ``max_length`` tokens, cached in every group of
        ``kv_cache_group_ids``: one list of blocks per group id, all equally long.

        Look the blocks up left to right with ``block_pool.get_cached_block(block_hash,
        kv_cache_group_ids)`` (one block per group, or None). The hashes are chained, so the
        first miss ends the hit. Then, with ``use_eagle``, drop the last block found; finally
        drop blocks until the hit (in tokens) is a multiple of ``alignment_tokens``. A lookup only
        finds blocks: it never changes them. ``block_size`` is ``kv_cache_spec.block_size``
        (times ``dcp_world_size * pcp_world_size``, both 1 here).
        """
        ### BEGIN SOLUTION
        computed_blocks = tuple([] for _ in range(len(kv_cache_group_ids)))
        block_size = kv_cache_spec.block_size
        if dcp_world_size * pcp_world_size > 1:
            block_size *= dcp_world_size * pcp_world_size
        max_num_blocks = max_length // block_size
        for block_hash in block_hashes[:max_num_blocks]:
            if cached_block := block_pool.get_cached_block(block_hash, kv_cache_group_ids):
                for computed, cached in zip(computed_blocks, cached_block):
                    computed.append(cached)
            else:
                break
        if use_eagle and computed_blocks[0]:
            for computed in computed_blocks:
                computed.pop()
        while block_size != alignment_tokens and len(computed_blocks[0]) * block_size % alignment_tokens != 0:
            for computed in computed_blocks:
                computed.pop()
        return computed_blocks
        ### END SOLUTION


SOLUTION = FullAttentionManager
