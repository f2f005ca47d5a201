"""Predict-mode questions for a LiteTrace (no numpy): ``kvlab.viz.predict.quiz_points``' twin.

In the browser the player's predict mode asks before the same six kinds of decision as in
JupyterLab and exported pages (PREDICT_KINDS, ``kvlab.viz.predict_common``): popleft_n, lazy
eviction and lookup hits (here), the sliding window's null blocks, each turn of the hybrid fixed
point and preemption (``kvlab.playground.quiz_decisions``). This module only reads facts from
the playground's list-based trace: its columns, the state replayed to each question
(``_State``: free-queue order, block hashes, each request's blocks) and its calls (``_Calls``).
The questions (which events are decisions, rules, choices, shuffling, catalogue messages,
which points are asked) are built by the numpy-free code ``kvlab.viz.predict`` calls too and
the browser ships (``kvlab.viz.predict_cache_questions``, ``.predict_questions``,
``.predict_common``); tests/playground/test_equivalence.py checks that both give the same
points, in English and Chinese.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvlab.playground.events import LiteTrace
from kvlab.playground.quiz_decisions import FINDERS, MAKERS
from kvlab.trace.events import EventKind, decode_call, unpack_fixed_point
from kvlab.viz.predict_cache_questions import (
    Events,
    evict_question,
    find_cache_decisions,
    hit_question,
    popleft_question,
)
from kvlab.viz.predict_common import PREDICT_KINDS, QuizPoint, ask_points

__all__ = ["PREDICT_KINDS", "quiz_dicts"]

K = EventKind
_GROUP_BITS = 16


class _Calls:
    """Parents and call spans of a LiteTrace (``Trace.parent`` / ``Trace.call``)."""

    def __init__(self, trace: LiteTrace) -> None:
        n = len(trace)
        self.parent, self.end = [-1] * n, {}
        stack: list[int] = []
        for i, kind in enumerate(trace.kind):
            if kind == K.CALL_END:
                b = stack.pop() if stack else -1
                self.parent[i] = b
                if b >= 0:
                    self.end[b] = i
            else:
                self.parent[i] = stack[-1] if stack else -1
                if kind == K.CALL_BEGIN:
                    stack.append(i)
        self.trace = trace

    def calls(self, name: str) -> list[dict[str, Any]]:
        """Every call named ``name``, in order (``Trace.calls``)."""
        t = self.trace
        return [self.call_of(i) for i, k in enumerate(t.kind)
                if k == K.CALL_BEGIN and 0 <= t.group[i] < len(t.call_names)
                and t.call_names[t.group[i]] == name]  # fmt: skip

    def call_of(self, i: int) -> dict[str, Any] | None:
        """The call whose CALL_BEGIN is ``i``, else the innermost call holding event ``i``."""
        t = self.trace
        begin = i if t.kind[i] == K.CALL_BEGIN else self.parent[i]
        if begin < 0:
            return None
        end = self.end.get(begin, -1)
        cid = t.group[begin]
        name = t.call_names[cid] if 0 <= cid < len(t.call_names) else f"call#{cid}"
        request = t.request[begin]
        args = decode_call(name, t.a[begin], t.b[begin], t.payload_of(begin), False)
        result = {} if end < 0 else decode_call(name, t.a[end], t.b[end], t.payload_of(end), True)
        return {
            "begin": begin,
            "end": end,
            "name": name,
            "request": None if request < 0 else t.requests[request],
            "args": args,
            "result": result,
        }


class _State:
    """The free queue (head first), each block's key code (-1: no hash) and each request's
    blocks per group (request index -> block ids), replayed (``KVState``'s fields the questions
    read)."""

    def __init__(self, trace: LiteTrace) -> None:
        initial = trace.initial
        self.free_queue = dict.fromkeys(initial.free_queue)
        self.block_hash = list(initial.block_hash)
        self.null_block_id = initial.null_block_id
        self.req_to_blocks = [{r: list(b) for r, b in g.items()} for g in initial.req_to_blocks]

    def apply(self, t: LiteTrace, i: int) -> None:
        kind = t.kind[i]
        if kind == K.POPLEFT or kind == K.REMOVE:
            del self.free_queue[t.a[i]]
        elif kind == K.POPLEFT_N:
            for x in t.payload_of(i):
                del self.free_queue[x]
        elif kind == K.APPEND:
            self.free_queue[t.a[i]] = None
        elif kind == K.APPEND_N:
            for x in t.payload_of(i):
                self.free_queue[x] = None
        elif kind == K.BLOCK_STORED:
            p = t.payload_of(i)
            n = len(p) // 2
            for bid, h in zip(p[:n], p[n:], strict=True):
                self.block_hash[bid] = (h << _GROUP_BITS) | t.group[i]
        elif kind == K.BLOCK_REMOVED:
            self.block_hash[t.a[i]] = -1
        elif kind == K.ALL_BLOCKS_CLEARED:
            self.block_hash = [-1] * len(self.block_hash)
        elif kind == K.REQ_BLOCKS_ADDED:
            self.req_to_blocks[t.group[i]].setdefault(t.request[i], []).extend(t.payload_of(i))
        elif kind == K.REQ_BLOCKS_NULLED:
            blocks = self.req_to_blocks[t.group[i]][t.request[i]]
            for x in t.payload_of(i):
                blocks[x] = self.null_block_id
        elif kind == K.REQ_FREED:
            self.req_to_blocks[t.group[i]].pop(t.request[i], None)


def quiz_dicts(trace: LiteTrace, kinds: Iterable[str] = PREDICT_KINDS) -> list[dict[str, Any]]:
    """The predict mode's points of ``trace`` as the player reads them (``QuizPoint.to_dict``),
    ordered by ``reveal``, in the current language: ``quiz_points(trace, kinds)``'s.

    Args:
        trace: The playground's recorded trace.
        kinds: Kinds from PREDICT_KINDS (evict, fixed_point, hit, popleft, preempt, window).

    Raises:
        ValueError: If a kind is not one of PREDICT_KINDS.
    """
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in PREDICT_KINDS]
    if bad:
        raise ValueError(f"predict must hold kinds from {PREDICT_KINDS}, got {list(kinds)}")
    calls = _Calls(trace)
    events = Events(trace.kind, trace.group, trace.a, trace.b, trace.payload_of)
    found = find_cache_decisions(events, range(len(trace)), kinds, trace.call_names,
                                 calls.parent.__getitem__)  # fmt: skip
    for kind in (k for k in kinds if k in FINDERS):
        found += [(ask, reveal, kind) for ask, reveal in FINDERS[kind](trace, calls)]
    state = _State(trace)

    def replay(start: int, stop: int) -> None:
        for j in range(start, stop):
            state.apply(trace, j)

    def make(kind: str, ask: int, reveal: int) -> QuizPoint | None:
        if kind in MAKERS:
            return MAKERS[kind](trace, calls, state, ask, reveal)
        return _CACHE_MAKERS[kind](trace, calls, events, state, ask, reveal)

    def call_end(reveal: int) -> int:
        return calls.end.get(calls.parent[reveal], -1)

    return [p.to_dict() for p in ask_points(found, kinds, call_end, replay, make)]


# ---------------------------------------------------------------------- facts of a LiteTrace
def _popleft(
    t: LiteTrace, calls: _Calls, events: Events, state: _State, ask: int, reveal: int
) -> QuizPoint | None:
    call = calls.call_of(reveal) if calls.parent[reveal] >= 0 else None
    return popleft_question(events, ask, reveal, state.free_queue, state.block_hash,
                            call and (call["name"], call["request"]))  # fmt: skip


def _evict(
    t: LiteTrace, calls: _Calls, events: Events, state: _State, ask: int, reveal: int
) -> QuizPoint | None:
    return evict_question(events, ask, reveal, state.free_queue, state.block_hash,
                          t.hashes[t.b[reveal]][:4].hex())  # fmt: skip


def _hit(
    t: LiteTrace, calls: _Calls, events: Events, state: _State, ask: int, reveal: int
) -> QuizPoint | None:
    call = calls.call_of(reveal)
    begin, end = call["begin"], call["end"]
    turns = []
    for i in range(begin, (end if end >= 0 else len(t) - 1) + 1):
        if t.kind[i] == K.FIXED_POINT_ITERATED:
            hit_length_out, _reused, group_ids, _blocks = unpack_fixed_point(t.payload_of(i))
            turns.append((t.a[i], group_ids, t.b[i], hit_length_out))
    return hit_question(events, ask, reveal, call["request"], call["args"], call["result"],
                        t.config, turns)  # fmt: skip


_CACHE_MAKERS = {"popleft": _popleft, "evict": _evict, "hit": _hit}
