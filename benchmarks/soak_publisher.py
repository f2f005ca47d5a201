"""One data-parallel rank of a vLLM server's KV-event stream, for benchmarks/soak_kv_events.py.

Runs in the vLLM 0.22.1 environment (/work/ovenv): vLLM's own ``ZmqEventPublisher`` (its PUB
socket, replay ROUTER, replay buffer and numbering) publishes ``KVEventBatch`` es of vLLM's own
event classes at a steady rate, with bursts as fast as it can. Every event names where it comes
from, so the subscriber can check each batch it is handed: the block hashes are
``rank << 56 | epoch << 48 | seq << 8 | j`` (epoch = how many times this rank was restarted).

On SIGTERM it stops publishing, waits ``--linger`` seconds (a server shutting down cleanly) and
shuts the publisher down; it then writes ``{"rank", "epoch", "published"}`` to ``--log``.

    /work/ovenv/bin/python benchmarks/soak_publisher.py --rank 0 --epoch 0 --port 5557 \\
        --replay-port 5567 --rate 200 --log out.json
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--epoch", type=int, required=True)
    p.add_argument("--port", type=int, required=True, help="rank 0's PUB port (vLLM offsets it)")
    p.add_argument("--replay-port", type=int, required=True)
    p.add_argument("--rate", type=float, default=200.0, help="batches per second")
    p.add_argument("--buffer-steps", type=int, default=20_000)
    p.add_argument("--hwm", type=int, default=1000)
    p.add_argument("--bursts", default="", help="comma-separated t:size (seconds:batches)")
    p.add_argument("--linger", type=float, default=10.0)
    p.add_argument("--log", required=True)
    args = p.parse_args()

    from vllm.distributed.kv_events import (
        BlockRemoved,
        BlockStored,
        KVEventBatch,
        ZmqEventPublisher,
    )

    pub = ZmqEventPublisher(args.rank, endpoint=f"tcp://*:{args.port}",
                            replay_endpoint=f"tcp://*:{args.replay_port}",
                            buffer_steps=args.buffer_steps, hwm=args.hwm, topic="kv")  # fmt: skip
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    Path(args.log).with_suffix(".ready").touch()  # NOTE: the controller waits for this
    bursts = sorted((float(t), int(n)) for t, n in (b.split(":") for b in args.bursts.split(",") if b))
    seq, t0 = 0, time.monotonic()
    tag = (args.rank << 56) | (args.epoch << 48)

    def batch(seq: int) -> KVEventBatch:
        stored = [tag | (seq << 8) | j for j in range(4)]
        old = [tag | ((seq - 8) << 8) | j for j in range(4)] if seq >= 8 else []
        events = [BlockStored(stored, None, list(range(64)), 16, None, "GPU", None)]
        if old:
            events.append(BlockRemoved(old, "GPU"))
        return KVEventBatch(time.time(), events)

    due = time.monotonic()
    while not stop:
        if bursts and time.monotonic() - t0 >= bursts[0][0]:
            _, size = bursts.pop(0)
            for _ in range(size):
                pub.publish(batch(seq))
                seq += 1
            due = time.monotonic()
            continue
        pub.publish(batch(seq))
        seq += 1
        due += 1.0 / args.rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        elif now - due > 1.0:
            due = now  # NOTE: the machine stalled: keep the rate, do not catch up in a burst
    time.sleep(args.linger)
    pub.shutdown()
    with open(args.log, "w") as f:
        json.dump({"rank": args.rank, "epoch": args.epoch, "published": seq}, f)


if __name__ == "__main__":
    main()
