"""Lab ``hybrid_fixed_point``: the learner writes HybridKVCacheCoordinator.find_longest_cache_hit.

The learner's method is put on a subclass of kvlab's HybridKVCacheCoordinator (the constructor,
the attention groups and the LCM are kvlab's), which ``get_kv_cache_coordinator`` builds for every
hybrid model; scheduler workloads over full attention with one or two sliding windows, mixed block
sizes, chunked local attention, two full-attention specs and EAGLE are replayed and compared with
vLLM 0.22.1 after every call. Mistakes are recognised by replaying with a model of each.
"""

from __future__ import annotations

import inspect
from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, manager_scenarios, recorded
from kvlab.labs.lab_full_attention_hit import _touches
from kvlab.labs.patterns import same_divergence
from kvlab.labs.plug import plugged
from kvlab.labs.registry import Accepted, Lab, Misconception, register
from kvlab.labs.sides import ManagerSide

__all__ = ["LAB", "fixed_point_model"]

FAMILIES = ("full+sw", "full+2sw", "mixed:full8+sw4", "mixed:full4+sw8", "full+full(heads)", "full+chunked")
NB7, NB4 = "07_hybrid_models_fixed_point", "04_block_hashes_and_prefix_caching"


def _accept(value: Any) -> Accepted:
    from kvlab.core import HybridKVCacheCoordinator

    if inspect.isfunction(value) and value.__name__ == "find_longest_cache_hit":
        value = type("HybridKVCacheCoordinator", (HybridKVCacheCoordinator,), {"find_longest_cache_hit": value})
    accepted = accept_class(value, "HybridKVCacheCoordinator", ("find_longest_cache_hit",))
    if not issubclass(accepted.parts["HybridKVCacheCoordinator"], HybridKVCacheCoordinator):
        raise ValueError("HybridKVCacheCoordinator must subclass kvlab.core.HybridKVCacheCoordinator (as in the skeleton)")
    return accepted


def _scenarios(seed: int) -> list:
    out = recorded("manager", lambda rec: rec.config["family"] in FAMILIES)
    out += manager_scenarios(["full+2sw", "mixed:full4+sw8", "full+sw"], seed, 3, 45)
    return out


def _side(rec: Any, cls: Any) -> Any:
    return ManagerSide(rec.config, plug=lambda: plugged(hybrid_cls=cls))


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    return _side(rec, accepted.parts["HybridKVCacheCoordinator"])


def _reference_side(rec: Any) -> Any:
    return ManagerSide(rec.config)


# ------------------------------------------------------------------ models of the mistakes
def fixed_point_model(*, iterate: bool = True, cut_full: bool = True, coarse_hashes: bool = True,
                      eagle_extra: bool = True, independent: bool = False) -> Any:
    """kvlab's HybridKVCacheCoordinator whose lookup makes one mistake.

    Args:
        iterate: False = one round, whatever the number of attention groups.
        cut_full: False = the full-attention hit is not cut to the final length.
        coarse_hashes: False = every group gets the hashes at hash_block_size.
        eagle_extra: False = an EAGLE group searches no further than the candidate.
        independent: True = each group searches the whole max length; the hit is the shortest.
    """
    from kvlab.core import BlockHashListWithBlockSize, FullAttentionSpec, HybridKVCacheCoordinator

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):  # noqa: C901 - one loop, as vLLM's
        def hashes(spec: Any) -> Any:
            if spec.block_size == self.hash_block_size or not coarse_hashes:
                return block_hashes
            return BlockHashListWithBlockSize(block_hashes, self.hash_block_size, spec.block_size)

        by_group: list = [None] * len(self.kv_cache_config.kv_cache_groups)
        hit_length = max_cache_hit_length
        simple = len(self.attention_groups) == 2 and isinstance(self.attention_groups[0][0], FullAttentionSpec)
        verified: set[int] = set()
        while True:
            curr = hit_length
            for idx, (spec, group_ids, manager_cls) in enumerate(self.attention_groups):
                if isinstance(spec, FullAttentionSpec) and by_group[group_ids[0]] is not None:
                    curr = curr // spec.block_size * spec.block_size
                    continue
                use_eagle = idx in self.eagle_attn_group_indices and idx not in verified
                limit = max_cache_hit_length if independent else curr
                if use_eagle and eagle_extra:
                    limit = min(limit + spec.block_size, max_cache_hit_length)
                blocks = manager_cls.find_longest_cache_hit(
                    block_hashes=hashes(spec), max_length=limit, kv_cache_group_ids=group_ids,
                    block_pool=self.block_pool, kv_cache_spec=spec, use_eagle=use_eagle,
                    alignment_tokens=self.lcm_block_size)  # fmt: skip
                new = len(blocks[0]) * spec.block_size
                if use_eagle:
                    verified.add(idx)
                elif new < curr:
                    verified.clear()
                curr = min(curr, new) if independent else new
                for g, b in zip(group_ids, blocks):
                    by_group[g] = b
            if curr >= hit_length or independent:
                hit_length = min(hit_length, curr)
                break
            hit_length = curr
            if simple or not iterate:
                break
        for spec, group_ids, _ in self.attention_groups if independent else self.attention_groups[:1]:
            if cut_full or independent:
                for g in group_ids:
                    if by_group[g] is not None:
                        del by_group[g][hit_length // spec.block_size:]
        return tuple(b if b is not None else [] for b in by_group), hit_length

    return type("HybridKVCacheCoordinator", (HybridKVCacheCoordinator,), {"find_longest_cache_hit": find_longest_cache_hit})


def _model(**flags: Any) -> Any:
    def matches(div: Any) -> bool:
        return div.op == "get_computed_blocks" and same_divergence(
            div, lambda: _side(div.recording, fixed_point_model(**flags)))

    return matches


CATALOGUE = (
    Misconception("hybrid_fixed_point.touches_on_lookup", N_("the lookup takes no reference"),
                  N_("get_computed_blocks only finds blocks: their ref_cnt and their place in the free queue stay as they are until allocate_slots touches them"),
                  "12_misconceptions", N_("6. \"The lookup takes a reference on the blocks it finds\""), _touches),
    Misconception("hybrid_fixed_point.independent_min", N_("the groups agree on one candidate, step by step"),
                  N_("a sliding window's hit for a shorter length needs other blocks than its hit for the full length: each group searches within the current candidate, not the whole prompt, and the shortest answer is not enough"),
                  NB7, N_("Gemma-3-like: full attention + sliding window"), _model(independent=True)),
    Misconception("hybrid_fixed_point.one_round", N_("repeat until no group shortens the candidate"),
                  N_("with three or more attention groups a later group can shorten the candidate after an earlier one accepted it: go round again until a whole round changes nothing"),
                  NB7, N_("Two window sizes: a second round"), _model(iterate=False)),
    Misconception("hybrid_fixed_point.full_not_cut", N_("cut the full-attention hit to the final length"),
                  N_("full attention is searched once, at the longest candidate; when another group shortened the hit, its block lists must be cut to the final hit length"),
                  NB7, N_("Gemma-3-like: full attention + sliding window"), _model(cut_full=False)),
    Misconception("hybrid_fixed_point.hashes_per_block_size", N_("each group looks up hashes at its own block size"),
                  N_("request.block_hashes are at hash_block_size; a group with bigger blocks needs them joined (BlockHashListWithBlockSize)"),
                  NB7, N_("LCM alignment with mixed block sizes"), _model(coarse_hashes=False)),
    Misconception("hybrid_fixed_point.eagle_extra", N_("an EAGLE group searches one block further"),
                  N_("the EAGLE group drops its last matched block, so it searches up to one block past the candidate (capped at max_cache_hit_length) to still cover it"),
                  NB4, N_("EAGLE: the last matched block is given back"), _model(eagle_extra=False)),
)  # fmt: skip

LAB = register(Lab(
    name="hybrid_fixed_point",
    title=N_("HybridKVCacheCoordinator.find_longest_cache_hit: the fixed point over groups"),
    notebook="lab06_hybrid_fixed_point",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("07_hybrid_models_fixed_point",),
))  # fmt: skip
