"""Predict, then reveal: quiz points the trace player asks before a decision is shown.

For each decision of a chosen kind, ``quiz_points`` derives from the trace (and the state
replayed up to that moment) a question, 2-4 choices (the truth and plausible wrong answers
drawn from the same state), the index of the right one and a one-line explanation in vLLM's
terms, in the current language (``kvlab.i18n``: the player computes them inside
``use_language(lang)``; identifiers stay vLLM's). The player's JavaScript
(``static/predict.js``) stops a forward step at ``ask``, shows the question, and moves to
``reveal`` once answered: no kernel needed, so the mode works in JupyterLab, in an
``export_html`` page and on the static site alike.

==========  =====================================  =========================  ====================
kind        decision (revealed by the event)       ask (cursor shown)         truth
==========  =====================================  =========================  ====================
popleft     blocks taken from the free queue       the event before           the event's
            (POPLEFT / POPLEFT_N)                                             block_ids
evict       first cached block to lose its         get_new_blocks'            the event's
            block_hash in get_new_blocks (its      POPLEFT_N                  block_id
            first BLOCK_REMOVED after POPLEFT_N)
hit         get_computed_blocks' hit length        the event before the       the CALL_END's
            (its CALL_END)                         call's CALL_BEGIN          num_new_computed_
                                                                              tokens
==========  =====================================  =========================  ====================

vLLM's get_new_blocks pops its blocks first (POPLEFT_N), then walks them in popleft order:
each one that still holds a block_hash is evicted (BLOCK_REMOVED) before its ref_cnt is raised
(GET_NEW_BLOCKS, merged for consecutive blocks). So an evict question may span a GET_NEW_BLOCKS
(the blocks before the first cached one); the answer skips it. Evictions made by
``evict_blocks`` (the scheduler invalidating blocks, not the free queue's LRU order) are not
asked: their block ids are the call's arguments.

``window``, ``fixed_point`` and ``preempt`` (the sliding window's null blocks, one turn of the
hybrid fixed point, the request the scheduler preempts) are in ``predict_decisions.py``. When
both ``hit`` and ``fixed_point`` are asked, a hybrid lookup is asked turn by turn (fixed_point),
not as a whole (hit); any other point whose [ask, reveal] window overlaps an earlier one is
dropped, so the player never has two questions open.

This module reads the facts of each decision from a Trace; the questions themselves (which
events are decisions, rules, wrong answers, messages) are built by numpy-free code the browser
playground's twin (``kvlab.playground.quiz``) calls too: ``predict_cache_questions`` (popleft,
evict, hit), ``predict_questions`` (window, fixed_point, preempt) and ``predict_common``.

Examples:
    >>> points = quiz_points(trace, ("popleft",))          # doctest: +SKIP
    >>> p = points[0]; p.question, p.choices, p.choices[p.answer]   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvlab.trace import KVState
from kvlab.trace.replay import replay_into
from kvlab.viz.calls import fixed_point_rows
from kvlab.viz.predict_cache_questions import (
    EVENT_KINDS,
    Events,
    evict_question,
    find_cache_decisions,
    hit_question,
    popleft_question,
)
from kvlab.viz.predict_common import PREDICT_KINDS, QuizPoint, ask_points
from kvlab.viz.predict_decisions import FINDERS, MAKERS

__all__ = ["PREDICT_KINDS", "QuizPoint", "check_predict_kinds", "quiz_points"]


def check_predict_kinds(kinds: Iterable[str] | str | None) -> tuple[str, ...]:
    """Validate the kinds asked for (None or () = none).

    Raises:
        TypeError: If ``kinds`` is a bare string (a list of kinds is needed).
        ValueError: If ``kinds`` holds an unknown or repeated kind.
    """
    if kinds is None:
        return ()
    if isinstance(kinds, str):
        raise TypeError(f"predict must be a list of kinds from {PREDICT_KINDS}, got {kinds!r}")
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in PREDICT_KINDS]
    if bad or len(set(kinds)) != len(kinds):
        raise ValueError(
            f"predict must hold distinct kinds from {PREDICT_KINDS}, got {list(kinds)}"
        )
    return kinds


def quiz_points(trace: Any, kinds: Iterable[str] = PREDICT_KINDS) -> list[QuizPoint]:
    """The quiz points of ``trace`` for the decision ``kinds``, ordered by ``reveal``.

    A decision with only one possible answer (popleft_n taking the whole one-block queue, an
    eviction with one candidate) is not asked.

    Args:
        trace: A kvlab.trace.Trace.
        kinds: Kinds from ``PREDICT_KINDS``.

    Raises:
        TypeError: If ``kinds`` is a bare string.
        ValueError: If a kind is unknown or repeated.
    """
    kinds = check_predict_kinds(kinds)
    events = Events(trace.cols.kind, trace.cols.group, trace.cols.a, trace.cols.b, trace.payload)
    candidates = trace.filter([k for k, name in EVENT_KINDS.items() if name in kinds]).tolist()
    found = find_cache_decisions(events, candidates, kinds, trace.call_names, trace.parent)
    for kind in (k for k in kinds if k in FINDERS):
        found += [(ask, reveal, kind) for ask, reveal in FINDERS[kind](trace)]
    state = trace.initial_state.copy()

    def replay(start: int, stop: int) -> None:
        replay_into(state, trace.cols, start, stop)

    def make(kind: str, ask: int, reveal: int) -> QuizPoint | None:
        if kind in MAKERS:
            return MAKERS[kind](trace, state, ask, reveal)
        return _CACHE_MAKERS[kind](trace, events, state, ask, reveal)

    return ask_points(found, kinds, lambda reveal: trace.call(reveal).end, replay, make)


# ---------------------------------------------------------------------- facts of a Trace
def _popleft(trace: Any, events: Events, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    call = trace.call(reveal) if trace.parent(reveal) >= 0 else None
    return popleft_question(events, ask, reveal, state.free_queue, state.block_hash,
                            call and (call.name, call.request))  # fmt: skip


def _evict(trace: Any, events: Events, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    return evict_question(events, ask, reveal, state.free_queue, state.block_hash,
                          trace[reveal]["hash"])  # fmt: skip


def _hit(trace: Any, events: Events, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    call = trace.call(reveal)
    turns = [(r.iteration, r.kv_cache_group_ids, r.hit_length_in, r.hit_length_out)
             for r in fixed_point_rows(trace, call)]  # fmt: skip
    return hit_question(events, ask, reveal, call.request, call.args, call.result, trace.config,
                        turns)  # fmt: skip


_CACHE_MAKERS = {"popleft": _popleft, "evict": _evict, "hit": _hit}
