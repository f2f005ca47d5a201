"""Wrong hybrid fixed points, written as learners write them: one per catalogue entry."""
from __future__ import annotations

from kvlab.core import BlockHashListWithBlockSize, FullAttentionSpec
from kvlab.labs.solutions.hybrid_fixed_point import HybridKVCacheCoordinator as Reference


def _hashes(self, block_hashes, spec):
    if spec.block_size == self.hash_block_size:
        return block_hashes
    return BlockHashListWithBlockSize(block_hashes, self.hash_block_size, spec.block_size)


class ShortestOfIndependentHits(Reference):
    """Every group looks up the whole prompt; the hit is the shortest of them."""

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        by_group = [[] for _ in self.kv_cache_config.kv_cache_groups]
        hit = max_cache_hit_length
        for idx, (spec, group_ids, manager_cls) in enumerate(self.attention_groups):
            blocks = manager_cls.find_longest_cache_hit(
                block_hashes=_hashes(self, block_hashes, spec), max_length=max_cache_hit_length,
                kv_cache_group_ids=group_ids, block_pool=self.block_pool, kv_cache_spec=spec,
                use_eagle=idx in self.eagle_attn_group_indices, alignment_tokens=self.lcm_block_size)
            hit = min(hit, len(blocks[0]) * spec.block_size)
            for g, b in zip(group_ids, blocks):
                by_group[g] = b
        for spec, group_ids, _ in self.attention_groups:
            for g in group_ids:
                del by_group[g][hit // spec.block_size:]
        return tuple(by_group), hit


class OneRound(Reference):
    """Each group once, in order: no second round."""

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        by_group = [[] for _ in self.kv_cache_config.kv_cache_groups]
        curr = max_cache_hit_length
        verified = set()
        for idx, (spec, group_ids, manager_cls) in enumerate(self.attention_groups):
            use_eagle = idx in self.eagle_attn_group_indices and idx not in verified
            limit = min(curr + spec.block_size, max_cache_hit_length) if use_eagle else curr
            blocks = manager_cls.find_longest_cache_hit(
                block_hashes=_hashes(self, block_hashes, spec), max_length=limit, kv_cache_group_ids=group_ids,
                block_pool=self.block_pool, kv_cache_spec=spec, use_eagle=use_eagle,
                alignment_tokens=self.lcm_block_size)
            curr = len(blocks[0]) * spec.block_size
            for g, b in zip(group_ids, blocks):
                by_group[g] = b
        spec, group_ids, _ = self.attention_groups[0]
        for g in group_ids:
            del by_group[g][curr // spec.block_size:]
        return tuple(by_group), curr


class FullNotCut(Reference):
    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        blocks, hit = super().find_longest_cache_hit(block_hashes, max_cache_hit_length)
        spec, group_ids, manager_cls = self.attention_groups[0]
        if isinstance(spec, FullAttentionSpec):  # "the full-attention hit was already found": keep it whole
            full = manager_cls.find_longest_cache_hit(
                block_hashes=_hashes(self, block_hashes, spec), max_length=max_cache_hit_length,
                kv_cache_group_ids=group_ids, block_pool=self.block_pool, kv_cache_spec=spec,
                use_eagle=0 in self.eagle_attn_group_indices, alignment_tokens=self.lcm_block_size)
            blocks = tuple(full[group_ids.index(g)] if g in group_ids else b for g, b in enumerate(blocks))
        return blocks, hit


def _fixed_point(self, block_hashes, max_cache_hit_length, *, eagle_further=True, join_hashes=True):
    by_group = [None] * len(self.kv_cache_config.kv_cache_groups)
    hit = max_cache_hit_length
    simple = len(self.attention_groups) == 2 and isinstance(self.attention_groups[0][0], FullAttentionSpec)
    verified = set()
    while True:
        curr = hit
        for idx, (spec, group_ids, manager_cls) in enumerate(self.attention_groups):
            if isinstance(spec, FullAttentionSpec) and by_group[group_ids[0]] is not None:
                curr = curr // spec.block_size * spec.block_size
                continue
            use_eagle = idx in self.eagle_attn_group_indices and idx not in verified
            limit = min(curr + spec.block_size, max_cache_hit_length) if use_eagle and eagle_further else curr
            blocks = manager_cls.find_longest_cache_hit(
                block_hashes=_hashes(self, block_hashes, spec) if join_hashes else block_hashes,
                max_length=limit, kv_cache_group_ids=group_ids, block_pool=self.block_pool,
                kv_cache_spec=spec, use_eagle=use_eagle, alignment_tokens=self.lcm_block_size)
            new = len(blocks[0]) * spec.block_size
            if use_eagle:
                verified.add(idx)
            elif new < curr:
                verified.clear()
            curr = new
            for g, b in zip(group_ids, blocks):
                by_group[g] = b
        if curr >= hit:
            break
        hit = curr
        if simple:
            break
    spec, group_ids, _ = self.attention_groups[0]
    if isinstance(spec, FullAttentionSpec):
        for g in group_ids:
            del by_group[g][hit // spec.block_size:]
    return tuple(b if b is not None else [] for b in by_group), hit


class SameHashesForAll(Reference):
    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        return _fixed_point(self, block_hashes, max_cache_hit_length, join_hashes=False)


class EagleNoFurther(Reference):
    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        return _fixed_point(self, block_hashes, max_cache_hit_length, eagle_further=False)


class TouchesHits(Reference):
    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        blocks, hit = super().find_longest_cache_hit(block_hashes, max_cache_hit_length)
        for group in blocks:
            self.block_pool.touch([b for b in group if not b.is_null])
        return blocks, hit


BUGS = {"independent_min": ShortestOfIndependentHits, "one_round": OneRound, "full_not_cut": FullNotCut,
        "hashes_per_block_size": SameHashesForAll, "eagle_extra": EagleNoFurther,
        "touches_on_lookup": TouchesHits}
