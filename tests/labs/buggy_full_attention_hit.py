"""Wrong full-attention lookups, written as learners write them: one per catalogue entry."""
from __future__ import annotations

from kvlab.core import SingleTypeKVCacheManager


def _lookup(block_hashes, n, group_ids, pool, skip_misses=False):
    out = tuple([] for _ in group_ids)
    for h in list(block_hashes)[:n]:
        hit = pool.get_cached_block(h, group_ids)
        if not hit:
            if skip_misses:
                continue
            break
        for o, b in zip(out, hit):
            o.append(b)
    return out


def _align(out, bs, alignment):
    while len(out[0]) * bs % alignment:
        for o in out:
            o.pop()
    return out


class TouchesOnLookup(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        bs = kv_cache_spec.block_size
        out = _lookup(block_hashes, max_length // bs, kv_cache_group_ids, block_pool)
        if use_eagle and out[0]:
            for o in out:
                o.pop()
        out = _align(out, bs, alignment_tokens)
        block_pool.touch(out[0])  # "the hit takes a reference"
        return out


class SkipsMisses(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        bs = kv_cache_spec.block_size
        out = _lookup(block_hashes, max_length // bs, kv_cache_group_ids, block_pool, skip_misses=True)
        if use_eagle and out[0]:
            for o in out:
                o.pop()
        return _align(out, bs, alignment_tokens)


class ForgetsEagle(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        bs = kv_cache_spec.block_size
        return _align(_lookup(block_hashes, max_length // bs, kv_cache_group_ids, block_pool), bs, alignment_tokens)


class DropsAlways(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        bs = kv_cache_spec.block_size
        out = _lookup(block_hashes, max_length // bs, kv_cache_group_ids, block_pool)
        if out[0]:
            for o in out:
                o.pop()
        return _align(out, bs, alignment_tokens)


class RoundsUp(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        bs = kv_cache_spec.block_size
        out = _lookup(block_hashes, (max_length + bs - 1) // bs, kv_cache_group_ids, block_pool)
        if use_eagle and out[0]:
            for o in out:
                o.pop()
        return _align(out, bs, alignment_tokens)


class FlatList(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        bs = kv_cache_spec.block_size
        out = _align(_lookup(block_hashes, max_length // bs, kv_cache_group_ids, block_pool), bs, alignment_tokens)
        if use_eagle and out[0]:
            out[0].pop()
        return out[0]  # "the hit is a list of blocks"


BUGS = {"touches_on_lookup": TouchesOnLookup, "continues_past_miss": SkipsMisses, "no_eagle_drop": ForgetsEagle,
        "eagle_always": DropsAlways, "ceil_max_length": RoundsUp, "one_list_per_group": FlatList}
