"""Stepping through a trace like a debugger: into, over a call, out of it, back, by kind.

A cursor is an event index ``i`` in [-1, len(trace)): the state right after event ``i``
(-1 = the initial state). The widget's JavaScript (``static/player.js``, ``NAV``) implements
the same rules; ``tests/viz`` checks that both give the same index everywhere.

==========  ==================================================================================
move        target from cursor ``i``
==========  ==================================================================================
into        ``i + 1``
over        ``i + 1``; when that is a CALL_BEGIN, its CALL_END (the whole call in one step)
out         the CALL_END of the innermost call containing event ``i + 1`` (a CALL_BEGIN
            belongs to the call around it, as in ``Trace.parent``); none: ``into``
back        ``i - 1``
back_over   ``i - 1``; when event ``i`` is a CALL_END, the event before its CALL_BEGIN
next_kind   the first event after ``i`` of a kind (``i`` itself when there is none)
prev_kind   the last event before ``i`` of a kind (``i`` itself when there is none)
==========  ==================================================================================

Moves clamp to [-1, len(trace) - 1]; a call the trace ends inside has no CALL_END, and
``over`` / ``out`` then step into it.

Examples:
    >>> nav = Navigator(trace)                       # doctest: +SKIP
    >>> nav.over(0)  # event 1 opens get_computed_blocks (1..3)   # doctest: +SKIP
    3
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvlab.trace import EventKind

__all__ = ["MOVES", "Navigator"]

K = EventKind

MOVES = ("into", "over", "out", "back", "back_over")
"""Moves that take only the cursor (next_kind / prev_kind also take a kind)."""


class Navigator:
    """Cursor moves over one trace (precomputes each call's matching CALL_BEGIN / CALL_END).

    Args:
        trace: A kvlab.trace.Trace.
    """

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        self.num_events = len(trace)
        kinds = trace.cols.kind
        self._kinds = kinds
        self._end_of: dict[int, int] = {}
        self._begin_of: dict[int, int] = {}
        for call in trace.calls():
            if call.end >= 0:
                self._end_of[call.begin] = call.end
                self._begin_of[call.end] = call.begin
        self._by_kind: dict[int, np.ndarray] = {}

    def _check(self, i: int) -> int:
        if not -1 <= i < self.num_events:
            raise IndexError(f"cursor {i} is outside [-1, {self.num_events})")
        return int(i)

    def _clamp(self, i: int) -> int:
        return max(-1, min(i, self.num_events - 1))

    def move(self, name: str, i: int) -> int:
        """Apply the move called ``name`` (one of MOVES) to cursor ``i``.

        Raises:
            ValueError: If ``name`` is not a move.
            IndexError: If ``i`` is not in [-1, len(trace)).
        """
        if name not in MOVES:
            raise ValueError(f"unknown move {name!r}; moves are {MOVES}")
        return getattr(self, name)(i)

    def into(self, i: int) -> int:
        """One event forward."""
        return self._clamp(self._check(i) + 1)

    def over(self, i: int) -> int:
        """One event forward, or over the whole call that the next event opens."""
        j = self.into(i)
        if j > i and self._kinds[j] == K.CALL_BEGIN:
            return self._end_of.get(j, j)
        return j

    def out(self, i: int) -> int:
        """To the CALL_END of the innermost call containing the next event; outside every call,
        stays at ``i`` (there is nothing to step out of)."""
        j = self.into(i)
        if j == i:
            return i
        if self._kinds[j] == K.CALL_END:
            return j
        begin = self.trace.parent(j)
        return self._end_of.get(begin, j) if begin >= 0 else i

    def back(self, i: int) -> int:
        """One event backward."""
        return self._clamp(self._check(i) - 1)

    def back_over(self, i: int) -> int:
        """One event backward, or back over the whole call that event ``i`` closes."""
        self._check(i)
        if i >= 0 and self._kinds[i] == K.CALL_END and i in self._begin_of:
            return self._clamp(self._begin_of[i] - 1)
        return self.back(i)

    def _rows(self, kind: EventKind | int | str) -> np.ndarray:
        k = _kind(kind)
        if k not in self._by_kind:
            self._by_kind[k] = np.flatnonzero(self._kinds == k)
        return self._by_kind[k]

    def next_kind(self, i: int, kind: EventKind | int | str) -> int:
        """The first event after ``i`` of ``kind`` (``i`` when there is none)."""
        rows = self._rows(kind)
        j = int(np.searchsorted(rows, self._check(i), side="right"))
        return int(rows[j]) if j < len(rows) else i

    def prev_kind(self, i: int, kind: EventKind | int | str) -> int:
        """The last event before ``i`` of ``kind`` (``i`` when there is none)."""
        rows = self._rows(kind)
        j = int(np.searchsorted(rows, self._check(i), side="left")) - 1
        return int(rows[j]) if j >= 0 else i


def _kind(kind: EventKind | int | str) -> int:
    """An EventKind from a member, its value or its name."""
    try:
        return int(EventKind[kind] if isinstance(kind, str) else EventKind(kind))
    except (KeyError, ValueError):
        names = ", ".join(k.name for k in EventKind)
        raise ValueError(f"unknown event kind {kind!r}; kinds are {names}") from None
