"""Lab ``radix_cache`` (stretch): the learner writes SGLang's RadixCache core: match_prefix
(splitting an edge where a match ends inside it), _split_node, insert, evict (least recently
used unlocked leaves; a parent left childless joins the candidates), inc_lock_ref and
dec_lock_ref.

SGLang is not vLLM: the expected decisions are SGLang 0.5.23's as kvlab.sglang makes them
(exact against SGLang 0.5.23's own RadixCache, tests/sglang): recorded workloads with page
size 1 shipped in ``kvlab/labs/data/radix.cbor.gz`` (``tests/labs/record_radix_fixtures.py``),
and fresh randomized workloads with page sizes 1, 2 and 4 (page size 1: kvlab.sglang decides;
above 1: kvlab's paged model, ``kvlab.labs.radix_model``, as kvlab.sglang has no pages;
tests/sglang/test_radix_lab_vs_sglang.py replays such workloads, page sizes 1 to 8, on SGLang
0.5.23's own RadixCache, call for call). The
learner's tree is compared after every call: the return value, every node's tokens and slots,
node_id, lock_ref and last_access_time, evictable_size_, protected_size_ and the pool's free
slots in order (the evicted slots, in eviction order, at its end).
"""

from __future__ import annotations

import random
from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, randomized
from kvlab.labs.patterns import same_divergence
from kvlab.labs.radix import RADIX_SOURCE, RadixSide, load_radix_recordings, record_radix_ops
from kvlab.labs.registry import Accepted, Lab, Misconception, Scenario, register

__all__ = ["LAB"]

METHODS = ("match_prefix", "insert", "evict", "inc_lock_ref", "dec_lock_ref")
NB12 = "12_misconceptions"
TREE = N_("3. \"The prefix cache is a radix tree\"")
SIDE_BY_SIDE = N_("The same workload on vLLM's cache and on a radix tree")


def _accept(value: Any) -> Accepted:
    return accept_class(value, "RadixCache", METHODS)


def _scenarios(seed: int) -> list[Scenario]:
    out = [Scenario(f"{RADIX_SOURCE} · {i}", RADIX_SOURCE, lambda rec=rec: rec)
           for i, rec in enumerate(load_radix_recordings())]  # fmt: skip
    r = random.Random(seed)
    for k, page_size in enumerate((1, 2, 4, 1, 2, 4)):
        cfg = {"pool_tokens": r.randint(3, 6) * page_size + r.randint(4, 8), "page_size": page_size}
        run_seed = r.randrange(2**31)
        out.append(randomized(f"page_size {page_size} · {k}",
                              lambda cfg=cfg, s=run_seed: record_radix_ops(RadixSide(cfg), s, 90)))
    return out


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    return RadixSide(rec.config, accepted.parts["RadixCache"])


def _reference_side(rec: Any) -> Any:
    return RadixSide(rec.config)


def _model(**flags: Any) -> Any:
    def matches(div: Any) -> bool:
        from kvlab.labs.radix_model import radix_model

        return same_divergence(div, lambda: RadixSide(div.recording.config, radix_model(**flags)))

    return matches


CATALOGUE = (
    Misconception("radix_cache.no_split_on_match", N_("a match may end inside an edge"),
                  N_("when the key leaves an edge part-way, match_prefix splits that edge and counts the matched head: the hit is every matching token, not only whole edges"),
                  NB12, SIDE_BY_SIDE, _model(split_on_match=False)),
    Misconception("radix_cache.split_mid_page", N_("edges are cut at page boundaries"),
                  N_("with page_size > 1 the tokens two keys share on an edge are rounded down to whole pages before comparing and splitting"),
                  NB12, TREE, _model(page_round=False)),
    Misconception("radix_cache.split_drops_lock", N_("a split node inherits the lock"),
                  N_("the node a split creates is on the paths of every request locked below it: it starts with the child's lock_ref (and its last_access_time)"),
                  NB12, SIDE_BY_SIDE, _model(split_keeps_lock=False)),
    Misconception("radix_cache.no_touch_on_match", N_("a match is an access"),
                  N_("match_prefix refreshes last_access_time on every node it passes, not only insert: a prefix that is read stays recent"),
                  NB12, SIDE_BY_SIDE, _model(touch_on_match=False)),
    Misconception("radix_cache.evict_by_creation", N_("eviction is least recently used, not oldest"),
                  N_("evict orders the candidate leaves by last_access_time (ties: node_id), not by when they were created"),
                  NB12, SIDE_BY_SIDE, _model(lru=False)),
    Misconception("radix_cache.ignores_lock_ref", N_("locked leaves are never evicted"),
                  N_("a leaf with lock_ref > 0 belongs to a running request: evict skips it, whatever its age"),
                  NB12, SIDE_BY_SIDE, _model(respect_lock=False)),
    Misconception("radix_cache.no_cascade", N_("a parent left without children becomes a leaf"),
                  N_("after evicting a leaf, its parent may have no child left: if it is not the root and not locked it joins the candidates, in LRU order"),
                  NB12, SIDE_BY_SIDE, _model(cascade=False)),
    Misconception("radix_cache.lock_node_only", N_("a lock covers the whole path"),
                  N_("inc_lock_ref and dec_lock_ref walk from the node up to the root: every ancestor's tokens are in use too"),
                  NB12, TREE, _model(lock_ancestors=False)),
)  # fmt: skip

LAB = register(Lab(
    name="radix_cache",
    title=N_("SGLang's RadixCache: match_prefix with splits, insert, LRU leaf eviction, lock_ref"),
    notebook="lab09_radix_cache",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("12_misconceptions",),
    reference_name="SGLang 0.5.23",
))  # fmt: skip
