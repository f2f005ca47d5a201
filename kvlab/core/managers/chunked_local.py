"""Chunked local attention: tokens are cut into chunks of ``attention_chunk_size`` and a token
reads only the earlier tokens of its own chunk.

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvlab.core.kv_cache_interface import ChunkedLocalAttentionSpec, KVCacheSpec
from kvlab.core.managers.base import SingleTypeKVCacheManager

if TYPE_CHECKING:
    from kvlab.core.block_pool import BlockPool
    from kvlab.core.kv_cache_utils import BlockHashList, KVCacheBlock

__all__ = ["ChunkedLocalAttentionManager"]


class ChunkedLocalAttentionManager(SingleTypeKVCacheManager):
    """Chunked local attention.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager

    Args:
        kv_cache_spec: A ChunkedLocalAttentionSpec.
        **kwargs: The base class's arguments.
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
        """Blocks before the chunk of token ``max_length`` are hits as null blocks; from that
        chunk's first block on, cached blocks match left to right. See the base class.

        Example (chunk 8, block 4): ``max_length`` 15 -> ``[null, null]`` plus block 2 if
        cached; ``max_length`` 16 -> ``[null] * 4``.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager.find_longest_cache_hit

        Raises:
            TypeError: ``kv_cache_spec`` is not a ChunkedLocalAttentionSpec.
            ValueError: EAGLE, DCP/PCP, or alignment != block size.
        """
        if not isinstance(kv_cache_spec, ChunkedLocalAttentionSpec):
            raise TypeError(
                "ChunkedLocalAttentionManager serves ChunkedLocalAttentionSpec, "
                f"not {type(kv_cache_spec).__name__}"
            )
        if use_eagle:
            raise ValueError(
                "EAGLE is not supported with chunked local attention (use_eagle must be False)"
            )
        if dcp_world_size != 1 or pcp_world_size != 1:
            raise ValueError(
                "chunked local attention does not support DCP/PCP (world sizes must be 1)"
            )
        block_size = kv_cache_spec.block_size
        if block_size != alignment_tokens:
            raise ValueError(
                f"chunked local attention needs alignment_tokens == block_size ({block_size}), "
                f"got {alignment_tokens}: mixed block sizes are not supported with it"
            )
        chunk = kv_cache_spec.attention_chunk_size
        local_attention_start_idx = max_length // chunk * chunk if max_length > 0 else 0
        start_block_idx = local_attention_start_idx // block_size
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple(
            [block_pool.null_block] * start_block_idx for _ in kv_cache_group_ids
        )
        for i in range(start_block_idx, max_length // block_size):
            cached_block = block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids)
            if not cached_block:
                break
            for computed, cached in zip(computed_blocks, cached_block):
                computed.append(cached)
        return computed_blocks

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens before the chunk of the next token: ``computed // chunk * chunk``.

        Examples (chunk 8): 13 computed -> 8; 8 computed -> 8 (the next token starts a chunk);
        7 computed -> 0.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::ChunkedLocalAttentionManager.get_num_skipped_tokens

        Args:
            num_computed_tokens: Computed tokens (tokens).

        Returns:
            Skipped tokens (tokens).
        """
        return (num_computed_tokens // self.attention_chunk_size) * self.attention_chunk_size

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: cascade attention does not apply to chunked local attention."""
        return 0
