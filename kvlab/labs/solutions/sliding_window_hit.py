"""Reference solution of lab ``sliding_window_hit``: the notebook's SlidingWindowManager cell.

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager (find_longest_cache_hit,
get_num_skipped_tokens, _cache_block_mask, get_num_common_prefix_blocks) and
SingleTypeKVCacheManager.remove_skipped_blocks.
"""

from __future__ import annotations

from kvlab.core import KVCacheBlock, SingleTypeKVCacheManager, SlidingWindowSpec


def cdiv(a: int, b: int) -> int:
    """Ceiling division (vllm.utils.math_utils.cdiv)."""
    return -(a // -b)


# --- notebook cell ---
class SlidingWindowManager(SingleTypeKVCacheManager):
    """Sliding-window attention: a token reads only the last ``sliding_window`` tokens.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager
    """

    def __init__(self, kv_cache_spec: SlidingWindowSpec, **kwargs) -> None:
        super().__init__(kv_cache_spec, **kwargs)
        self.sliding_window = kv_cache_spec.sliding_window

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length: int, kv_cache_group_ids: list[int], block_pool,
                               kv_cache_spec, use_eagle: bool, alignment_tokens: int,
                               dcp_world_size: int = 1, pcp_world_size: int = 1) -> tuple[list[KVCacheBlock], ...]:
        """The longest hit, at most ``max_length`` tokens, whose window is cached in every group.

        The next token reads the ``sliding_window - 1`` tokens before it, i.e. the last
        ``cdiv(sliding_window - 1, block_size)`` blocks of the hit (one more with EAGLE, which
        then drops the last block): search right to left, from block ``max_length // block_size
        - 1``, for that many contiguous cached blocks (``block_pool.get_cached_block``); a run
        may only end at a length that is a multiple of ``alignment_tokens`` (after the EAGLE drop).
        The blocks before the run are ``block_pool.null_block``; blocks after it are cut. With
        no such run, a shorter run that starts at block 0 is the hit (aligned). Returns one list
        per group id.
        """
        ### BEGIN SOLUTION
        sliding_window_contiguous_blocks = cdiv(kv_cache_spec.sliding_window - 1, kv_cache_spec.block_size)
        if use_eagle:
            sliding_window_contiguous_blocks += 1
        max_num_blocks = max_length // kv_cache_spec.block_size
        computed_blocks = tuple([block_pool.null_block] * max_num_blocks for _ in range(len(kv_cache_group_ids)))
        block_size = kv_cache_spec.block_size
        num_contiguous_blocks = 0
        match_found = False
        for i in range(max_num_blocks - 1, -1, -1):
            if cached_block := block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids):
                if num_contiguous_blocks == 0 and block_size != alignment_tokens:
                    post_pop_blocks = i if use_eagle else i + 1
                    if (post_pop_blocks * block_size) % alignment_tokens != 0:
                        continue
                for computed, cached in zip(computed_blocks, cached_block):
                    computed[i] = cached
                num_contiguous_blocks += 1
                if num_contiguous_blocks >= sliding_window_contiguous_blocks:
                    for computed in computed_blocks:
                        del computed[i + num_contiguous_blocks:]
                    match_found = True
                    break
            else:
                num_contiguous_blocks = 0
        if not match_found:
            for computed in computed_blocks:
                del computed[num_contiguous_blocks:]
            while block_size != alignment_tokens and len(computed_blocks[0]) * block_size % alignment_tokens != 0:
                for computed in computed_blocks:
                    computed.pop()
        if use_eagle and computed_blocks[0]:
            for computed in computed_blocks:
                computed.pop()
            while block_size != alignment_tokens and len(computed_blocks[0]) * block_size % alignment_tokens != 0:
                for computed in computed_blocks:
                    computed.pop()
        return computed_blocks
        ### END SOLUTION

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Leading tokens the next token's window no longer reads (tokens).

        With a window of 4 and 7 computed tokens, the next token (index 7) reads tokens 4..7:
        tokens 0..3 are skipped.
        """
        ### BEGIN SOLUTION
        return max(0, num_computed_tokens - self.sliding_window + 1)
        ### END SOLUTION

    def remove_skipped_blocks(self, request_id: str, total_computed_tokens: int) -> None:
        """Free the request's blocks that only hold skipped tokens; the null block takes their place.

        Walk back from the last fully skipped block (``self.req_to_blocks[request_id]``), stop at
        the first ``self._null_block`` (everything before it was removed earlier), and free the
        removed blocks with ``self.block_pool.free_blocks`` in that backward order.
        """
        ### BEGIN SOLUTION
        num_skipped_tokens = self.get_num_skipped_tokens(total_computed_tokens)
        if num_skipped_tokens <= 0:
            return
        blocks = self.req_to_blocks[request_id]
        num_skipped_blocks = min(num_skipped_tokens // self.block_size, len(blocks))
        removed_blocks = []
        for i in range(num_skipped_blocks - 1, -1, -1):
            if blocks[i] == self._null_block:
                break
            removed_blocks.append(blocks[i])
            blocks[i] = self._null_block
        self.block_pool.free_blocks(removed_blocks)
        ### END SOLUTION

    def _cache_block_mask(self, num_cached_blocks: int, num_full_blocks: int, alignment_tokens: int):
        """Given: in a hybrid model, cache only the blocks an aligned hit can end with."""
        per_segment = alignment_tokens // self.block_size
        tail = cdiv(self.sliding_window - 1, self.block_size)
        if tail >= per_segment:
            return None
        skip = per_segment - tail
        return [i % per_segment >= skip for i in range(num_cached_blocks, num_full_blocks)]

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Given: a window's leading blocks are null blocks, not a shared prefix."""
        return 0


SOLUTION = SlidingWindowManager
