"""vLLM's own ZmqEventPublisher (0.22.1) publishes, kvlab subscribes and rebuilds the cached set
exactly: with the publisher binding and connecting, and a batch dropped on the way and recovered
through vLLM's replay socket. Runs only where vLLM is importable."""

from __future__ import annotations

import importlib.util
import socket
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="needs the vLLM environment (vLLM 0.22.1 importable)",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _to_vllm(events, kv_events):
    """kvlab's events as vLLM's own classes (the same fields, in the same order)."""
    out = []
    for e in events:
        fields = {k: v for k, v in e.to_dict().items() if k != "type"}
        if fields.get("extra_keys") is not None:
            fields["extra_keys"] = [None if k is None else tuple(k) for k in fields["extra_keys"]]
        out.append(getattr(kv_events, type(e).__name__)(**fields))
    return out


@pytest.mark.parametrize("publisher_binds", [True, False], ids=["vLLM binds", "vLLM connects"])
@pytest.mark.parametrize("drop", [None, 2], ids=["all sent", "seq 2 dropped"])
def test_vllm_publisher_stream_is_rebuilt_exactly(publisher_binds: bool, drop: int | None) -> None:
    import vllm
    import zmq
    from test_stream import _check_rebuilt, recorded_run
    from vllm.distributed import kv_events

    from kvlab.kv_events.stream import KVEventTraceBuilder
    from kvlab.kv_events.subscriber import KVEventSubscriber

    assert vllm.__version__ == "0.22.1", vllm.__version__
    run = recorded_run()
    port, replay_port = _free_port(), _free_port()
    ctx = zmq.Context()
    # vLLM binds an endpoint holding '*' and connects to any other; the subscriber does the opposite
    pub_endpoint = f"tcp://*:{port}" if publisher_binds else f"tcp://127.0.0.1:{port}"
    sub_endpoint = f"tcp://127.0.0.1:{port}" if publisher_binds else f"tcp://*:{port}"
    sub = KVEventSubscriber(sub_endpoint, topic="kv-events", bind=not publisher_binds,
                            replay_endpoint=f"tcp://127.0.0.1:{replay_port}", start_seq=0,
                            replay_timeout_ms=3000, context=ctx)  # fmt: skip
    publisher = kv_events.ZmqEventPublisher(0, endpoint=pub_endpoint,
                                            replay_endpoint=f"tcp://*:{replay_port}",
                                            topic="kv-events")  # fmt: skip
    try:
        send = publisher._pub.send_multipart
        if drop is not None:  # lose one message on the way (it stays in the replay buffer)
            def send_dropping(frames, *args, **kwargs):
                if int.from_bytes(frames[1], "big") != drop:
                    send(frames, *args, **kwargs)

            publisher._pub.send_multipart = send_dropping
        for batch, _ in run:
            publisher.publish(kv_events.KVEventBatch(ts=batch.ts,
                                                     events=_to_vllm(batch.events, kv_events)))
        deadline = time.monotonic() + 30
        while len(publisher._buffer) < len(run) and time.monotonic() < deadline:
            time.sleep(0.01)  # vLLM's publisher thread encodes and sends in the background
        got = []
        for seq, batch in sub.batches(timeout_ms=1500):
            got.append((seq, batch))
            if len(got) == len(run):
                break
    finally:
        sub.close()
        publisher.shutdown()
        ctx.term()
    assert [seq for seq, _ in got] == list(range(len(run)))
    assert all(batch.data_parallel_rank == 0 for _, batch in got)
    builder = KVEventTraceBuilder(num_blocks=5)
    for seq, batch in got:
        builder.add_batch(batch, seq)
    _check_rebuilt(builder, run)
    assert sub.health.num_missing == 0 and sub.health.num_garbage == 0


def test_encoder_and_fixture_match_vllms_own_structs() -> None:
    import msgspec
    from test_stream import recorded_run
    from vllm.distributed import kv_events

    from kvlab.kv_events.format import encode_kv_event_payload
    from kvlab.kv_events.wire import _read_frame

    for batch, _ in recorded_run():
        theirs = msgspec.msgpack.encode(kv_events.KVEventBatch(
            ts=batch.ts, events=_to_vllm(batch.events, kv_events), data_parallel_rank=0))
        assert encode_kv_event_payload(type(batch)(batch.ts, batch.events, 0), "0.22.1") == theirs
    path = Path(__file__).resolve().parents[1] / "data" / "kv_events" / "vllm-0.22.1.kvev"
    with open(path, "rb") as f:
        f.read(6)
        frames = []
        while (frame := _read_frame(f, path.stat().st_size)) is not None:
            frames.append(frame)
    assert len(frames) == 4
    for _, _, payload in frames:
        batch = msgspec.msgpack.decode(payload, type=kv_events.KVEventBatch)
        assert msgspec.msgpack.encode(batch) == payload
