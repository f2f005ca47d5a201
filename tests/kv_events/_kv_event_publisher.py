"""A test publisher speaking vLLM's KV-event protocol (ZmqEventPublisher): PUB frames
[topic, seq, payload], a bounded replay buffer behind a ROUTER, both replay reply layouts.

It is an XPUB so a test can wait until a subscription arrived (no sleeps, no slow-joiner
flakiness); to a SUB socket it is the same as vLLM's PUB. Tests choose what is actually sent:
``publish(..., send=False)`` buffers a batch without sending it (a drop), ``send_raw`` sends
anything (duplicates, garbage).
"""

from __future__ import annotations

import threading
import time
from collections import deque

import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)


def _bind(sock: zmq.Socket, endpoint: str, tries: int = 200) -> None:
    """Bind, waiting (up to ~4 s) for a port a closed socket still holds (a restarted server
    binds the same port; ZMQ releases it asynchronously); the socket is closed on failure."""
    for n in range(tries):
        try:
            sock.bind(endpoint)
            return
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EADDRINUSE or n == tries - 1:
                sock.close(linger=0)
                raise
            time.sleep(0.02)


class TestPublisher:
    __test__ = False

    def __init__(self, ctx: zmq.Context, endpoint: str, *, bind: bool = True,
                 topic: bytes = b"kv", buffer_steps: int = 100,
                 replay: bool = True, topic_frame: bool = True,
                 replay_at: str = "tcp://127.0.0.1:*") -> None:  # fmt: skip
        self.pub = ctx.socket(zmq.XPUB)
        if bind:
            _bind(self.pub, endpoint)
            self.endpoint = self.pub.getsockopt_string(zmq.LAST_ENDPOINT)
        else:
            self.pub.connect(endpoint)
            self.endpoint = endpoint
        self.topic = topic
        self.topic_frame = topic_frame  # vLLM >= 0.26 sends the topic in replay replies
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self.next_seq = 0
        self.replay_endpoint = None
        self._stop = threading.Event()
        self._thread = None
        if replay:
            self.router = ctx.socket(zmq.ROUTER)
            try:
                _bind(self.router, replay_at)
            except zmq.ZMQError:
                self.pub.close(linger=0)
                raise
            self.replay_endpoint = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
            self._thread = threading.Thread(target=self._serve, daemon=True)
            self._thread.start()

    def wait_subscribed(self, timeout_ms: int = 5000) -> None:
        assert self.pub.poll(timeout_ms), "the subscription never reached the publisher"
        assert self.pub.recv()[:1] == b"\x01"

    def publish(self, payload: bytes, send: bool = True) -> int:
        seq = self.next_seq
        self.next_seq += 1
        self.buffer.append((seq, payload))
        if send:
            self.send_raw([self.topic, seq.to_bytes(8, "big"), payload])
        return seq

    def send_raw(self, frames: list[bytes]) -> None:
        self.pub.send_multipart(frames)

    def _serve(self) -> None:
        # Mirrors ZmqEventPublisher._service_replay: [client, b"", start_seq] in, buffered
        # batches with seq >= start_seq out, then the end marker.
        while not self._stop.is_set():
            if not self.router.poll(20):
                continue
            client, _, start = self.router.recv_multipart()
            first = int.from_bytes(start, "big")
            head = [client, b""] + ([self.topic] if self.topic_frame else [])
            end = [client, b""] + ([b""] if self.topic_frame else [])
            for seq, payload in list(self.buffer):
                if seq >= first:
                    self.router.send_multipart(head + [seq.to_bytes(8, "big"), payload])
            self.router.send_multipart(end + [END_SEQ, b""])

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.router.close(linger=0)
        self.pub.close(linger=0)
