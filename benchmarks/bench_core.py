"""Benchmark: the KV-cache manager under a chat workload, recording off vs on, plus trace costs.

Workload: multi-turn chat conversations that share a few system prompts. A small scheduler
loop (one KVCacheManager, block_size 16) admits waiting requests with get_computed_blocks +
allocate_slots (chunked prefill under a token budget), decodes running requests one token per
step, preempts the newest running request when allocate_slots fails (free + num_computed_tokens
= 0) and frees finished requests; each finished turn queues the conversation's next turn, whose
prompt extends the previous one (so prefix-cache hits, evictions and preemptions all happen).

The identical workload runs with recording off and on in one process (best of --repeat runs
each). Printed and written to benchmarks/results/core.md:

* manager operations/s and events/s, the on/off wall-time ratio (goal <= 2x), and the same
  ratio restricted to time spent inside manager calls;
* bytes per stored event in memory (columns + payload + tables) and on disk (goal <= 32 B);
* replay speed: ``state_at(last)`` on a fresh Trace (checkpoints built on the way) and a bare
  replay without checkpoints (goal >= 1M events/s); the replayed final state must equal the
  live manager's.

Run: ``python benchmarks/bench_core.py`` (about a minute) or ``--quick`` (a few seconds).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kvlab.core.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_interface import FullAttentionSpec
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request, SamplingParams
from kvlab.trace import EventKind, KVState, Recorder
from kvlab.trace.events import HOOK_KINDS
from kvlab.trace.replay import replay_into

BLOCK_SIZE = 16


@dataclass
class Conversation:
    """One chat: a system prompt, then turns of (user tokens, output tokens)."""

    system: list[int]
    turns: list[tuple[list[int], list[int]]]
    history: list[int] = field(default_factory=list)
    next_turn: int = 0


def make_conversations(seed: int, num_conversations: int) -> list[Conversation]:
    rng = random.Random(seed)
    systems = [[rng.randrange(1, 50_000) for _ in range(n)] for n in (384, 512, 768, 1024)]
    convs = []
    for _ in range(num_conversations):
        turns = [
            (
                [rng.randrange(1, 50_000) for _ in range(rng.randint(20, 200))],
                [rng.randrange(1, 50_000) for _ in range(rng.randint(16, 160))],
            )
            for _ in range(rng.randint(1, 4))
        ]
        convs.append(Conversation(rng.choice(systems), turns))
    return convs


class MiniScheduler:
    """Just enough of a scheduler to drive KVCacheManager the way vLLM's does."""

    def __init__(
        self,
        manager: KVCacheManager,
        convs: list[Conversation],
        recorder: Recorder | None,
        max_num_seqs: int = 48,
        token_budget: int = 2048,
        max_waiting: int = 96,
    ) -> None:
        self.m, self.rec = manager, recorder
        self.convs = deque(convs)
        self.max_num_seqs, self.token_budget, self.max_waiting = (
            max_num_seqs,
            token_budget,
            max_waiting,
        )
        self.hasher = get_request_block_hasher(BLOCK_SIZE, sha256)
        self.waiting: deque[tuple[Request, Conversation]] = deque()
        self.running: list[tuple[Request, Conversation]] = []
        self.ops = self.preemptions = self.finished = self.steps = 0
        self.manager_time = 0.0
        self._next_id = 0

    def _submit(self, conv: Conversation) -> None:
        user, _ = conv.turns[conv.next_turn]
        prompt = (conv.history or conv.system) + user
        self._next_id += 1
        req = Request(
            f"req-{self._next_id}",
            prompt,
            SamplingParams(max_tokens=len(conv.turns[conv.next_turn][1])),
            None,
            block_hasher=self.hasher,
        )
        self.waiting.append((req, conv))

    def _call(self, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        self.manager_time += time.perf_counter() - t0
        self.ops += 1
        return out

    def run(self) -> None:
        while self.convs or self.waiting or self.running:
            while self.convs and len(self.waiting) < self.max_waiting:
                self._submit(self.convs.popleft())
            self.step()

    def step(self) -> None:
        self.steps += 1
        if self.rec is not None:
            self.rec.mark_step(self.steps)
        self._call(self.m.new_step_starts)
        budget, scheduled = self.token_budget, []
        for item in list(self.running):
            req = item[0]
            if item not in self.running:
                continue  # preempted by an earlier request this step
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            if n <= 0:
                continue
            while self._call(self.m.allocate_slots, req, n) is None:
                victim = self.running.pop()
                self._preempt(victim)
                if victim is item:
                    break
            else:
                scheduled.append((item, n))
                budget -= n
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            req, conv = self.waiting[0]
            blocks, num_hit = self._call(self.m.get_computed_blocks, req)
            n = min(req.num_tokens - num_hit, budget)
            if self._call(self.m.allocate_slots, req, n, num_hit, blocks) is None:
                break
            self.waiting.popleft()
            req.num_computed_tokens = num_hit
            self.running.append((req, conv))
            scheduled.append(((req, conv), n))
            budget -= n
        self._execute(scheduled)

    def _preempt(self, item: tuple[Request, Conversation]) -> None:
        self._call(self.m.free, item[0])
        item[0].num_computed_tokens = 0
        self.waiting.appendleft(item)
        self.preemptions += 1

    def _execute(self, scheduled: list) -> None:
        for (req, conv), n in scheduled:
            if (req, conv) not in self.running:
                continue
            req.num_computed_tokens += n
            if req.num_computed_tokens < req.num_tokens:
                continue  # chunked prefill continues next step
            outputs = conv.turns[conv.next_turn][1]
            done = req.num_output_tokens
            if done < len(outputs):
                req.append_output_token_ids(outputs[done])
            if req.num_output_tokens >= len(outputs):
                self._finish(req, conv)

    def _finish(self, req: Request, conv: Conversation) -> None:
        self.running.remove((req, conv))
        self._call(self.m.free, req)
        self.finished += 1
        conv.history = list(req.all_token_ids)
        conv.next_turn += 1
        if conv.next_turn < len(conv.turns):
            self._submit(conv)


def make_manager(num_blocks: int) -> KVCacheManager:
    spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=8, head_size=128, dtype="bfloat16")
    cfg = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layers"], spec)],
    )
    return KVCacheManager(cfg, max_model_len=8192, hash_block_size=BLOCK_SIZE)


class NoOpRecorder:
    """Every KVRecorder hook as a no-op: isolates what core's own instrumentation costs."""

    def mark_step(self, step: int) -> None:
        pass


for _hook in HOOK_KINDS:
    setattr(NoOpRecorder, _hook, lambda self, *args: None)


def run_once(seed: int, num_convs: int, num_blocks: int, mode: str):
    """One run; mode "off" (no recorder), "noop" (NoOpRecorder) or "on" (kvlab.trace)."""
    manager = make_manager(num_blocks)
    rec = Recorder().attach(manager) if mode == "on" else None
    if mode == "noop":
        manager.set_recorder(NoOpRecorder())
    sched = MiniScheduler(manager, make_conversations(seed, num_convs), rec)
    t0 = time.perf_counter()
    sched.run()
    elapsed = time.perf_counter() - t0
    trace = rec.trace() if rec is not None else None
    return elapsed, sched, manager, trace, rec


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}; load average at the end "
        f"{load} (a shared machine: ratios are measured side by side, absolute rates vary)"
    )


def measure_replay(trace) -> tuple[float, float]:
    fresh = type(trace)(
        trace.cols, trace.tables, trace.initial_state, trace.config, trace.call_names
    )
    t0 = time.perf_counter()
    fresh.state_at(len(fresh) - 1)
    with_checkpoints = time.perf_counter() - t0
    state = trace.initial_state.copy()
    t0 = time.perf_counter()
    replay_into(state, trace.cols, 0, len(trace))
    bare = time.perf_counter() - t0
    return len(trace) / with_checkpoints, len(trace) / bare


def run_modes(num_convs: int, num_blocks: int, repeat: int) -> dict[str, list]:
    """Run the workload ``repeat`` times per mode, the modes interleaved."""
    runs: dict[str, list] = {"off": [], "noop": [], "on": []}
    for _ in range(repeat):
        for mode, results in runs.items():
            results.append(run_once(7, num_convs, num_blocks, mode))
    return runs


def collect(runs: dict[str, list], num_convs: int, num_blocks: int) -> dict:
    """Best-of-runs timings and the trace measurements; checks replay == live."""
    t_off = min(run[0] for run in runs["off"])
    t_on = min(run[0] for run in runs["on"])
    mgr = {mode: min(run[1].manager_time for run in rs) for mode, rs in runs.items()}
    mgr_off, mgr_on = mgr["off"], mgr["on"]
    _, sched, manager, trace, rec = runs["on"][-1]
    assert sched.ops == runs["off"][-1][1].ops, "recording changed the workload"
    live, replayed = KVState.from_manager(manager), trace.final_state()
    assert replayed == live, "replay differs from the live manager: " + "; ".join(
        replayed.diff(live)
    )
    with tempfile.TemporaryDirectory() as tmp:
        disk = trace.save(os.path.join(tmp, "bench.kvtrace"))
    n = len(trace)
    replay_cp, replay_bare = measure_replay(trace)
    return {
        "machine": machine(), "conversations": num_convs, "num_gpu_blocks": num_blocks,
        "requests": sched.finished, "steps": sched.steps, "preemptions": sched.preemptions,
        "ops": sched.ops, "events": n, "t_off": t_off, "t_on": t_on, "ratio": t_on / t_off,
        "mgr_off": mgr_off, "mgr_on": mgr_on, "mgr_ratio": mgr_on / mgr_off,
        "mgr_noop": mgr["noop"], "core_share": (mgr["noop"] - mgr_off) / (mgr_on - mgr_off),
        "bytes_mem": trace.bytes_per_event, "bytes_alloc": rec.allocated_nbytes / n,
        "bytes_disk": disk / n, "replay_cp": replay_cp, "replay_bare": replay_bare,
        "evictions": int((trace.cols.kind == EventKind.BLOCK_REMOVED).sum()),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    """Parse the command line, run, print and (unless --quick) write the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small run (a few seconds)")
    ap.add_argument("--conversations", type=int, default=None)
    ap.add_argument("--blocks", type=int, default=None, help="num_gpu_blocks (blocks)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per mode (best is kept)")
    ap.add_argument("--out", default=None, help="report path (default: results/core.md)")
    args = ap.parse_args(argv)
    num_convs = args.conversations or (60 if args.quick else 1200)
    num_blocks = args.blocks or (600 if args.quick else 1280)
    init_none_hash(sha256)
    runs = run_modes(num_convs, num_blocks, args.repeat or (1 if args.quick else 3))
    r = collect(runs, num_convs, num_blocks)
    report = render(r)
    print(report)
    out = args.out or (None if args.quick else Path(__file__).parent / "results" / "core.md")
    if out is not None:  # NOTE: a --quick run never overwrites the committed results
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(report)
    return r


def _rows(r: dict) -> list[tuple[str, str, str]]:
    def ok(good: bool) -> str:
        return "ok" if good else "MISSED"

    return [
        ("manager ops/s, recording off",
         f"{r['ops'] / r['t_off']:,.0f} ops/s ({r['ops']:,} ops in {r['t_off']:.2f} s)", ""),
        ("manager ops/s, recording on",
         f"{r['ops'] / r['t_on']:,.0f} ops/s ({r['t_on']:.2f} s)", ""),
        ("events recorded", f"{r['events']:,} ({r['events'] / r['t_on']:,.0f} events/s)", ""),
        ("on/off wall time (whole loop)", f"{r['ratio']:.2f}x", f"<= 2x {ok(r['ratio'] <= 2)}"),
        ("on/off time inside manager calls",
         f"{r['mgr_ratio']:.2f}x ({r['mgr_off']:.2f} s -> {r['mgr_on']:.2f} s)", ""),
        ("  of the added time: core's hook calls (no-op recorder)",
         f"{r['core_share']:.0%} ({r['mgr_off']:.2f} s -> {r['mgr_noop']:.2f} s)", ""),
        ("bytes/event in memory (columns + payload + tables)", f"{r['bytes_mem']:.1f} B/event",
         f"<= 32 {ok(r['bytes_mem'] <= 32)}"),
        ("bytes/event allocated by the recorder (spare capacity)",
         f"{r['bytes_alloc']:.1f} B/event", ""),
        ("bytes/event on disk (.kvtrace, deflate)", f"{r['bytes_disk']:.1f} B/event",
         f"<= 32 {ok(r['bytes_disk'] <= 32)}"),
        ("replay, state_at(last) from scratch (checkpoints built)",
         f"{r['replay_cp'] / 1e6:.2f} M events/s", f">= 1 M {ok(r['replay_cp'] >= 1e6)}"),
        ("replay, bare (no checkpoints)", f"{r['replay_bare'] / 1e6:.2f} M events/s", ""),
    ]  # fmt: skip


def render(r: dict) -> str:
    """The results as Markdown (one table, units in every label)."""
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in _rows(r))
    return (
        "# kvlab core + trace benchmark\n\n"
        f"Machine: {r['machine']}\n"
        f"Workload: {r['conversations']} conversations, {r['requests']} requests, "
        f"{r['steps']} scheduler steps, num_gpu_blocks={r['num_gpu_blocks']}, "
        f"block_size={BLOCK_SIZE}, {r['preemptions']} preemptions, {r['evictions']} cached blocks "
        "evicted. Timings: best of the runs per mode, off and on interleaved in one process.\n\n"
        "| measure | value | goal |\n|---|---|---|\n"
        f"{table}\n\n"
        "Replayed final state == live manager state: yes (asserted).\n"
    )


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
