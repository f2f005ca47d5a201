"""Wrong SlidingWindowManagers, written as learners write them: one per catalogue entry."""
from __future__ import annotations

from kvlab.labs.solutions.sliding_window_hit import SlidingWindowManager as Reference
from kvlab.labs.solutions.sliding_window_hit import cdiv


def _search(cls, block_hashes, max_length, group_ids, pool, spec, use_eagle, alignment, *, need_blocks=None,
            reset=True, pad=True):
    bs = spec.block_size
    need = need_blocks if need_blocks is not None else cdiv(spec.sliding_window - 1, bs) + bool(use_eagle)
    n = max_length // bs
    out = tuple([pool.null_block] * n for _ in group_ids)
    run, found = 0, False
    for i in range(n - 1, -1, -1):
        hit = pool.get_cached_block(block_hashes[i], group_ids)
        if hit:
            if run == 0 and bs != alignment and ((i if use_eagle else i + 1) * bs) % alignment:
                continue
            for o, b in zip(out, hit):
                o[i] = b
            run += 1
            if run >= need:
                for o in out:
                    del o[i + run:]
                found = True
                break
        elif reset:
            run = 0
    if not found:
        for o in out:
            del o[run:]
        while bs != alignment and len(out[0]) * bs % alignment:
            for o in out:
                o.pop()
    if use_eagle and out[0]:
        for o in out:
            o.pop()
        while bs != alignment and len(out[0]) * bs % alignment:
            for o in out:
                o.pop()
    if not pad:
        out = tuple([b for b in o if not b.is_null] for o in out)
    return out


class WholeWindow(Reference):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        need = cdiv(kv_cache_spec.sliding_window, kv_cache_spec.block_size) + bool(use_eagle)
        return _search(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec, use_eagle,
                       alignment_tokens, need_blocks=need)


class SkipsOneTooFew(Reference):
    def get_num_skipped_tokens(self, num_computed_tokens):
        return max(0, num_computed_tokens - self.sliding_window)


class LeftToRight(Reference):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        bs = kv_cache_spec.block_size
        out = tuple([] for _ in kv_cache_group_ids)
        for h in block_hashes[: max_length // bs]:
            hit = block_pool.get_cached_block(h, kv_cache_group_ids)
            if not hit:
                break
            for o, b in zip(out, hit):
                o.append(b)
        if use_eagle and out[0]:
            for o in out:
                o.pop()
        while len(out[0]) * bs % alignment_tokens:
            for o in out:
                o.pop()
        return out


class NoNullPadding(Reference):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        return _search(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec, use_eagle,
                       alignment_tokens, pad=False)


class KeepsCountingAfterMiss(Reference):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        return _search(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec, use_eagle,
                       alignment_tokens, reset=False)


class NoEagleExtra(Reference):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        need = cdiv(kv_cache_spec.sliding_window - 1, kv_cache_spec.block_size)
        return _search(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec, use_eagle,
                       alignment_tokens, need_blocks=need)


class FreesForward(Reference):
    def remove_skipped_blocks(self, request_id, total_computed_tokens):
        skipped = self.get_num_skipped_tokens(total_computed_tokens)
        if skipped <= 0:
            return
        blocks = self.req_to_blocks[request_id]
        removed = []
        for i in range(min(skipped // self.block_size, len(blocks))):
            if blocks[i] != self._null_block:
                removed.append(blocks[i])
                blocks[i] = self._null_block
        self.block_pool.free_blocks(removed)


class TouchesHits(Reference):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        out = super().find_longest_cache_hit(block_hashes, max_length, kv_cache_group_ids, block_pool,
                                             kv_cache_spec, use_eagle, alignment_tokens)
        block_pool.touch([b for b in out[0] if not b.is_null])
        return out


BUGS = {"window_off_by_one": WholeWindow, "skipped_off_by_one": SkipsOneTooFew, "left_to_right": LeftToRight,
        "no_null_padding": NoNullPadding, "no_reset_on_miss": KeepsCountingAfterMiss,
        "no_eagle_extra": NoEagleExtra, "remove_forward": FreesForward, "touches_on_lookup": TouchesHits}
