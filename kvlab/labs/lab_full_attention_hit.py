"""Lab ``full_attention_hit``: the learner writes FullAttentionManager.find_longest_cache_hit.

The learner's classmethod is put on a subclass of kvlab's FullAttentionManager (everything else
is kvlab's), which the coordinators build for every full-attention group; scheduler workloads
over full attention alone, with sliding windows or chunked local attention beside it (the LCM
alignment), two full-attention specs and EAGLE are replayed and compared with vLLM 0.22.1 after
every call. Mistakes are recognised by replaying the scenario with a model of each mistake.
"""

from __future__ import annotations

import inspect
from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, manager_scenarios, recorded
from kvlab.labs.patterns import ref_cnt_change, same_divergence
from kvlab.labs.plug import plugged
from kvlab.labs.registry import Accepted, Lab, Misconception, register
from kvlab.labs.sides import ManagerSide

__all__ = ["LAB", "lookup_model"]

FAMILIES = ("full", "full+sw", "mixed:full4+sw8", "mixed:full8+sw4", "full+full(heads)", "full+chunked")
NB4, NB7, NB12 = "04_block_hashes_and_prefix_caching", "07_hybrid_models_fixed_point", "12_misconceptions"


def _accept(value: Any) -> Accepted:
    from kvlab.core import FullAttentionManager

    if inspect.isfunction(value) and value.__name__ == "find_longest_cache_hit":
        value = type("FullAttentionManager", (FullAttentionManager,), {"find_longest_cache_hit": classmethod(value)})
    accepted = accept_class(value, "FullAttentionManager", ("find_longest_cache_hit",))
    cls = accepted.parts["FullAttentionManager"]
    if not issubclass(cls, FullAttentionManager):
        cls = type("FullAttentionManager", (cls, FullAttentionManager), {})
    return Accepted({"FullAttentionManager": cls})


def _scenarios(seed: int) -> list:
    out = recorded("manager", lambda rec: rec.config["family"] in FAMILIES)
    out += manager_scenarios(["full", "mixed:full4+sw8", "full+sw"], seed, 3, 45)
    return out


def _side(rec: Any, cls: Any) -> Any:
    from kvlab.core import FullAttentionSpec

    return ManagerSide(rec.config, plug=lambda: plugged(managers={FullAttentionSpec: cls}))


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    return _side(rec, accepted.parts["FullAttentionManager"])


def _reference_side(rec: Any) -> Any:
    return ManagerSide(rec.config)


# ------------------------------------------------------------------ models of the mistakes
def lookup_model(*, stop_at_miss: bool = True, eagle: str = "drop", ceil: bool = False) -> Any:
    """A FullAttentionManager whose lookup makes one mistake (kvlab's, everything else).

    Args:
        stop_at_miss: False = skip a missing block and keep looking.
        eagle: ``"drop"`` (vLLM), ``"keep"`` (never drop) or ``"always"`` (drop without EAGLE).
        ceil: True = ``cdiv(max_length, block_size)`` blocks at most (one too many).
    """
    from kvlab.core import FullAttentionManager

    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):  # fmt: skip
        computed = tuple([] for _ in kv_cache_group_ids)
        bs = kv_cache_spec.block_size
        n = -(-max_length // bs) if ceil else max_length // bs
        for block_hash in list(block_hashes)[:n]:
            hit = block_pool.get_cached_block(block_hash, kv_cache_group_ids)
            if hit:
                for c, b in zip(computed, hit):
                    c.append(b)
            elif stop_at_miss:
                break
        if computed[0] and (eagle == "always" or (eagle == "drop" and use_eagle)):
            for c in computed:
                c.pop()
        while bs != alignment_tokens and len(computed[0]) * bs % alignment_tokens:
            for c in computed:
                c.pop()
        return computed

    return type("FullAttentionManager", (FullAttentionManager,), {"find_longest_cache_hit": classmethod(find_longest_cache_hit)})


def _model(**flags: Any) -> Any:
    def matches(div: Any) -> bool:
        return div.op == "get_computed_blocks" and same_divergence(div, lambda: _side(div.recording, lookup_model(**flags)))

    return matches


def _flat_list(div: Any) -> bool:
    """kvlab's coordinator read ``hit[0]`` of a flat list: a block (no len) or nothing at all."""
    error = div.error or ""
    return div.field == "exception" and div.op == "get_computed_blocks" and (
        "'KVCacheBlock' has no len()" in error or error.startswith("IndexError: list index out of range"))


def _touches(div: Any) -> bool:
    change = ref_cnt_change(div)
    if div.op != "get_computed_blocks" or change is None:
        return False
    _, want, got = change
    return any(g is not None and w is not None and g > w for w, g in zip(want, got))


CATALOGUE = (
    Misconception("full_attention_hit.touches_on_lookup", N_("the lookup takes no reference"),
                  N_("get_computed_blocks only finds blocks: their ref_cnt and their place in the free queue stay as they are until allocate_slots touches them (the scheduler may not admit the request at all)"),
                  NB12, N_("6. \"The lookup takes a reference on the blocks it finds\""), _touches),
    Misconception("full_attention_hit.continues_past_miss", N_("the first miss ends the hit"),
                  N_("the hashes are chained: a block after a missing one belongs to another prefix's chain as far as this request is concerned, so the lookup stops at the first miss"),
                  NB4, N_("The prefix cache at work"), _model(stop_at_miss=False)),
    Misconception("full_attention_hit.no_eagle_drop", N_("EAGLE gives the last matched block back"),
                  N_("with use_eagle the draft head needs the hidden states of the last matched block, so that block is recomputed: drop it from the hit"),
                  NB4, N_("EAGLE: the last matched block is given back"), _model(eagle="keep")),
    Misconception("full_attention_hit.eagle_always", N_("EAGLE gives the last matched block back"),
                  N_("only a lookup with use_eagle drops its last block; without EAGLE the whole match is the hit"),
                  NB4, N_("EAGLE: the last matched block is given back"), _model(eagle="always")),
    Misconception("full_attention_hit.ceil_max_length", N_("a hit is whole blocks within max_length"),
                  N_("at most max_length tokens may hit (the prompt's last token is always recomputed), and a hit is whole blocks: round the number of blocks down, never up"),
                  NB4, N_("The prefix cache at work"), _model(ceil=True)),
    Misconception("full_attention_hit.one_list_per_group", N_("one list of blocks per group"),
                  N_("the lookup returns a tuple with one list per id in kv_cache_group_ids (groups with the same spec are searched together), not one flat list of blocks"),
                  NB7, N_("Two window sizes: a second round"), _flat_list),
)  # fmt: skip

LAB = register(Lab(
    name="full_attention_hit",
    title=N_("FullAttentionManager.find_longest_cache_hit: the full-attention prefix hit"),
    notebook="lab04_full_attention_hit",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("04_block_hashes_and_prefix_caching", "07_hybrid_models_fixed_point"),
))  # fmt: skip
