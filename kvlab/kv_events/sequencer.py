"""Put a numbered KV-event stream back in order: duplicates dropped, gaps filled by replay.

vLLM's ``ZmqEventPublisher`` numbers its batches 0, 1, 2, ... (the 8-byte seq frame) and keeps
the last ``buffer_steps`` of them for replay. ``KVEventSequencer`` is the bookkeeping a
subscriber needs on top of that, with no socket in it: it takes live messages in arrival order
and returns the batches to hand on, in seq order, asking a replay function for what a gap left
out and counting in ``StreamHealth`` what could not be had. ``KVEventSubscriber`` runs one
over its ZMQ sockets.

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
        missing: Lost seq ranges, (first, last) inclusive.
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
    missing: list[tuple[int, int]] = field(default_factory=list)
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

    Attributes:
        next_seq: The next seq expected (None before the first message).
        health: The counts (num_duplicates, num_gaps, num_recovered, num_missing, missing).
    """

    def __init__(self, start_seq: int | None = None, replay: Replay | None = None) -> None:
        self.next_seq = start_seq
        self.replay = replay
        self.health = StreamHealth()

    def push(self, seq: int, item: Any) -> list[tuple[int, Any]]:
        """One live message; item None = its payload was garbage (the seq is used up).

        Returns:
            (seq, item) to hand on, in seq order: the batches a gap before it left out (from
            the replay), then it; nothing for a duplicate.
        """
        out: list[tuple[int, Any]] = []
        if self.next_seq is not None:
            if seq < self.next_seq:
                self.health.num_duplicates += 1
                return out
            if seq > self.next_seq:
                self.health.num_gaps += 1
                out = self.fill(self.next_seq, seq)
        self.next_seq = seq + 1
        if item is not None:
            out.append((seq, item))
        return out

    def catch_up(self) -> list[tuple[int, Any]]:
        """Everything still buffered from start_seq on (a late join); nothing without replay."""
        if self.replay is None or self.next_seq is None:
            return []
        return self.fill(self.next_seq, None)

    def fill(self, first: int, stop: int | None) -> list[tuple[int, Any]]:
        """Replay seqs [first, stop) (stop None: all that is buffered); count what is missing.

        NOTE: work is linear in what the publisher replays, never in the gap's size (a seq
        frame can jump by 2**63).
        """
        replayed = () if self.replay is None else self.replay(first)
        got = {seq: item for seq, item in replayed if seq >= first}  # NOTE: a publisher's error
        last = max(got, default=first - 1) if stop is None else stop - 1
        out, expected = [], first
        for seq in sorted(s for s in got if s <= last):
            if seq > expected:
                self._lost(expected, seq - 1)
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
