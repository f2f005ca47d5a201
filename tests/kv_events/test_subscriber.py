"""The KV-event subscriber on real ZMQ sockets (tcp on 127.0.0.1 random ports, inproc): both wire
forms, connect and bind, drops recovered through vLLM's replay protocol (both reply layouts),
duplicates, late joins, garbage. A publisher speaking vLLM's protocol plays the server
(_kv_event_publisher); no sleeps: it waits for the subscription to arrive."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import msgspec
import pytest
import zmq
from _kv_event_publisher import TestPublisher
from test_stream import _check_rebuilt, recorded_run

from kvlab.kv_events.format import encode_kv_event_payload
from kvlab.kv_events.stream import KVEventTraceBuilder
from kvlab.kv_events.subscriber import KVEventSubscriber, StreamHealth, publisher_binds
from kvlab.kv_events.wire import read_kv_event_messages, write_kv_event_messages

FORMS = {"array (vLLM 0.22.1)": "0.22.1", "map (vLLM 0.33.0)": "0.33.0"}


@pytest.fixture(scope="module")
def run():
    return recorded_run()


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.term()


class Stream:
    """A publisher and a subscriber joined over tcp (or inproc) in either direction."""

    def __init__(self, ctx, *, sub_binds=False, transport="tcp", replay=True, topic_frame=True,
                 buffer_steps=100, start_seq=None, subscribe=True):  # fmt: skip
        self.ctx, self.sub = ctx, None
        if transport == "inproc":
            where = f"inproc://kv-{uuid.uuid4().hex}"
        else:
            where = "tcp://127.0.0.1:*"
        self.sub_binds, self.where, self.start_seq = sub_binds, where, start_seq
        if sub_binds:
            # vLLM's publisher connects: the subscriber binds first. Whatever the publisher sends
            # before its connection is up is lost (the slow joiner): start_seq=0 fetches it
            # through the replay socket, so no test waits on timing.
            self.start_seq = 0
            self._make_sub(where)
            self.pub = TestPublisher(ctx, self.sub.endpoint, bind=False, replay=replay,
                                     topic_frame=topic_frame, buffer_steps=buffer_steps)  # fmt: skip
            self.sub.replay_endpoint = self.pub.replay_endpoint
        else:
            self.pub = TestPublisher(ctx, where, replay=replay, topic_frame=topic_frame,
                                     buffer_steps=buffer_steps)  # fmt: skip
            if subscribe:
                self.join()

    def _make_sub(self, endpoint: str, replay_endpoint: str | None = None) -> None:
        self.sub = KVEventSubscriber(endpoint, topic="kv", bind=self.sub_binds,
                                     replay_endpoint=replay_endpoint, start_seq=self.start_seq,
                                     replay_timeout_ms=2000, context=self.ctx)  # fmt: skip

    def join(self) -> None:
        if self.sub is None:
            self._make_sub(self.pub.endpoint, self.pub.replay_endpoint)
        self.pub.wait_subscribed()

    def close(self) -> None:
        if self.sub is not None:
            self.sub.close()
        self.pub.close()


@pytest.fixture
def streams(ctx):
    made = []

    def make(**kw) -> Stream:
        made.append(Stream(ctx, **kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _rebuild(got, run) -> KVEventTraceBuilder:
    builder = KVEventTraceBuilder(num_blocks=5)
    for seq, batch in got:
        builder.add_batch(batch, seq)
    _check_rebuilt(builder, run)
    return builder


@pytest.mark.parametrize("version", FORMS.values(), ids=FORMS.keys())
@pytest.mark.parametrize(("sub_binds", "transport"), [(False, "tcp"), (True, "tcp"),
                                                      (True, "inproc")])  # fmt: skip
def test_in_order_stream_both_forms_connect_and_bind(streams, run, version, sub_binds,
                                                     transport) -> None:  # fmt: skip
    s = streams(sub_binds=sub_binds, transport=transport)
    assert s.sub.bind is sub_binds
    for batch, _ in run:
        s.pub.publish(encode_kv_event_payload(batch, version))
    got = list(s.sub.payloads(timeout_ms=300))
    assert [seq for seq, _ in got] == list(range(6))
    assert {d.form for _, d in got if d.batch.events} == {"array" if version == "0.22.1" else "map"}
    _rebuild([(seq, d.batch) for seq, d in got], run)
    h = s.sub.health
    if not sub_binds:
        # one replay request at the end: the silence might hide a dropped last batch
        assert h == StreamHealth(num_received=6, num_delivered=6, num_replay_requests=1)
    else:  # a live copy of a replayed batch is a duplicate; nothing is lost either way
        assert (h.num_delivered, h.num_missing, h.num_garbage, h.num_gaps) == (6, 0, 0, 0)
        assert h.num_recovered == 6 and h.num_duplicates == h.num_received


@pytest.mark.parametrize("topic_frame", [True, False], ids=["vLLM >= 0.26", "vLLM < 0.26"])
def test_dropped_batches_come_back_through_replay(streams, run, topic_frame) -> None:
    s = streams(topic_frame=topic_frame)
    for i, (batch, _) in enumerate(run):
        s.pub.publish(encode_kv_event_payload(batch, "0.33.0"), send=i not in (2, 3))
    got = list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == list(range(6))
    _rebuild(got, run)
    h = s.sub.health
    assert (h.num_received, h.num_gaps, h.num_recovered, h.num_missing) == (4, 1, 2, 0)
    assert h.num_replay_requests == 2 and h.ok  # the gap, then the silence at the end


def test_a_dropped_last_batch_comes_back_when_the_stream_goes_quiet(streams, run) -> None:
    s = streams()
    for i, (batch, _) in enumerate(run):
        s.pub.publish(encode_kv_event_payload(batch, "0.33.0"), send=i < 5)
    got = list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == list(range(6))
    _rebuild(got, run)
    h = s.sub.health
    assert (h.num_received, h.num_gaps, h.num_recovered, h.num_replay_requests) == (5, 0, 1, 2)


def test_drops_without_replay_are_reported_missing(streams, run) -> None:
    s = streams(replay=False)
    for i, (batch, _) in enumerate(run):
        s.pub.publish(encode_kv_event_payload(batch), send=i != 1)
    got = list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == [0, 2, 3, 4, 5]
    h = s.sub.health
    assert (h.num_gaps, h.num_missing, h.missing, h.ok) == (1, 1, [(1, 1)], False)


def test_drops_older_than_the_replay_buffer(streams, run) -> None:
    s = streams(buffer_steps=3)  # once 5 is sent, the publisher keeps 3, 4, 5 (as vLLM's deque)
    for i, (batch, _) in enumerate(run):
        s.pub.publish(encode_kv_event_payload(batch), send=i in (0, 5))
    got = list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == [0, 3, 4, 5]
    h = s.sub.health
    assert (h.num_recovered, h.num_missing, h.missing) == (2, 2, [(1, 2)])


def test_duplicates_are_dropped(streams, run) -> None:
    s = streams()
    payloads = [encode_kv_event_payload(b) for b, _ in run]
    for p in payloads[:3]:
        s.pub.publish(p)
    s.pub.send_raw([b"kv", (1).to_bytes(8, "big"), payloads[1]])  # at-least-once: again
    s.pub.send_raw([b"kv", (0).to_bytes(8, "big"), payloads[0]])
    for p in payloads[3:]:
        s.pub.publish(p)
    got = list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == list(range(6))
    _rebuild(got, run)
    h = s.sub.health
    assert (h.num_received, h.num_duplicates, h.num_gaps, h.ok) == (8, 2, 0, True)


def test_late_join_catches_up_through_replay(streams, run) -> None:
    s = streams(start_seq=0, subscribe=False)
    for batch, _ in run[:4]:
        s.pub.publish(encode_kv_event_payload(batch, "0.33.0"))  # nobody listens yet
    s.join()
    first = list(s.sub.batches(timeout_ms=200, max_messages=2))  # catch-up, kept in order
    for batch, _ in run[4:]:
        s.pub.publish(encode_kv_event_payload(batch, "0.33.0"))
    got = first + list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == list(range(6))
    _rebuild(got, run)
    h = s.sub.health
    assert (h.num_recovered, h.num_received, h.num_delivered, h.ok) == (4, 2, 6, True)


def test_late_join_without_start_seq_starts_at_the_first_message(streams, run) -> None:
    s = streams(subscribe=False)
    s.pub.publish(encode_kv_event_payload(run[0][0]))
    s.join()
    for batch, _ in run[1:]:
        s.pub.publish(encode_kv_event_payload(batch))
    got = list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == [1, 2, 3, 4, 5]
    assert s.sub.health.ok and s.sub.health.num_gaps == 0


def test_garbage_is_counted_and_the_stream_goes_on(streams, run, tmp_path) -> None:
    s = streams()
    good = [encode_kv_event_payload(b) for b, _ in run]
    bad_group = msgspec.msgpack.encode([0.0, [["BlockRemoved", [7], "GPU", 2**40]], None])
    s.pub.publish(good[0])
    s.pub.send_raw([b"kv", b"two frames only"])
    s.pub.send_raw([b"kv", b"\x00" * 7, good[1]])  # a 7-byte seq frame
    s.pub.publish(good[1])
    s.pub.publish(b"\xc1 not msgpack")  # seq 2: garbage, but its seq is used
    s.pub.publish(b"\xa2\x91x")  # seq 3: a msgpack str that is not UTF-8 (found by fuzzing)
    s.pub.publish(bad_group)  # seq 4
    for p in good[2:]:
        s.pub.publish(p)
    got = list(s.sub.messages(timeout_ms=300))
    assert [seq for _, seq, _ in got] == [0, 1, 5, 6, 7, 8]
    h = s.sub.health
    assert (h.num_garbage, h.num_gaps, h.num_missing, h.num_delivered) == (5, 0, 0, 6)
    assert "group_idx" in h.last_error and "4095" in h.last_error and not h.ok
    path = tmp_path / "kept.kvev"
    assert write_kv_event_messages(path, got) == 6
    assert [seq for seq, _ in read_kv_event_messages(path)] == [0, 1, 5, 6, 7, 8]


def test_a_huge_seq_jump_costs_nothing(streams, run) -> None:
    s = streams(replay=False)
    s.pub.publish(encode_kv_event_payload(run[0][0]))
    s.pub.send_raw([b"kv", (2**63).to_bytes(8, "big"), encode_kv_event_payload(run[1][0])])
    got = list(s.sub.batches(timeout_ms=300))
    assert [seq for seq, _ in got] == [0, 2**63]
    assert s.sub.health.missing == [(1, 2**63 - 1)] and s.sub.health.num_missing == 2**63 - 1


def test_replay_that_never_answers(ctx, run) -> None:
    router = ctx.socket(zmq.ROUTER)  # accepts the request, never replies
    router.bind("tcp://127.0.0.1:*")
    pub = TestPublisher(ctx, "tcp://127.0.0.1:*", replay=False)
    sub = KVEventSubscriber(pub.endpoint, replay_endpoint=router.getsockopt_string(
        zmq.LAST_ENDPOINT), replay_timeout_ms=100, context=ctx)  # fmt: skip
    try:
        pub.wait_subscribed()
        for i, (batch, _) in enumerate(run[:3]):
            pub.publish(encode_kv_event_payload(batch), send=i != 1)
        got = list(sub.batches(timeout_ms=300))
    finally:
        sub.close()
        pub.close()
        router.close(linger=0)
    assert [seq for seq, _ in got] == [0, 2]
    assert sub.health.missing == [(1, 1)] and sub.health.num_replay_requests == 2  # gap, silence


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_restarted_publisher_is_followed_from_its_seq_0(ctx, run) -> None:
    where, replay_at = (f"tcp://127.0.0.1:{_free_port()}" for _ in range(2))
    pub = TestPublisher(ctx, where, replay_at=replay_at)
    sub = KVEventSubscriber(where, topic="kv", replay_endpoint=replay_at, replay_timeout_ms=2000,
                            context=ctx)  # fmt: skip
    payloads = [encode_kv_event_payload(b) for b, _ in run]
    try:
        pub.wait_subscribed()
        for p in payloads[:3]:
            pub.publish(p)
        before = [seq for seq, _ in sub.batches(timeout_ms=2000, max_messages=3)]
        pub.close()
        pub = TestPublisher(ctx, where, replay_at=replay_at)  # the server restarted: seq 0 again
        pub.publish(payloads[3], send=False)  # seq 0: lost while the SUB socket reconnected
        pub.publish(payloads[4], send=False)  # seq 1 < the 3 expected, another payload: restart
        frames = [b"kv", (1).to_bytes(8, "big"), payloads[4]]
        after = []
        for _ in range(100):  # NOTE: the SUB reconnects by itself; resend until it is back
            pub.send_raw(frames)
            after = list(sub.batches(timeout_ms=50))
            if after:
                break
        pub.publish(payloads[5])
        after += list(sub.batches(timeout_ms=300))
    finally:
        sub.close()
        pub.close()
    assert before == [0, 1, 2] and [seq for seq, _ in after] == [0, 1, 2]
    assert [b.ts for _, b in after] == [b.ts for b, _ in run[3:]]
    h = sub.health
    assert (h.num_restarts, h.restarts, h.num_recovered, h.num_missing) == (1, [(3, 1)], 1, 0)


def test_publisher_bind_rule() -> None:
    # Mirrors ZmqEventPublisher._is_bind_endpoint: the subscriber does the opposite
    assert [publisher_binds(e) for e in ("tcp://*:5557", "tcp://10.0.0.5:5557", "tcp://[::]:5557",
                                         "ipc:///tmp/kv", "inproc://kv")] == [
        True, False, True, True, True]  # fmt: skip
    ctx = zmq.Context()
    try:
        auto = KVEventSubscriber("tcp://127.0.0.1:*", context=ctx)
        plain = KVEventSubscriber("tcp://127.0.0.1:1", context=ctx)
        assert auto.bind and auto.endpoint.startswith("tcp://127.0.0.1:")
        assert not auto.endpoint.endswith(":*") and not plain.bind
        auto.close()
        plain.close()
        with pytest.raises(ValueError, match=r"a seq is an int in \[0, 2\*\*64\)"):
            KVEventSubscriber("tcp://127.0.0.1:1", start_seq=-1, context=ctx)
        for kwargs, message in [
            ({"endpoint": "tcp://nowhere"}, "cannot connect 'tcp://nowhere': .*an endpoint is"),
            ({"endpoint": "bogus://x", "bind": True}, "cannot bind 'bogus://x'"),
            ({"endpoint": "tcp://127.0.0.1:1", "replay_endpoint": "tcp:/x"}, "cannot connect 'tcp:/x'"),
            ({"endpoint": "tcp://127.0.0.1:1", "replay_timeout_ms": -5}, "replay_timeout_ms must"),
        ]:  # fmt: skip
            with pytest.raises(ValueError, match=message):
                KVEventSubscriber(context=ctx, **kwargs)
    finally:
        ctx.term()
