"""A ZMQ subscriber for vLLM's KV events that keeps the stream whole.

vLLM's ``ZmqEventPublisher`` numbers its batches (an 8-byte big-endian seq frame, from 0) and,
when given a ``replay_endpoint``, keeps the last ``buffer_steps`` payloads behind a ROUTER
socket: a client sends ``[b"", start_seq]`` and gets every buffered batch with a seq >= start_seq,
then an end marker. ``KVEventSubscriber`` uses both:

* a seq below the next expected one is a duplicate: counted and dropped;
* a seq above it is a gap: the missing batches are asked for on the replay socket and handed on
  in order before the new one; what the publisher no longer holds is counted as missing;
* a message that is not ``[topic, 8-byte seq, valid payload]`` is garbage: counted (with the
  reason in ``health.last_error``) and skipped; the stream goes on;
* ``start_seq=0`` with a replay endpoint catches up on what was published before joining;
* after ``timeout_ms`` of silence the replay socket is asked for anything past the last batch
  (a dropped last batch leaves no gap to see), and the stream ends only when it has nothing.

Where the sockets live: vLLM's publisher binds when its endpoint holds ``*`` (``tcp://*:5557``)
and connects otherwise (``tcp://router-host:5557``), so the subscriber connects in the first case
and binds in the second; ``bind=None`` applies the same rule to the subscriber's own endpoint
(``"tcp://*:5557"`` binds). The replay ROUTER always binds; the subscriber connects to it.

A publisher that restarts numbers from 0 again: a seq below the next expected one whose payload
differs from the batch handed on under that seq (or that is older than the last 16,384 handed
on) is a restart, counted in ``health.num_restarts``; the seqs start over and what the new
publisher sent before it is asked for on its replay socket. The restarted server's cache starts
empty: clear a rebuilt cached set when ``num_restarts`` grows. Replay replies that skip batches
(vLLM 0.22.1's ROUTER drops past 1000 queued messages) are asked for again from the first one
skipped (``KVEventSequencer``).

Mirrors: vllm/distributed/kv_events.py::ZmqEventPublisher (_socket_setup, _is_bind_endpoint,
_service_replay, END_SEQ); replay replies are ``[seq, payload]`` before vLLM 0.26.0 and
``[topic, seq, payload]`` from it, both read.

Examples:
    >>> sub = KVEventSubscriber("tcp://127.0.0.1:5557", replay_endpoint="tcp://127.0.0.1:5558")
    >>> for seq, batch in sub.batches(timeout_ms=100): pass  # nobody publishes here
    >>> sub.health.ok, sub.health.num_delivered
    (True, 0)
    >>> sub.close()
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from kvlab.core.kv_events import KVEventBatch
from kvlab.kv_events.format import (
    END_SEQ,
    DecodedPayload,
    KVEventFormatError,
    decode_kv_event_payload,
    decode_seq_frame,
    encode_seq_frame,
)
from kvlab.kv_events.sequencer import KVEventSequencer, StreamHealth

__all__ = ["KVEventSubscriber", "StreamHealth", "publisher_binds"]

_Item = tuple[bytes, int, bytes, DecodedPayload | None]
"""(topic, seq, payload bytes, decoded payload or None if garbage)."""


def _payload_digest(item: _Item) -> int:
    return hash(item[2])


def publisher_binds(endpoint: str) -> bool:
    """Whether vLLM's ZmqEventPublisher binds ``endpoint`` (otherwise it connects).

    Mirrors: vllm/distributed/kv_events.py::ZmqEventPublisher._is_bind_endpoint (0.31.0; the
    same test sits inline in ``_socket_setup`` from 0.22.1 on).
    """
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


class KVEventSubscriber:
    """A SUB socket on a vLLM KV-event publisher, plus a DEALER on its replay socket.

    The SUB socket connects or binds at construction, so nothing published once the subscription
    reached the publisher is missed. Iterate ``batches()``, ``payloads()`` or ``messages()``;
    ``health`` says what was duplicated, recovered, lost or refused.

    Args:
        endpoint: Where to subscribe, e.g. ``"tcp://127.0.0.1:5557"`` (connect) or
            ``"tcp://*:5557"`` (bind, for a publisher that connects).
        topic: Topic prefix to subscribe to ("" = all).
        bind: Bind instead of connect; None = bind iff the endpoint holds ``*``.
        replay_endpoint: The publisher's ``replay_endpoint`` (connected to), or None.
        start_seq: The first seq wanted: 0 = everything still buffered (late join), None = start
            at the first live message.
        replay_timeout_ms: Longest wait for each replay reply frame (ms).
        context: A zmq.Context (default: the process-wide instance).

    Attributes:
        endpoint: Where the SUB socket is (a bound wildcard port resolved).
        sequencer: The KVEventSequencer ordering the stream (its health is ``health``).

    Raises:
        ImportError: Without pyzmq or msgspec.
        KVEventFormatError: If start_seq is not an int >= 0 or None.
        ValueError: If an endpoint cannot be bound or connected (naming it and the forms
            allowed), or replay_timeout_ms is not an int >= 0; no socket is left open.
    """

    def __init__(self, endpoint: str, topic: str = "", *, bind: bool | None = None,
                 replay_endpoint: str | None = None, start_seq: int | None = None,
                 replay_timeout_ms: int = 1000, context: Any = None) -> None:  # fmt: skip
        try:
            import msgspec  # noqa: F401
            import zmq
        except ImportError as exc:
            raise ImportError(
                "a live KV event socket needs the optional packages 'pyzmq' and 'msgspec' "
                f"(pip install 'kvlab[events]'): {exc}"
            ) from None
        if start_seq is not None:
            encode_seq_frame(start_seq)
        self._zmq = zmq
        self._ctx = context or zmq.Context.instance()
        self.bind = ("*" in endpoint) if bind is None else bool(bind)
        if not isinstance(replay_timeout_ms, int) or replay_timeout_ms < 0:
            raise ValueError(
                f"replay_timeout_ms must be an int >= 0 (ms), got {replay_timeout_ms!r}"
            )
        self.socket = self._ctx.socket(zmq.SUB)
        self.socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self._dealer: Any = None
        self.replay_endpoint = replay_endpoint
        self.replay_timeout_ms = replay_timeout_ms
        try:
            self._attach(self.socket, endpoint, self.bind)
            if replay_endpoint is not None:
                self._dealer = self._new_dealer()
        except ValueError:
            self.close()
            raise
        # NOTE: a bound wildcard port ("tcp://127.0.0.1:*") becomes the real one here.
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT) if self.bind else endpoint
        self.sequencer = KVEventSequencer(start_seq, self._replay_items, digest=_payload_digest)
        self._caught_up = start_seq is None
        self._pending: deque[_Item] = deque()  # NOTE: in seq order, next_seq already past them

    def _new_dealer(self) -> Any:
        dealer = self._ctx.socket(self._zmq.DEALER)
        dealer.setsockopt(self._zmq.RCVHWM, 0)  # NOTE: a replay reply is never dropped here
        try:
            self._attach(dealer, self.replay_endpoint, False)
        except ValueError:
            dealer.close(linger=0)
            raise
        return dealer

    def _attach(self, sock: Any, endpoint: Any, bind: bool) -> None:
        try:
            (sock.bind if bind else sock.connect)(endpoint)
        except (self._zmq.ZMQError, TypeError) as exc:
            raise ValueError(
                f"cannot {'bind' if bind else 'connect'} {endpoint!r}: {exc}; an endpoint is "
                "tcp://host:port, tcp://*:port (bind), ipc://path or inproc://name"
            ) from None

    # ------------------------------------------------------------------ reading
    def _garbage(self, why: str) -> None:
        self.health.num_garbage += 1
        self.health.last_error = why

    def _parse(self, topic: bytes, seq_frame: bytes, payload: bytes) -> _Item | None:
        try:
            seq = decode_seq_frame(seq_frame)
        except KVEventFormatError as exc:
            self._garbage(str(exc))
            return None
        try:
            return topic, seq, payload, decode_kv_event_payload(payload, f"seq {seq}")
        except KVEventFormatError as exc:
            self._garbage(str(exc))
            return topic, seq, payload, None

    def _next_live(self, timeout_ms: int) -> _Item | None | bool:
        """The next live message (None if garbage), or False after timeout_ms of silence."""
        if not self.socket.poll(timeout_ms):
            return False
        frames = self.socket.recv_multipart()
        self.health.num_received += 1
        if len(frames) != 3:
            self._garbage(f"expected 3 frames [topic, seq, payload], got {len(frames)}")
            return None
        return self._parse(*frames)

    def _replay(self, start_seq: int) -> list[_Item]:
        """Everything the publisher still buffers from start_seq on, in its order."""
        if self._dealer is None:
            self._dealer = self._new_dealer()
        self.health.num_replay_requests += 1
        self._dealer.send_multipart((b"", encode_seq_frame(start_seq)))
        out: list[_Item] = []
        while True:
            if not self._dealer.poll(self.replay_timeout_ms):
                # NOTE: a late reply must not be read as the answer to the next request.
                self._dealer.close(linger=0)
                self._dealer = None
                return out
            frames = self._dealer.recv_multipart()
            if frames[:1] == [b""]:
                frames = frames[1:]
            if len(frames) == 2:  # vLLM < 0.26: [seq, payload]
                frames = [b"", *frames]
            if len(frames) != 3:
                self._garbage(f"replay reply of {len(frames)} frames; expected [topic,] seq, "
                              "payload")  # fmt: skip
                continue
            if frames[1] == END_SEQ:
                return out
            item = self._parse(*frames)
            if item is not None:
                out.append(item)

    def _replay_items(self, first: int) -> list[tuple[int, _Item | None]]:
        if self.replay_endpoint is None:
            return []
        return [(item[1], item if item[3] is not None else None) for item in self._replay(first)]

    @property
    def health(self) -> StreamHealth:
        """What happened to the stream so far (see StreamHealth)."""
        return self.sequencer.health

    @property
    def next_seq(self) -> int | None:
        """The next seq expected (None before the first message)."""
        return self.sequencer.next_seq

    def _ordered(self, timeout_ms: int, max_messages: int | None) -> Iterator[_Item]:
        """Items in seq order, gaps filled, duplicates and garbage dropped."""
        n, pending, seqr = 0, self._pending, self.sequencer
        if not self._caught_up:
            self._caught_up = True
            pending.extend(item for _, item in seqr.catch_up())
        while max_messages is None or n < max_messages:
            if not pending:
                item = self._next_live(timeout_ms)
                if item is False:
                    # NOTE: a drop shows as a gap only when a later batch arrives; on silence the
                    # replay socket says whether the last batches (or, for a publisher that
                    # connects, the first ones, lost while the connection came up) are missing.
                    if self.replay_endpoint is None or seqr.next_seq is None:
                        return
                    pending.extend(item for _, item in seqr.fill(seqr.next_seq, None))
                    if not pending:
                        return
                    continue
                if item is not None:
                    valid = item if item[3] is not None else None
                    pending.extend(i for _, i in seqr.push(item[1], valid))
                continue
            self.health.num_delivered += 1
            n += 1
            yield pending.popleft()

    def messages(self, timeout_ms: int = 1000, max_messages: int | None = None
                 ) -> Iterator[tuple[bytes, int, bytes]]:  # fmt: skip
        """Yield ``(topic, seq, payload bytes)`` in seq order until ``timeout_ms`` passes with no
        message (or ``max_messages`` were handed on); garbage is skipped, see ``health``."""
        for topic, seq, payload, _ in self._ordered(timeout_ms, max_messages):
            yield topic, seq, payload

    def payloads(self, timeout_ms: int = 1000, max_messages: int | None = None
                 ) -> Iterator[tuple[int, DecodedPayload]]:  # fmt: skip
        """Yield ``(seq, DecodedPayload)`` (wire form, newer fields); see ``messages``."""
        for _, seq, _, decoded in self._ordered(timeout_ms, max_messages):
            yield seq, decoded  # type: ignore[misc]

    def batches(self, timeout_ms: int = 1000, max_messages: int | None = None
                ) -> Iterator[tuple[int, KVEventBatch]]:  # fmt: skip
        """Yield ``(seq, KVEventBatch)``; see ``messages``."""
        for _, seq, _, decoded in self._ordered(timeout_ms, max_messages):
            yield seq, decoded.batch  # type: ignore[union-attr]

    def close(self) -> None:
        """Close the sockets (the context stays open)."""
        self.socket.close(linger=0)
        if self._dealer is not None:
            self._dealer.close(linger=0)
            self._dealer = None
