"""Lab ``allocate_slots_layout``: the learner writes KVCacheManager.allocate_slots.

The learner's method is put on a subclass of kvlab's KVCacheManager (the coordinator, the
managers and the pool are kvlab's): how many tokens need slots (computed, new hits, KV-connector
tokens, new, lookahead), the admission gate, the order of the stages, what is cached. Scheduler
workloads over every config family, with lookahead, ``full_sequence_must_fit`` and connector
tokens (delayed or not), are replayed and compared with vLLM 0.22.1 after every call.
"""

from __future__ import annotations

import inspect
from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, manager_scenarios, recorded
from kvlab.labs.patterns import same_divergence
from kvlab.labs.registry import Accepted, Lab, Misconception, register
from kvlab.labs.sides import ManagerSide

__all__ = ["LAB", "allocate_model"]

NB5 = "05_anatomy_of_allocate_slots"


def _accept(value: Any) -> Accepted:
    from kvlab.core import KVCacheManager

    if inspect.isfunction(value) and value.__name__ == "allocate_slots":
        value = type("KVCacheManager", (KVCacheManager,), {"allocate_slots": value})
    accepted = accept_class(value, "KVCacheManager", ("allocate_slots",))
    if not issubclass(accepted.parts["KVCacheManager"], KVCacheManager):
        raise ValueError("KVCacheManager must subclass kvlab.core.KVCacheManager (as in the skeleton)")
    return accepted


def _scenarios(seed: int) -> list:
    keep = ("full", "sw", "full+sw", "mixed:full4+sw8", "full+2sw", "chunked")
    out = recorded("manager", lambda rec: rec.config["family"] in keep and (rec.config["lookahead"]
                   or rec.config["must_fit"] or rec.config["external"] or rec.config["family"] != "full"))
    out += manager_scenarios(["full", "full+sw", "sw"], seed, 3, 45, external=True)
    return out


def _side(rec: Any, cls: Any) -> Any:
    return ManagerSide(rec.config, manager_cls=cls)


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    return _side(rec, accepted.parts["KVCacheManager"])


def _reference_side(rec: Any) -> Any:
    return ManagerSide(rec.config)


# ------------------------------------------------------------------ models of the mistakes
def allocate_model(*, cache_drafts: bool = False, lookahead: bool = True, gate: bool = True,
                   remove_first: bool = True, delay: bool = True,
                   check_first: bool = True, external: bool = True, count_hits: bool = True) -> Any:
    """kvlab's KVCacheManager whose allocate_slots makes one mistake (keyword = the vLLM way)."""
    from kvlab.core import KVCacheManager

    def allocate_slots(self, request, num_new_tokens, num_new_computed_tokens=0, new_computed_blocks=None,
                       num_lookahead_tokens=0, num_external_computed_tokens=0, delay_cache_blocks=False,
                       num_encoder_tokens=0, full_sequence_must_fit=False):  # fmt: skip
        c = self.coordinator
        hits = new_computed_blocks.blocks if new_computed_blocks is not None else self.empty_kv_cache_blocks.blocks
        ext = num_external_computed_tokens if external else 0
        local = request.num_computed_tokens + num_new_computed_tokens
        total = min(local + ext, self.max_model_len)
        if full_sequence_must_fit and gate:
            full = min(request.num_tokens, self.max_model_len)
            need = c.get_num_blocks_to_allocate(request.request_id, full, hits, num_encoder_tokens, total, full,
                                                apply_admission_cap=True)
            if need > self.block_pool.get_num_free_blocks():
                return None
        main = total + num_new_tokens
        slots = main + (num_lookahead_tokens if lookahead else 0)
        slots = min(slots, self.max_model_len)
        if not check_first and (hits is not self.empty_kv_cache_blocks.blocks or ext > 0):
            c.allocate_new_computed_blocks(request.request_id, hits, local, ext)
        if remove_first:
            c.remove_skipped_blocks(request.request_id, total)
        counted = hits if check_first and count_hits else self.empty_kv_cache_blocks.blocks
        need = c.get_num_blocks_to_allocate(request.request_id, slots, counted,
                                            num_encoder_tokens, local + ext, main)
        if need > self.block_pool.get_num_free_blocks():
            return None
        if not remove_first:
            c.remove_skipped_blocks(request.request_id, total)
        if check_first and (hits is not self.empty_kv_cache_blocks.blocks or ext > 0):
            c.allocate_new_computed_blocks(request.request_id, hits, local, ext)
        new_blocks = c.allocate_new_blocks(request.request_id, slots, main, num_encoder_tokens)
        if not self.enable_caching or (delay_cache_blocks and delay):
            return self.create_kv_cache_blocks(new_blocks)
        c.cache_blocks(request, slots if cache_drafts else min(total + num_new_tokens, request.num_tokens))
        return self.create_kv_cache_blocks(new_blocks)

    return type("KVCacheManager", (KVCacheManager,), {"allocate_slots": allocate_slots})


def _model(**flags: Any) -> Any:
    def matches(div: Any) -> bool:
        return same_divergence(div, lambda: _side(div.recording, allocate_model(**flags)))

    return matches


CATALOGUE = (
    Misconception("allocate_slots_layout.caches_drafts", N_("draft tokens are never cached"),
                  N_("lookahead slots hold draft tokens that may be rejected: cache full blocks only up to the computed and new tokens, and never past request.num_tokens"),
                  NB5, N_("2. Decode with lookahead slots"), _model(cache_drafts=True)),
    Misconception("allocate_slots_layout.no_lookahead", N_("lookahead tokens need slots too"),
                  N_("speculative decoding writes num_lookahead_tokens draft tokens after the new ones: the slots needed run to computed + new + lookahead"),
                  NB5, N_("2. Decode with lookahead slots"), _model(lookahead=False)),
    Misconception("allocate_slots_layout.no_admission_gate", N_("the admission gate: full_sequence_must_fit"),
                  N_("with full_sequence_must_fit a new request is refused unless its whole prompt fits (sliding windows counted at their per-request cap), before anything changes"),
                  NB5, N_("4. The admission gate: full_sequence_must_fit"), _model(gate=False)),
    Misconception("allocate_slots_layout.caches_delayed", N_("KV from elsewhere is cached when it has arrived"),
                  N_("with delay_cache_blocks the connector's KV arrives later: allocate the blocks but cache nothing now (the scheduler calls cache_blocks after the transfer)"),
                  NB5, N_("3. KV from elsewhere: an asynchronous load (P/D disaggregation)"), _model(delay=False)),
    Misconception("allocate_slots_layout.ignores_external", N_("connector tokens are computed tokens"),
                  N_("num_external_computed_tokens come after the hit: they count in the computed tokens, get blocks with the hit, and are cached with them"),
                  NB5, N_("3. KV from elsewhere: an asynchronous load (P/D disaggregation)"), _model(external=False)),
    Misconception("allocate_slots_layout.not_atomic", N_("a failure changes nothing"),
                  N_("check that the free blocks cover the new blocks and the evictable hits before attaching anything: a refused call (None) leaves the request and the pool as they were"),
                  NB5, N_("5. A failure changes nothing"), _model(check_first=False)),
    Misconception("allocate_slots_layout.remove_after_check", N_("out-of-window blocks go back first"),
                  N_("remove_skipped_blocks runs before the free blocks are counted: the blocks a sliding window no longer reads make room for this very call"),
                  "13_the_layers", N_("One allocate_slots, layer by layer"), _model(remove_first=False)),
    Misconception("allocate_slots_layout.hits_not_counted", N_("an evictable hit takes a free block too"),
                  N_("a hit block with ref_cnt 0 sits in the free queue; touching it takes it out, so the free blocks must cover the new blocks plus those hits (get_num_blocks_to_allocate with the hit blocks)"),
                  NB5, N_("1. A prefix hit, then a chunked prefill"), _model(count_hits=False)),
)  # fmt: skip

LAB = register(Lab(
    name="allocate_slots_layout",
    title=N_("KVCacheManager.allocate_slots: the token layout and the admission gate"),
    notebook="lab07_allocate_slots_layout",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("05_anatomy_of_allocate_slots", "13_the_layers"),
))  # fmt: skip
