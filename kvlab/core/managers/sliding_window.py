"""Sliding-window attention: a token reads only the ``sliding_window`` tokens ending at itself.

Blocks that fall wholly before the window are returned to the pool while the request runs
(and replaced by the null block), and a prefix-cache hit needs only the last
``cdiv(sliding_window - 1, block_size)`` blocks before the hit end to be cached.

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvlab.core.kv_cache_interface import KVCacheSpec, SlidingWindowSpec
from kvlab.core.managers.base import SingleTypeKVCacheManager, cdiv, direct_lookup
from kvlab.core.managers.full_attention import _align_down, _pop_last

if TYPE_CHECKING:
    from kvlab.core.block_pool import BlockPool
    from kvlab.core.kv_cache_utils import BlockHashList, KVCacheBlock

__all__ = ["SlidingWindowManager"]


class SlidingWindowManager(SingleTypeKVCacheManager):
    """Sliding-window attention (and its MLA variant).

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager

    Args:
        kv_cache_spec: A SlidingWindowSpec.
        **kwargs: The base class's arguments.
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
        """Scan right to left for the first run of enough contiguous cached blocks.

        A run of ``cdiv(sliding_window - 1, block_size)`` cached blocks (one more with EAGLE)
        ending at block ``i`` makes ``i + 1`` blocks a hit: the blocks before the run are
        returned as null blocks. A run's last block must end on an ``alignment_tokens``
        boundary (after the EAGLE drop). If no run is long enough, the cached blocks at the
        very start are the hit. With EAGLE the last block is then dropped and the hit
        re-aligned. See the base class for Args/Returns.

        Example: block_size 4, sliding_window 8 (2 blocks needed), cached = [0, 1, -, 3, 4, -]
        with max 6 blocks gives ``[null, null, null, b3, b4]``.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager.find_longest_cache_hit

        Raises:
            TypeError: ``kv_cache_spec`` is not a SlidingWindowSpec.
            ValueError: ``dcp_world_size`` or ``pcp_world_size`` is not 1.
        """
        if not isinstance(kv_cache_spec, SlidingWindowSpec):
            raise TypeError(
                f"SlidingWindowManager serves SlidingWindowSpec, not {type(kv_cache_spec).__name__}"
            )
        if dcp_world_size != 1 or pcp_world_size != 1:
            raise ValueError(
                "sliding-window attention does not support DCP/PCP (world sizes must be 1)"
            )
        block_size = kv_cache_spec.block_size
        # -1: the token being computed is itself inside its window.
        num_contiguous_needed = cdiv(kv_cache_spec.sliding_window - 1, block_size)
        if use_eagle:
            num_contiguous_needed += 1  # match one block more, drop it below
        max_num_blocks = max_length // block_size
        computed_blocks = tuple(
            [block_pool.null_block] * max_num_blocks for _ in kv_cache_group_ids
        )
        num_contiguous_blocks, match_found = cls._scan_right_to_left(
            computed_blocks, max_num_blocks, block_hashes, kv_cache_group_ids, block_pool,
            block_size, num_contiguous_needed, use_eagle, alignment_tokens,
        )  # fmt: skip
        if not match_found:
            # A short run at the very start is still a hit (nothing before it is needed).
            for computed in computed_blocks:
                del computed[num_contiguous_blocks:]
            _align_down(computed_blocks, block_size, alignment_tokens)
        if use_eagle and computed_blocks[0]:
            _pop_last(computed_blocks)
            _align_down(computed_blocks, block_size, alignment_tokens)
        return computed_blocks

    @staticmethod
    def _scan_right_to_left(
        computed_blocks: tuple[list[KVCacheBlock], ...],
        max_num_blocks: int,
        block_hashes: BlockHashList,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        block_size: int,
        num_contiguous_needed: int,
        use_eagle: bool,
        alignment_tokens: int,
    ) -> tuple[int, bool]:
        """Fill ``computed_blocks`` from the right; return (run length, whether it sufficed).

        On success the lists are cut right after the run.
        """
        num_contiguous_blocks = 0
        direct = direct_lookup(block_pool, kv_cache_group_ids)
        if direct is not None:
            cache_get, suffix, group_id, rec = direct
        for i in range(max_num_blocks - 1, -1, -1):
            if direct is not None:  # one group: get_cached_block's lookup, without the call
                block_hash = block_hashes[i]
                cached = cache_get(block_hash + suffix)
                if cached is None:
                    if rec is not None:
                        rec.lookup(block_hash, group_id, -1)
                    num_contiguous_blocks = 0
                    continue
                if type(cached) is dict:
                    cached = next(iter(cached.values()))
                if rec is not None:
                    rec.lookup(block_hash, group_id, cached.block_id)
                cached_block = [cached]
            else:
                cached_block = block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids)
            if not cached_block:
                num_contiguous_blocks = 0
                continue
            if num_contiguous_blocks == 0 and block_size != alignment_tokens:
                # A run must end where an aligned hit (after the EAGLE drop) would end.
                post_pop_blocks = i if use_eagle else i + 1
                if (post_pop_blocks * block_size) % alignment_tokens != 0:
                    continue
            for computed, cached in zip(computed_blocks, cached_block):
                computed[i] = cached
            num_contiguous_blocks += 1
            if num_contiguous_blocks >= num_contiguous_needed:
                for computed in computed_blocks:
                    del computed[i + num_contiguous_blocks :]
                return num_contiguous_blocks, True
        return num_contiguous_blocks, False

    def _cache_block_mask(
        self, num_cached_blocks: int, num_full_blocks: int, alignment_tokens: int
    ) -> list[bool] | None:
        """Cache only the last ``cdiv(sliding_window - 1, block_size)`` blocks of each
        ``alignment_tokens`` segment: only they can end an aligned hit's window.

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

        Example: sliding_window 4, 7 computed tokens: the next token (index 7) reads tokens
        4..7, so tokens 0..3 are skipped and the result is 4.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager.get_num_skipped_tokens

        Args:
            num_computed_tokens: Computed tokens (tokens).

        Returns:
            Skipped tokens (tokens).
        """
        return max(0, num_computed_tokens - self.sliding_window + 1)

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: the leading blocks are null blocks, so cascade attention does not apply."""
        return 0
