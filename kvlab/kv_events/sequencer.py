"""Put a numbered KV-event stream back in order: duplicates dropped, gaps filled by replay.

vLLM's ``ZmqEventPublisher`` numbers its batches 0, 1, 2, ... (the 8-byte seq frame) and keeps
the last ``buffer_steps`` of them for replay. ``KVEventSequencer`` is the bookkeeping a
subscriber needs on top of that, with no socket in it: it takes live messages in arrival order
and returns the batches to hand on, in seq order, asking a replay function for what a gap left
out and counting in ``StreamHealth`` what could not be had. ``KVEventSubscriber`` runs one
over its ZMQ sockets.

A replay reply may itself skip batches (vLLM 0.22.1's ROUTER drops what exceeds its send
high-water mark of 1000 messages; 0.33.0 raises it to ``2 * (buffer_steps + 1)``): the sequencer
asks again from the first skipped seq, as long as each round brings something new, so only
batches the publisher no longer buffers are counted missing.

A publisher that restarts numbers from 0 again. With a ``digest`` function, a seq below the next
expected one is a duplicate only if it was handed on recently (the last ``recent`` seqs) with
the same digest; otherwise the publisher restarted: ``health.num_restarts`` counts it, the seqs
start over at 0 and what the new publisher sent before this message is asked for on its replay
socket. (A restarted publisher whose first message seen is at or past the next expected seq
cannot be told from a gap by seq numbers alone.) Its cache starts empty: a consumer rebuilding
the cached set clears it when ``num_restarts`` grows.

Mirrors: the consumer side of vllm/distributed/kv_events.py::ZmqEventPublisher
(_publisher_thread numbering, _service_replay); vLLM ships no consumer.

Examples:
    >>> buffered = {0: "b0", 1: "b1", 2: "b2", 3: "b3"}
    >>> s = KVEventSequencer(replay=lambda first: [(q, buffered[q]) for q in range(first, 4)])
    >>> s.push(0, "b0"), s.push(3, "b3"), s.push(1, "b1")
    ([(0, 'b0')], [(1, 'b1'), (2, 'b2'), (3, 'b3')], [])
    >>> s.health.num_gaps, s.health.num_recovered, s.health.num_duplicates
    (1, 2, 1)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KVEventSequencer", "StreamHealth"]

Replay = Callable[[int], Iterable[tuple[int, Any]]]
"""first seq -> every (seq, item) the publisher still buffers from it on (item None: garbage)."""


@dataclass
class StreamHealth:
    """What happened to a subscribed stream (counts of messages or batches).

    Attributes:
        num_received: Messages read from the live socket.
        num_delivered: Batches handed on, in seq order (live and replayed).
        num_duplicates: Live messages whose seq was already handed on (dropped), including live
            copies of batches a catch-up replay handed on first.
        num_gaps: Times the live seq jumped ahead of the next expected one.
        num_recovered: Batches recovered through the replay socket.
        num_missing: Batches lost for good (no replay socket, or no longer buffered).
        num_garbage: Messages that were not [topic, 8-byte seq, valid payload] (skipped).
        num_replay_requests: Replay requests sent.
        num_restarts: Times the publisher restarted (its seq went back; see the module).
        missing: Lost seq ranges, (first, last) inclusive (numbered by the publisher that was
            running then; ``restarts`` says where the numbering started over).
        restarts: Per restart, (the seq expected next, the seq that arrived).
        last_error: Why the last garbage message was refused.
    """

    num_received: int = 0
    num_delivered: int = 0
    num_duplicates: int = 0
    num_gaps: int = 0
    num_recovered: int = 0
    num_missing: int = 0
    num_garbage: int = 0
    num_replay_requests: int = 0
    num_restarts: int = 0
    missing: list[tuple[int, int]] = field(default_factory=list)
    restarts: list[tuple[int, int]] = field(default_factory=list)
    last_error: str | None = None

    @property
    def ok(self) -> bool:
        """Nothing lost and nothing refused: the rebuilt cache matches the publisher's."""
        return self.num_missing == 0 and self.num_garbage == 0


class KVEventSequencer:
    """Orders live (seq, item) messages; see the module docstring.

    Args:
        start_seq: The first seq wanted (``catch_up`` replays from it), or None to start at the
            first message seen.
        replay: The publisher's replay (see ``Replay``), or None if it has none.
        digest: item -> a value equal for equal payloads (e.g. ``hash`` of the payload bytes);
            None: every seq below the next expected one is a duplicate (no restart detection).
        recent: How many handed-on seqs keep their digest (duplicates older than that read as a
            restart; vLLM's replay buffer holds 10,000 batches by default).
        max_replay_rounds: Most replay requests for one gap (each must bring something new).

    Attributes:
        next_seq: The next seq expected (None before the first message).
        health: The counts (num_duplicates, num_gaps, num_recovered, num_missing, missing,
            num_restarts).
    """

    def __init__(self, start_seq: int | None = None, replay: Replay | None = None,
                 digest: Callable[[Any], Any] | None = None, recent: int = 16384,
                 max_replay_rounds: int = 64) -> None:  # fmt: skip
        self.next_seq = start_seq
        self.replay = replay
        self.digest = digest
        self.recent = recent
        self.max_replay_rounds = max_replay_rounds
        self.health = StreamHealth()
        self._recent: OrderedDict[int, Any] = OrderedDict()  # NOTE: seq -> digest, bounded

    def _seen(self, seq: int, item: Any) -> None:
        if self.digest is None:
            return
        self._recent[seq] = None if item is None else self.digest(item)
        if len(self._recent) > self.recent:
            self._recent.popitem(last=False)

    def _is_duplicate(self, seq: int, item: Any) -> bool:
        if self.digest is None or item is None:
            return True
        if seq not in self._recent:
            return False
        old = self._recent[seq]
        return old is None or old == self.digest(item)

    def push(self, seq: int, item: Any) -> list[tuple[int, Any]]:
        """One live message; item None = its payload was garbage (the seq is used up).

        Returns:
            (seq, item) to hand on, in seq order: the batches a gap before it left out (from
            the replay), then it; nothing for a duplicate.
        """
        out: list[tuple[int, Any]] = []
        if self.next_seq is not None:
            if seq < self.next_seq:
                if self._is_duplicate(seq, item):
                    self.health.num_duplicates += 1
                    return out
                self.health.num_restarts += 1
                self.health.restarts.append((self.next_seq, seq))
                self._recent.clear()
                self.next_seq = 0
            if seq > self.next_seq:
                self.health.num_gaps += 1
                out = self.fill(self.next_seq, seq)
        self.next_seq = seq + 1
        self._seen(seq, item)
        if item is not None:
            out.append((seq, item))
        return out

    def catch_up(self) -> list[tuple[int, Any]]:
        """Everything still buffered from start_seq on (a late join); nothing without replay."""
        if self.replay is None or self.next_seq is None:
            return []
        return self.fill(self.next_seq, None)

    def _replayed(self, first: int, stop: int | None) -> dict[int, Any]:
        """seq -> item the publisher replays in [first, stop). Seqs below the lowest one a reply
        holds are no longer buffered; a hole above it was buffered and lost on the way (vLLM
        0.22.1's ROUTER drops past its send high-water mark), so it is asked for again, from
        that hole, while each round brings something new."""
        got: dict[int, Any] = {}
        ask = first
        for _ in range(self.max_replay_rounds if self.replay is not None else 0):
            reply = [(seq, item) for seq, item in self.replay(ask)  # type: ignore[misc]
                     if seq >= first and (stop is None or seq < stop)]  # fmt: skip
            new = 0
            for seq, item in reply:  # NOTE: seqs below the one asked for: a publisher's error
                if seq not in got:
                    got[seq], new = item, new + 1
            if not new:
                return got
            hole = self._first_hole(got, max(ask, min(seq for seq, _ in reply)), stop)
            if hole is None:
                return got
            ask = hole
        return got

    @staticmethod
    def _first_hole(got: dict[int, Any], start: int, stop: int | None) -> int | None:
        """The lowest seq in [start, top] not in ``got`` (top: stop - 1, else the highest got)."""
        expected = start
        for seq in sorted(s for s in got if s >= start):
            if seq > expected:
                return expected
            expected = seq + 1
        return expected if stop is not None and expected < stop else None

    def fill(self, first: int, stop: int | None) -> list[tuple[int, Any]]:
        """Replay seqs [first, stop) (stop None: all that is buffered); count what is missing.

        NOTE: work is linear in what the publisher replays, never in the gap's size (a seq
        frame can jump by 2**63).
        """
        got = self._replayed(first, stop)
        last = max(got, default=first - 1) if stop is None else stop - 1
        out, expected = [], first
        for seq in sorted(got):
            if seq > expected:
                self._lost(expected, seq - 1)
            self._seen(seq, got[seq])
            if got[seq] is not None:
                self.health.num_recovered += 1
                out.append((seq, got[seq]))
            expected = seq + 1
        if expected <= last:
            self._lost(expected, last)
        self.next_seq = last + 1
        return out

    def _lost(self, first: int, last: int) -> None:
        self.health.num_missing += last - first + 1
        self.health.missing.append((first, last))
