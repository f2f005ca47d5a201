"""The window, fixed_point and preempt questions for a LiteTrace: ``predict_decisions``' twin.

Each finder returns ``(ask, reveal)`` pairs for one kind, at the same events as
``kvlab.viz.predict_decisions`` (see its table); each maker reads the facts of one decision from
the list-based trace and the state replayed to ``ask`` (``kvlab.playground.quiz._State``) and
hands them to the numpy-free builders the notebooks' player uses too
(``kvlab.viz.predict_questions``), so the questions, choices, shuffles and messages are the same.
``calls`` is the trace's call index (``kvlab.playground.quiz._Calls``: ``calls(name)``,
``call_of(i)``, ``parent``); a call is a dict with begin, end, name, request, args and result.
"""

from __future__ import annotations

from typing import Any

from kvlab.playground.events import LiteTrace
from kvlab.trace.events import EventKind, unpack_fixed_point
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
def _find_window(t: LiteTrace, calls: Any) -> list[tuple[int, int]]:
    found = window_group(t.config)
    if found is None:
        return []
    gid, group = found
    pairs = []
    for call in calls.calls("allocate_slots"):
        begin, end = call["begin"], call["end"]
        if num_skipped(group, num_computed(call["args"])) == 0 or end < 0:
            continue
        nulled = (i for i in range(begin, end)
                  if t.kind[i] == K.REQ_BLOCKS_NULLED and t.group[i] == gid)  # fmt: skip
        pairs.append((begin - 1, next(nulled, end)))
    return pairs


def _window(t: LiteTrace, calls: Any, state: Any, ask: int, reveal: int) -> QuizPoint | None:
    gid, group = window_group(t.config)
    call = calls.call_of(reveal)
    held = state.req_to_blocks[gid].get(t.request[call["begin"]], [])
    # NOTE: remove_skipped_blocks walks back from the last skipped block: indices come reversed.
    truth = sorted(t.payload_of(reveal)) if t.kind[reveal] == K.REQ_BLOCKS_NULLED else []
    return window_question(ask, reveal, call["request"], num_computed(call["args"]), group, held,
                           state.null_block_id, truth)  # fmt: skip


# ---------------------------------------------------------------------- fixed_point
def _find_fixed_point(t: LiteTrace, calls: Any) -> list[tuple[int, int]]:
    pairs = []
    for call in calls.calls("get_computed_blocks"):
        previous, stop = call["begin"], call["end"] if call["end"] >= 0 else len(t) - 1
        for i in range(call["begin"], stop + 1):
            if t.kind[i] == K.FIXED_POINT_ITERATED:
                pairs.append((previous, i))
                previous = i
    return pairs


def _fixed_point(t: LiteTrace, calls: Any, state: Any, ask: int, reveal: int) -> QuizPoint | None:
    hit_length_out, reused, group_ids, _blocks = unpack_fixed_point(t.payload_of(reveal))
    request = calls.call_of(reveal)["request"]
    return fixed_point_question(ask, reveal, request, t.config, t.a[reveal], group_ids,
                                t.b[reveal], hit_length_out, reused)  # fmt: skip


# ---------------------------------------------------------------------- preempt
def _find_preempt(t: LiteTrace, calls: Any) -> list[tuple[int, int]]:
    pairs = []
    for call in calls.calls("free"):
        before = call["begin"] - 1
        if before < 0 or t.kind[before] != K.CALL_END or call["end"] < 0:
            continue
        refused = calls.call_of(before)
        if refused and is_preemption(refused["name"], refused["args"], refused["result"]):
            pairs.append((before, call["end"]))
    return pairs


def _preempt(t: LiteTrace, calls: Any, state: Any, ask: int, reveal: int) -> QuizPoint | None:
    refused, victim = calls.call_of(ask), calls.call_of(reveal)["request"]
    blocks = state.req_to_blocks[0] if state.req_to_blocks else {}
    held = {t.requests[c]: blocks[c] for c in blocks if c >= 0}
    need, free = int(refused["result"].get("num_blocks_to_allocate", 0)), len(state.free_queue)
    return preempt_question(ask, reveal, refused["request"], victim, held, need, free)


FINDERS = {"window": _find_window, "fixed_point": _find_fixed_point, "preempt": _find_preempt}
"""kind -> finder(trace, calls) -> [(ask, reveal)]."""
MAKERS = {"window": _window, "fixed_point": _fixed_point, "preempt": _preempt}
"""kind -> maker(trace, calls, state at ask, ask, reveal) -> QuizPoint | None."""
