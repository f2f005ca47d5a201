"""Soak: kvlab's KVEventSubscriber follows vLLM 0.22.1's real ZmqEventPublisher for an hour.

Two data-parallel ranks (vLLM offsets rank 1's ports by one), each a vLLM ``ZmqEventPublisher``
in the oracle environment (``benchmarks/soak_publisher.py``: steady ``--rate`` batches per
second, PUB high-water mark 1000, replay buffer 20,000), each followed by a ``KVEventSubscriber``
in this process (one thread per rank; ``start_seq=0``: it starts before the servers, so what
they publish before its subscription is up comes through replay). On a schedule scaled to ``--minutes`` (60 by default):

* every 5 minutes each rank bursts 5,000 batches as fast as vLLM publishes (5x the HWM);
* rank 0's publisher restarts twice (its seq starts again at 0; a clean shutdown each time);
* rank 1's subscriber restarts once (down 10 s) and catches up through the replay socket;
* near the end rank 1's subscriber is down while its publisher bursts 30,000 batches, more than
  the replay buffer holds: what replay can no longer give must be reported missing.

Every batch is checked against its seq (the hashes name rank, restart epoch and seq), and at the
end each (rank, epoch) is balanced: published = handed on + reported missing + unaccounted
(must be 0) + the tail after the last batch the follower saw (sent in a publisher's last moments
and never asked for: unknowable, since vLLM closes its PUB socket with linger 0). Memory (RSS) of this process is sampled every 10 s. Results go to
``benchmarks/results/soak_kv_events.md`` (+ ``.json``); ``--from-json`` rewrites the Markdown
from a run's JSON.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/soak_kv_events.py --minutes 60
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.kv_events import KVEventSubscriber  # noqa: E402


def _rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _free_ports(n: int = 4) -> int:
    """A port p with p .. p + n - 1 free (rank 1's ports are rank 0's + 1, as vLLM offsets them)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("0.0.0.0", 0))
            p = s.getsockname()[1]
        try:
            for q in range(p, p + n):
                with socket.socket() as s:
                    s.bind(("0.0.0.0", q))
            return p
        except OSError:
            continue
    raise RuntimeError(f"no {n} free consecutive ports")


class Follower(threading.Thread):
    """Follows one rank: checks every batch, survives publisher and subscriber restarts."""

    def __init__(self, rank: int, port: int, replay_port: int) -> None:
        super().__init__(daemon=True)
        self.rank, self.port, self.replay_port = rank, port + rank, replay_port + rank
        self.stop, self.paused = threading.Event(), threading.Event()
        self.epoch = 0
        self.delivered: dict[int, int] = {0: 0}
        self.missing: dict[int, int] = {0: 0}
        self.last_seq: dict[int, int] = {}  # NOTE: per epoch, the highest seq handed on
        self.handed: dict[int, bytearray] = {}  # NOTE: per epoch, a flag per seq handed on
        self.restarts_seen: list[tuple] = []  # NOTE: health.restarts, (expected, arrived)
        self.wrong = 0  # batches whose content does not match their seq
        self.totals = {"duplicates": 0, "gaps": 0, "recovered": 0, "garbage": 0,
                       "replay_requests": 0, "restarts": 0}  # fmt: skip
        self.catch_ups: list[dict] = []
        self.replays: list[tuple] = []
        self._ranges_seen = 0
        self.missing_ranges: list[tuple] = []  # (epoch, first, last)
        self.sub = self._open(0)  # NOTE: started before the server: everything from seq 0

    def _open(self, start_seq: int | None) -> KVEventSubscriber:
        sub = KVEventSubscriber(f"tcp://127.0.0.1:{self.port}", topic="kv",
                                replay_endpoint=f"tcp://127.0.0.1:{self.replay_port}",
                                start_seq=start_seq, replay_timeout_ms=3000)  # fmt: skip
        replay = sub.sequencer.replay

        def logged(first: int) -> list:  # NOTE: what each replay request brought (bounded log)
            items = replay(first)
            seqs = [q for q, _ in items]
            self.replays.append((round(time.monotonic(), 1), self.epoch, first, len(seqs),
                                 min(seqs, default=None), max(seqs, default=None)))  # fmt: skip
            del self.replays[:-2000]
            return items

        sub.sequencer.replay = logged
        return sub

    def _account(self, sub: KVEventSubscriber, base_missing: int) -> None:
        h = sub.health
        self.missing_ranges += [(self.epoch, a, b) for a, b in h.missing[self._ranges_seen:]]
        self._ranges_seen = len(h.missing)
        for key, value in (("duplicates", h.num_duplicates), ("gaps", h.num_gaps),
                           ("recovered", h.num_recovered), ("garbage", h.num_garbage),
                           ("replay_requests", h.num_replay_requests)):  # fmt: skip
            self.totals[key] += value
        self.missing[self.epoch] += h.num_missing - base_missing

    def run(self) -> None:
        sub, seen_restarts, base_missing = self.sub, 0, 0
        while not self.stop.is_set():
            if self.paused.is_set():  # NOTE: the subscriber process restarts
                start = sub.next_seq
                self._account(sub, base_missing)
                sub.close()
                while self.paused.is_set() and not self.stop.is_set():
                    time.sleep(0.1)
                sub = self.sub = self._open(start)
                seen_restarts, base_missing, self._ranges_seen = 0, 0, 0
                before = dict(self.delivered)
                self._consume(sub, 2000)
                self.catch_ups.append({"start_seq": start, "recovered": sub.health.num_recovered,
                                       "missing": list(sub.health.missing),
                                       "handed_on": self.delivered[self.epoch]
                                       - before.get(self.epoch, 0)})  # fmt: skip
                continue
            h = sub.health
            for seq, decoded in sub.payloads(timeout_ms=200, max_messages=500):
                if h.num_restarts > seen_restarts:
                    # NOTE: missing counted so far belongs to the epoch that just ended
                    self.missing[self.epoch] += h.num_missing - base_missing
                    base_missing = h.num_missing
                    self.missing_ranges += [(self.epoch, a, b)
                                            for a, b in h.missing[self._ranges_seen:]]
                    self._ranges_seen = len(h.missing)
                    self.totals["restarts"] += h.num_restarts - seen_restarts
                    self.restarts_seen += [(round(time.monotonic(), 1), *r)
                                           for r in h.restarts[seen_restarts:]]  # fmt: skip
                    self.epoch += h.num_restarts - seen_restarts
                    seen_restarts = h.num_restarts
                    self.delivered.setdefault(self.epoch, 0)
                    self.missing.setdefault(self.epoch, 0)
                self._check(seq, decoded)
        self._account(sub, base_missing)
        sub.close()

    def _consume(self, sub: KVEventSubscriber, n: int) -> None:
        for seq, decoded in sub.payloads(timeout_ms=200, max_messages=n):
            self._check(seq, decoded)

    def _check(self, seq: int, decoded) -> None:  # type: ignore[no-untyped-def]
        h = decoded.batch.events[0].block_hashes[0]
        rank, epoch, s = h >> 56, (h >> 48) & 0xFF, (h >> 8) & ((1 << 40) - 1)
        if (rank, epoch, s) != (self.rank, self.epoch, seq):
            self.wrong += 1
        self.delivered[self.epoch] = self.delivered.get(self.epoch, 0) + 1
        self.last_seq[self.epoch] = max(self.last_seq.get(self.epoch, -1), seq)
        seen = self.handed.setdefault(self.epoch, bytearray())
        if seq >= len(seen):
            seen.extend(bytes(max(seq + 1 - len(seen), 1 << 16)))
        seen[seq] = 1

    def unaccounted_ranges(self, epoch: int, end: int) -> list[tuple[int, int]]:
        """Seqs below ``end`` of ``epoch`` neither handed on nor reported missing (ranges)."""
        seen = bytearray(self.handed.get(epoch, b""))[:end].ljust(end, b"\0")
        for e, a, b in self.missing_ranges:
            if e == epoch:
                seen[a : b + 1] = b"\1" * len(seen[a : b + 1])
        out, start = [], None
        for i, v in enumerate(seen):
            if not v and start is None:
                start = i
            elif v and start is not None:
                out.append((start, i - 1))
                start = None
        if start is not None:
            out.append((start, end - 1))
        return out


class Soak:
    """The publishers, the followers and the schedule (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.total = args, args.minutes * 60
        self.port = _free_ports(4)
        self.replay_port = self.port + 2
        self.work = Path(tempfile.mkdtemp(prefix="kv-soak-"))
        self.bursts = {r: [(t, 5000) for t in range(150 + 75 * r, int(self.total) - 60, 300)]
                       for r in (0, 1)}  # fmt: skip
        self.big_at = 0.85 * self.total
        self.bursts[1].append((self.big_at + 5, 30_000))
        self.procs: dict[int, subprocess.Popen] = {}
        self.epochs = {0: 0, 1: 0}
        self.start = time.monotonic()
        self.followers = {r: Follower(r, self.port, self.replay_port) for r in (0, 1)}
        self.samples: list[dict] = []
        self.done: list[tuple[int, str]] = []

    def launch(self, rank: int) -> None:
        since = time.monotonic() - self.start
        plan = ",".join(f"{t - since:.1f}:{n}" for t, n in self.bursts[rank] if t > since)
        self.procs[rank] = subprocess.Popen(
            [self.args.python, str(ROOT / "benchmarks" / "soak_publisher.py"), "--rank",
             str(rank), "--epoch", str(self.epochs[rank]), "--port", str(self.port),
             "--replay-port", str(self.replay_port), "--rate", str(self.args.rate),
             "--bursts", plan, "--log", str(self.work / f"pub-{rank}-{self.epochs[rank]}.json")],
            stdout=subprocess.DEVNULL, stderr=open(self.work / f"pub-{rank}.err", "a"))  # fmt: skip

    def run(self) -> None:
        for r in (0, 1):
            self.launch(r)
            self.followers[r].start()
        for r in (0, 1):  # NOTE: importing vLLM takes 10-60 s here; the schedule starts after
            while not (self.work / f"pub-{r}-0.ready").exists():
                if self.procs[r].poll() is not None:
                    raise SystemExit(f"publisher {r} failed: "
                                     f"{(self.work / f'pub-{r}.err').read_text()}")  # fmt: skip
                time.sleep(0.5)
        self.start, total = time.monotonic(), self.total
        events = sorted([(0.33 * total, "restart publisher 0"),
                         (0.75 * total, "restart publisher 0"),
                         (0.5 * total, "restart subscriber 1"),
                         (self.big_at, "subscriber 1 down during a 30,000-batch burst")])  # fmt: skip
        while time.monotonic() - self.start < total:
            now = time.monotonic() - self.start
            if events and now >= events[0][0]:
                self.event(events.pop(0)[1], now)
            if not self.samples or now - self.samples[-1]["t"] >= 10:
                self.samples.append({
                    "t": round(now), "rss_mb": round(_rss_mb(), 1),
                    "py_blocks": sys.getallocatedblocks(),  # NOTE: live small objects, cheap
                    "publishers_rss_mb": [round(_rss_mb(p.pid), 1)
                                          for p in self.procs.values() if p.poll() is None]})  # fmt: skip
            time.sleep(0.5)
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            p.wait()
        time.sleep(5)  # NOTE: the followers drain what is left (silence -> a last replay request)
        for f in self.followers.values():
            f.stop.set()
        for f in self.followers.values():
            f.join(timeout=60)

    def event(self, what: str, now: float) -> None:
        self.done.append((round(now), what))
        print(f"[{now / 60:.1f} min] {what}", flush=True)
        if what.startswith("restart publisher"):
            self.procs[0].send_signal(signal.SIGTERM)
            self.procs[0].wait()
            self.epochs[0] += 1
            self.launch(0)
        else:
            self.followers[1].paused.set()
            time.sleep(10 if what.startswith("restart subscriber") else 40)
            self.followers[1].paused.clear()  # NOTE: 40 s: the 30,000-batch burst starts 5 s in

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=200.0, help="batches per second per rank")
    ap.add_argument("--python", default="/work/ovenv/bin/python", help="the vLLM environment")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "soak_kv_events")
    ap.add_argument("--from-json", type=Path, help="only rewrite the Markdown from this JSON")
    args = ap.parse_args()
    if args.from_json:
        args.out.with_suffix(".md").write_text(markdown(json.loads(args.from_json.read_text())))
        return
    soak = Soak(args)
    try:
        soak.run()
    finally:
        soak.close()
    report(args, soak.followers, soak.work, soak.samples, soak.done, soak.total)


def report(args, followers, work, samples, done, total) -> None:  # type: ignore[no-untyped-def]
    rows = []
    for rank, f in followers.items():
        for log in sorted(work.glob(f"pub-{rank}-*.json")):
            pub = json.loads(log.read_text())
            e = pub["epoch"]
            got, lost = f.delivered.get(e, 0), f.missing.get(e, 0)
            end = max(f.last_seq.get(e, -1) + 1, got + lost)  # NOTE: seqs the follower knew of
            rows.append({"rank": rank, "epoch": e, "published": pub["published"], "handed_on": got,
                         "reported_missing": lost, "unaccounted": end - got - lost,
                         "unaccounted_ranges": f.unaccounted_ranges(e, end)[:50],
                         "tail_after_last_seen": pub["published"] - end})  # fmt: skip
    steady = [s["rss_mb"] for s in samples if s["t"] >= 300]
    first = [s["rss_mb"] for s in samples if 300 <= s["t"] < 900]
    last = [s["rss_mb"] for s in samples if s["t"] >= total - 600]
    out = {
        "machine": f"{platform.node()} ({os.cpu_count()} cores, shared), Python "
                   f"{platform.python_version()}, vLLM 0.22.1 publisher (oracle env)",
        "minutes": args.minutes, "rate_per_rank": args.rate, "schedule": done, "balance": rows,
        "followers": {r: {**f.totals, "wrong_content": f.wrong, "catch_ups": f.catch_ups,
                          "restarts_seen": f.restarts_seen,
                          "replays_near_unaccounted": [x for x in f.replays if any(
                              e == x[1] and a - 2000 <= x[2] <= b + 1
                              for row in rows if row["rank"] == r
                              for e, (a, b) in ((row["epoch"], ab)
                                                for ab in row["unaccounted_ranges"]))][:200],
                          "missing_ranges": f.missing_ranges,
                          "replays_near_missing": [x for x in f.replays if any(
                              e == x[1] and a - 50 <= x[2] <= b + 1
                              for e, a, b in f.missing_ranges)][:200]}
                      for r, f in followers.items()},
        "rss_mb": {"min_after_5min": min(steady, default=0), "max_after_5min": max(steady, default=0),
                   "mean_5_to_15_min": round(sum(first) / max(len(first), 1), 1),
                   "mean_last_10_min": round(sum(last) / max(len(last), 1), 1)},
        "py_blocks": _stats([s.get("py_blocks", 0) for s in samples], samples, total),
        "samples": samples,
    }  # fmt: skip
    args.out.with_suffix(".json").write_text(json.dumps(out, indent=1))
    args.out.with_suffix(".md").write_text(markdown(out))
    print(json.dumps({k: v for k, v in out.items() if k != "samples"}, indent=1))


def _stats(values: list, samples: list, total: float) -> dict:
    """min / max after 5 minutes, mean over minutes 5-15 and over the last 10 minutes."""
    at = [(s["t"], v) for s, v in zip(samples, values, strict=True)]
    steady = [v for t, v in at if t >= 300]
    first = [v for t, v in at if 300 <= t < 900]
    last = [v for t, v in at if t >= total - 600]
    return {"min_after_5min": min(steady, default=0), "max_after_5min": max(steady, default=0),
            "mean_5_to_15_min": round(sum(first) / max(len(first), 1), 1),
            "mean_last_10_min": round(sum(last) / max(len(last), 1), 1)}  # fmt: skip


def markdown(out: dict) -> str:
    """benchmarks/results/soak_kv_events.md from the run's JSON."""
    rows = out["balance"]
    lines = [
        f"# Soak: KVEventSubscriber following vLLM 0.22.1's ZmqEventPublisher for "
        f"{out['minutes']:g} minutes",
        "",
        f"Machine: {out['machine']}. Command: `PYTHONPATH=$PWD .venv/bin/python "
        f"benchmarks/soak_kv_events.py --minutes {out['minutes']:g} --rate "
        f"{out['rate_per_rank']:g}` (two data-parallel ranks, {out['rate_per_rank']:g} batches/s "
        "each, bursts of 5,000 batches every 5 minutes past the PUB high-water mark of 1,000; "
        "see the script's docstring for the schedule).",
        "",
        "Schedule (seconds after start): " + "; ".join(f"{t} s {w}" for t, w in out["schedule"]),
        "",
        "| rank | epoch | published | handed on | reported missing | unaccounted | tail after "
        "the last batch seen |",
        "|---|---|---|---|---|---|---|",
        *(f"| {r['rank']} | {r['epoch']} | {r['published']:,} | {r['handed_on']:,} | "
          f"{r['reported_missing']:,} | {r['unaccounted']:,} | {r['tail_after_last_seen']:,} |"
          for r in rows),
        f"| all | | {sum(r['published'] for r in rows):,} | "
        f"{sum(r['handed_on'] for r in rows):,} | {sum(r['reported_missing'] for r in rows):,} | "
        f"{sum(r['unaccounted'] for r in rows):,} | "
        f"{sum(r['tail_after_last_seen'] for r in rows):,} |",
        "",
        "*unaccounted*: seqs up to the last one a follower saw that were neither handed on nor "
        "reported missing (must be 0). *tail*: batches a publisher sent after the last one its "
        "follower saw, before it stopped; vLLM closes its PUB socket with linger 0, so a tail "
        "the follower did not ask the replay socket for in the publisher's last seconds is "
        "unknowable to any subscriber (the restart itself is reported: `health.restarts`).",
        "",
        "| follower | gaps | recovered by replay | duplicates | garbage | replay requests | "
        "restarts seen | wrong content |",
        "|---|---|---|---|---|---|---|---|",
        *(f"| rank {r} | {f['gaps']:,} | {f['recovered']:,} | {f['duplicates']:,} | "
          f"{f['garbage']:,} | {f['replay_requests']:,} | {f['restarts']} | "
          f"{f['wrong_content']} |" for r, f in out["followers"].items()),
        "",
        "Missing ranges reported (rank, epoch, first seq, last seq): "
        + (", ".join(f"({r}, {e}, {a:,}, {b:,})" for r, f in out["followers"].items()
                     for e, a, b in f["missing_ranges"]) or "none"),
        "",
        f"Catch-ups after a subscriber restart (rank 1): "
        + "; ".join(f"from seq {c['start_seq']:,}: {c['recovered']:,} recovered by replay, "
                    f"missing {c['missing'] or 'none'}"
                    for c in out["followers"].get("1", out["followers"].get(1, {}))
                    .get("catch_ups", [])),
        "",
        f"Memory of the subscriber process (RSS, sampled every 10 s): "
        f"{out['rss_mb']['min_after_5min']}-{out['rss_mb']['max_after_5min']} MiB after the "
        f"first 5 minutes; mean {out['rss_mb']['mean_5_to_15_min']} MiB over minutes 5-15, "
        f"{out['rss_mb']['mean_last_10_min']} MiB over the last 10. Live Python objects "
        "(`sys.getallocatedblocks()`: small-object blocks in use, which RSS does not show once "
        "CPython keeps freed arenas): "
        + (f"{out['py_blocks']['min_after_5min'] / 1000:,.0f}k-"
           f"{out['py_blocks']['max_after_5min'] / 1000:,.0f}k after the first 5 minutes; mean "
           f"{out['py_blocks']['mean_5_to_15_min'] / 1000:,.0f}k over minutes 5-15, "
           f"{out['py_blocks']['mean_last_10_min'] / 1000:,.0f}k over the last 10, "
           f"{out['samples'][-1]['py_blocks'] / 1000:,.0f}k at the end. The peak is the "
           "catch-up after the 30,000-batch burst: one replay reply (up to the publisher's "
           "20,000 buffered batches) is held, decoded, until it is handed on; a publisher "
           "restart frees a sequencer's window of 16,384 recent digests, which then fills again."
           if "py_blocks" in out else "not sampled in this run."),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
