"""Predict-mode kinds for the decisions of notebooks 6-8: the window, the fixed point, preemption.

Each finder returns ``(ask, reveal)`` pairs for one kind; each maker turns the state replayed to
``ask`` into a :class:`~kvlab.viz.predict_common.QuizPoint` (or None when nothing could be
wrong). The truth always comes from the trace.

===========  =====================================  ========================  ======================
kind         decision (revealed by the event)       ask (cursor shown)        truth
===========  =====================================  ========================  ======================
window       which logical blocks of a sliding-     before the                the REQ_BLOCKS_NULLED
             window / chunked-local group become    allocate_slots call       indices (none: the
             null blocks (remove_skipped_blocks)                              call's CALL_END)
fixed_point  the hit length one attention type      the previous turn (or     the FIXED_POINT_
             accepts in a fixed-point iteration     the call's CALL_BEGIN)    ITERATED's hit_length_
                                                                              out
preempt      the request the scheduler preempts     the refused allocate_     the request of the
             after a refused allocate_slots         slots' CALL_END           ``free`` right after
===========  =====================================  ========================  ======================

A window question is asked for every allocate_slots of a request that already has tokens out of
the window (``get_num_skipped_tokens > 0``), so "none" is a possible answer.

The facts are read here from a Trace and the state replayed to ``ask``; the questions themselves
(rules, wrong answers, messages) are built by ``kvlab.viz.predict_questions``, which the browser
playground's twin (``kvlab.playground.quiz_decisions``) calls too.
"""

from __future__ import annotations

from typing import Any

from kvlab.trace import EventKind, KVState
from kvlab.viz.calls import fixed_point_rows
from kvlab.viz.predict_common import QuizPoint
from kvlab.viz.predict_questions import (
    fixed_point_question,
    is_preemption,
    num_computed,
    num_skipped,
    preempt_question,
    window_group,
    window_question,
)

__all__ = ["FINDERS", "MAKERS"]

K = EventKind


# ---------------------------------------------------------------------- window
def _find_window(trace: Any) -> list[tuple[int, int]]:
    found = window_group(trace.config)
    if found is None:
        return []
    gid, group = found
    pairs = []
    for call in trace.calls("allocate_slots"):
        if num_skipped(group, num_computed(call.args)) == 0 or call.end < 0:
            continue
        nulled = [int(i) for i in trace.filter(K.REQ_BLOCKS_NULLED, start=call.begin,
                                               stop=call.end).tolist()
                  if int(trace.cols.group[i]) == gid]  # fmt: skip
        pairs.append((call.begin - 1, nulled[0] if nulled else call.end))
    return pairs


def _window(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    gid, group = window_group(trace.config)
    call = trace.call(reveal)
    request = trace.cols.request[call.begin]
    held = state.req_to_blocks[gid].get(int(request), [])
    # NOTE: remove_skipped_blocks walks back from the last skipped block: indices come reversed.
    nulled = trace.cols.kind[reveal] == K.REQ_BLOCKS_NULLED
    truth = sorted(trace[reveal].fields["indices"]) if nulled else []
    return window_question(ask, reveal, call.request, num_computed(call.args), group, held,
                           state.null_block_id, truth)  # fmt: skip


# ---------------------------------------------------------------------- fixed_point
def _find_fixed_point(trace: Any) -> list[tuple[int, int]]:
    pairs = []
    for call in trace.calls("get_computed_blocks"):
        previous = call.begin
        for row in fixed_point_rows(trace, call):
            pairs.append((previous, row.seq))
            previous = row.seq
    return pairs


def _fixed_point(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    call = trace.call(reveal)
    row = next(r for r in fixed_point_rows(trace, call) if r.seq == reveal)
    return fixed_point_question(ask, reveal, call.request, trace.config, row.iteration,
                                row.kv_cache_group_ids, row.hit_length_in, row.hit_length_out,
                                row.reused)  # fmt: skip


# ---------------------------------------------------------------------- preempt
def _find_preempt(trace: Any) -> list[tuple[int, int]]:
    """A ``free`` right after a running request's refused allocate_slots: a preemption
    (``is_preemption``)."""
    pairs = []
    for call in trace.calls("free"):
        before = call.begin - 1
        if before < 0 or trace.cols.kind[before] != K.CALL_END or call.end < 0:
            continue
        refused = trace.call(before)
        if is_preemption(refused.name, refused.args, refused.result):
            pairs.append((before, call.end))
    return pairs


def _preempt(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    refused, victim = trace.call(ask), trace.call(reveal).request
    blocks = state.req_to_blocks[0] if state.req_to_blocks else {}
    held = {trace.tables.request_id(c): blocks[c] for c in blocks}
    held.pop(None, None)
    need = int(refused.result.get("num_blocks_to_allocate", 0))
    return preempt_question(ask, reveal, refused.request, victim, held, need, len(state.free_queue))


FINDERS = {"window": _find_window, "fixed_point": _find_fixed_point, "preempt": _find_preempt}
"""kind -> finder(trace) -> [(ask, reveal)]."""
MAKERS = {"window": _window, "fixed_point": _fixed_point, "preempt": _preempt}
"""kind -> maker(trace, state at ask, ask, reveal) -> QuizPoint | None."""
