"""Reference solution of lab ``allocate_slots_layout``: the notebook's KVCacheManager cell.

Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots
"""

from __future__ import annotations

import kvlab.core
from kvlab.core import KVCacheBlocks, Request

# --- notebook cell ---
class KVCacheManager(kvlab.core.KVCacheManager):
    """The scheduler's door to the KV cache (kvlab's, but allocate_slots).

    Given by kvlab's class: ``self.coordinator`` (``get_num_blocks_to_allocate``,
    ``remove_skipped_blocks``, ``allocate_new_computed_blocks``, ``allocate_new_blocks``,
    ``cache_blocks``), ``self.block_pool``, ``self.max_model_len``, ``self.enable_caching``,
    ``self.empty_kv_cache_blocks`` and ``self.create_kv_cache_blocks``.

    Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager
    """

    def allocate_slots(self, request: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: KVCacheBlocks | None = None, num_lookahead_tokens: int = 0,
                       num_external_computed_tokens: int = 0, delay_cache_blocks: bool = False,
                       num_encoder_tokens: int = 0, full_sequence_must_fit: bool = False) -> KVCacheBlocks | None:
        """Make room for the request's next tokens; None (and nothing changed) if the pool cannot.

        Token positions, left to right::

            |<- comp ->|<- new_comp ->|<- ext_comp ->|<--- new --->|<- lookahead ->|
            comp = request.num_computed_tokens, new_comp = num_new_computed_tokens (the hit),
            ext_comp = num_external_computed_tokens, new = num_new_tokens

        1. total computed = comp + new_comp + ext_comp, at most max_model_len.
        2. With ``full_sequence_must_fit``: refuse unless the whole request (at most
           max_model_len tokens) fits, counted with ``apply_admission_cap=True``.
        3. Slots are needed up to total computed + new + lookahead, at most max_model_len.
        4. Remove the out-of-window blocks first (``remove_skipped_blocks``, kept even if the
           call then fails), then refuse unless the free blocks cover what the groups need
           (``get_num_blocks_to_allocate``).
        5. Attach the hit (and blocks for ext_comp) when there is one, then allocate the new blocks.
        6. Unless caching is off or ``delay_cache_blocks``: cache the full blocks up to total
           computed + new, at most ``request.num_tokens`` (drafts may be rejected, never cached).
        """
        ### BEGIN SOLUTION
        if num_new_tokens == 0 and num_external_computed_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0 when there are no external computed tokens")
        if new_computed_blocks is not None:
            new_computed_block_list = new_computed_blocks.blocks
        else:
            new_computed_block_list = self.empty_kv_cache_blocks.blocks
        num_local_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        total_computed_tokens = min(num_local_computed_tokens + num_external_computed_tokens, self.max_model_len)
        if full_sequence_must_fit:
            full_num_tokens = min(request.num_tokens, self.max_model_len)
            num_blocks_to_allocate = self.coordinator.get_num_blocks_to_allocate(
                request_id=request.request_id, num_tokens=full_num_tokens,
                new_computed_blocks=new_computed_block_list, num_encoder_tokens=num_encoder_tokens,
                total_computed_tokens=total_computed_tokens, num_tokens_main_model=full_num_tokens,
                apply_admission_cap=True)
            if num_blocks_to_allocate > self.block_pool.get_num_free_blocks():
                return None
        num_tokens_main_model = total_computed_tokens + num_new_tokens
        num_tokens_need_slot = min(num_tokens_main_model + num_lookahead_tokens, self.max_model_len)
        self.coordinator.remove_skipped_blocks(request.request_id, total_computed_tokens)
        num_blocks_to_allocate = self.coordinator.get_num_blocks_to_allocate(
            request_id=request.request_id, num_tokens=num_tokens_need_slot,
            new_computed_blocks=new_computed_block_list, num_encoder_tokens=num_encoder_tokens,
            total_computed_tokens=num_local_computed_tokens + num_external_computed_tokens,
            num_tokens_main_model=num_tokens_main_model)
        if num_blocks_to_allocate > self.block_pool.get_num_free_blocks():
            return None
        if new_computed_block_list is not self.empty_kv_cache_blocks.blocks or num_external_computed_tokens > 0:
            self.coordinator.allocate_new_computed_blocks(
                request_id=request.request_id, new_computed_blocks=new_computed_block_list,
                num_local_computed_tokens=num_local_computed_tokens,
                num_external_computed_tokens=num_external_computed_tokens)
        new_blocks = self.coordinator.allocate_new_blocks(
            request.request_id, num_tokens_need_slot, num_tokens_main_model, num_encoder_tokens)
        if not self.enable_caching or delay_cache_blocks:
            return self.create_kv_cache_blocks(new_blocks)
        num_tokens_to_cache = min(total_computed_tokens + num_new_tokens, request.num_tokens)
        self.coordinator.cache_blocks(request, num_tokens_to_cache)
        return self.create_kv_cache_blocks(new_blocks)
        ### END SOLUTION


SOLUTION = KVCacheManager
