"""Wrong allocate_slots, written as learners write them: one per catalogue entry.

Each is the reference's body with one change (``_allocate`` holds it, keyed by what changes).
"""
from __future__ import annotations

from kvlab.labs.solutions.allocate_slots_layout import KVCacheManager as Reference


def _allocate(self, request, num_new_tokens, num_new_computed_tokens=0, new_computed_blocks=None,
              num_lookahead_tokens=0, num_external_computed_tokens=0, delay_cache_blocks=False,
              num_encoder_tokens=0, full_sequence_must_fit=False, *, bug):
    hits = new_computed_blocks.blocks if new_computed_blocks is not None else self.empty_kv_cache_blocks.blocks
    ext = 0 if bug == "ignores_external" else num_external_computed_tokens
    local = request.num_computed_tokens + num_new_computed_tokens
    total = min(local + ext, self.max_model_len)
    if full_sequence_must_fit and bug != "no_admission_gate":
        full = min(request.num_tokens, self.max_model_len)
        if self.coordinator.get_num_blocks_to_allocate(request.request_id, full, hits, num_encoder_tokens, total,
                                                       full, apply_admission_cap=True) > self.block_pool.get_num_free_blocks():
            return None
    main = total + num_new_tokens
    slots = min(main + (0 if bug == "no_lookahead" else num_lookahead_tokens), self.max_model_len)
    attach = hits is not self.empty_kv_cache_blocks.blocks or ext > 0
    if bug == "not_atomic" and attach:
        self.coordinator.allocate_new_computed_blocks(request.request_id, hits, local, ext)
        hits = self.empty_kv_cache_blocks.blocks
    if bug != "remove_after_check":
        self.coordinator.remove_skipped_blocks(request.request_id, total)
    counted = self.empty_kv_cache_blocks.blocks if bug == "hits_not_counted" else hits
    if self.coordinator.get_num_blocks_to_allocate(request.request_id, slots, counted, num_encoder_tokens,
                                                   local + ext, main) > self.block_pool.get_num_free_blocks():
        return None
    if bug == "remove_after_check":
        self.coordinator.remove_skipped_blocks(request.request_id, total)
    if attach and bug != "not_atomic":
        self.coordinator.allocate_new_computed_blocks(request.request_id, hits, local, ext)
    new_blocks = self.coordinator.allocate_new_blocks(request.request_id, slots, main, num_encoder_tokens)
    if not self.enable_caching or (delay_cache_blocks and bug != "caches_delayed"):
        return self.create_kv_cache_blocks(new_blocks)
    upto = slots if bug == "caches_drafts" else min(total + num_new_tokens, request.num_tokens)
    self.coordinator.cache_blocks(request, upto)
    return self.create_kv_cache_blocks(new_blocks)


def _bug(name):
    def allocate_slots(self, request, num_new_tokens, *args, **kwargs):
        return _allocate(self, request, num_new_tokens, *args, bug=name, **kwargs)

    return type(f"KVCacheManager_{name}", (Reference,), {"allocate_slots": allocate_slots})


BUGS = {name: _bug(name) for name in ("caches_drafts", "no_lookahead", "no_admission_gate", "caches_delayed",
                                      "ignores_external", "not_atomic", "remove_after_check", "hits_not_counted")}
