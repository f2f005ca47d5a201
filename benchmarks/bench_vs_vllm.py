"""Benchmark: kvlab's KV-cache core against vLLM 0.22.1's, side by side in one process.

Runs only where vLLM 0.22.1 is importable (CPU-only: the oracle environment the differential
tests use, with kvlab on PYTHONPATH, never installed into it)::

    PYTHONHASHSEED=0 PYTHONPATH=$PWD ORACLE_VENV/bin/python benchmarks/bench_vs_vllm.py

About 5 minutes on a 2-core machine (``--requests 300 --repeat 2`` for a quick look).

Workload: a serving loop (the MiniScheduler below, shaped like vLLM's Scheduler.schedule; at
most 96 running requests) runs ``--requests`` chat requests (default 2,000: conversations of
1-4 turns sharing four system prompts, each turn's prompt extending the previous turn's
history) through one KVCacheManager with ``--blocks`` blocks of 16 tokens (default 2,048).
Requests are admitted with get_computed_blocks + allocate_slots (chunked prefill under a
2,048-token budget), decode one token per step, are preempted (free + num_computed_tokens = 0)
when allocate_slots refuses and freed when they finish; prefix-cache hits, evictions and
preemptions all happen. Two configs: ``full`` (one full-attention group) and ``hybrid`` (full
attention + sliding window of 1,024 tokens, same block size). Recording is off for the
kvlab/vLLM comparison.

Both implementations run the identical loop in one process, interleaved step by step (one
scheduler step of A, one of B; the side that goes first alternates), so load from other work
on a shared machine hits both alike; garbage collection is off during a run. Every manager
call is timed with ``time.perf_counter_ns`` (the timer's own cost, calibrated, is subtracted)
and filed under its kind: get_computed_blocks, allocate_slots admission (a waiting request),
allocate_slots prefill chunk (a running request still in its prompt), allocate_slots decode,
free (finish or preempt), new_step_starts; Request() (prompt block hashing) and
append_output_token_ids are timed too. Per kind the ratio is the median over repeats of
(kvlab time / vLLM time); "manager total" sums the manager calls, "loop wall" is every
scheduler step (the benchmark's scheduler code included). Both sides must make the same
decisions: the runs' digests (allocation outcomes, hit lengths, block ids handed out,
preemptions, final free-queue order) and eviction counts are compared and must be equal.

Finally kvlab alone runs with a kvlab.trace Recorder attached vs none, interleaved the same
way (goal: on/off <= 2x).

Writes benchmarks/results/vs_vllm.md (``--out``); ``--label`` tags the run ("before"/"after").
"""

from __future__ import annotations

import os
import sys

# Block hashes depend on NONE_HASH, which depends on PYTHONHASHSEED: pin it (re-exec).
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

import argparse  # noqa: E402
import gc  # noqa: E402
import hashlib  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections import deque  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

BLOCK_SIZE = 16
SLIDING_WINDOW = 1024
MAX_MODEL_LEN = 16384
KINDS = (
    "get_computed_blocks",
    "allocate_slots admission",
    "allocate_slots prefill chunk",
    "allocate_slots decode",
    "free",
    "new_step_starts",
)
REQUEST_KINDS = ("Request() (prompt hashing)", "append_output_token_ids")


# ----------------------------------------------------------------------------- implementations
def load_vllm() -> SimpleNamespace:
    import torch
    import vllm
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )
    from vllm.v1.request import Request

    init_none_hash(sha256)
    return SimpleNamespace(
        name="vLLM",
        version=vllm.__version__,
        dtype=torch.bfloat16,
        KVCacheManager=KVCacheManager,
        KVCacheConfig=KVCacheConfig,
        KVCacheGroupSpec=KVCacheGroupSpec,
        FullAttentionSpec=FullAttentionSpec,
        SlidingWindowSpec=SlidingWindowSpec,
        hasher=get_request_block_hasher(BLOCK_SIZE, sha256),
        make_request=lambda rid, toks, hasher, max_tokens: Request(
            request_id=rid,
            prompt_token_ids=toks,
            sampling_params=SamplingParams(max_tokens=max_tokens),
            pooling_params=None,
            block_hasher=hasher,
        ),
    )


def load_kvlab() -> SimpleNamespace:
    import kvlab
    from kvlab.core.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )
    from kvlab.core.kv_cache_manager import KVCacheManager
    from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
    from kvlab.core.request import Request, SamplingParams

    init_none_hash(sha256)
    return SimpleNamespace(
        name="kvlab",
        version=getattr(kvlab, "__version__", "?"),
        dtype="bfloat16",
        KVCacheManager=KVCacheManager,
        KVCacheConfig=KVCacheConfig,
        KVCacheGroupSpec=KVCacheGroupSpec,
        FullAttentionSpec=FullAttentionSpec,
        SlidingWindowSpec=SlidingWindowSpec,
        hasher=get_request_block_hasher(BLOCK_SIZE, sha256),
        make_request=lambda rid, toks, hasher, max_tokens: Request(
            rid, toks, SamplingParams(max_tokens=max_tokens), None, block_hasher=hasher
        ),
    )


def make_manager(impl: SimpleNamespace, config: str, num_blocks: int, events: bool = False):
    common = dict(block_size=BLOCK_SIZE, num_kv_heads=8, head_size=128, dtype=impl.dtype)
    specs = [impl.FullAttentionSpec(**common)]
    if config == "hybrid":
        specs.append(impl.SlidingWindowSpec(**common, sliding_window=SLIDING_WINDOW))
    groups = [impl.KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    cfg = impl.KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    return impl.KVCacheManager(
        cfg,
        max_model_len=MAX_MODEL_LEN,
        hash_block_size=BLOCK_SIZE,
        max_num_batched_tokens=2048,
        enable_caching=True,
        enable_kv_cache_events=events,
    )


# ----------------------------------------------------------------------------- workload
@dataclass
class Conversation:
    system: list[int]
    turns: list[tuple[list[int], list[int]]]
    history: list[int] = field(default_factory=list)
    next_turn: int = 0


def make_conversations(seed: int, num_requests: int) -> list[Conversation]:
    """Conversations whose turns add up to exactly ``num_requests`` requests."""
    rng = random.Random(seed)
    systems = [[rng.randrange(1, 50_000) for _ in range(n)] for n in (384, 512, 768, 1024)]
    convs, left = [], num_requests
    while left > 0:
        n = min(rng.randint(1, 4), left)
        left -= n
        turns = [
            (
                [rng.randrange(1, 50_000) for _ in range(rng.randint(20, 200))],
                [rng.randrange(1, 50_000) for _ in range(rng.randint(16, 160))],
            )
            for _ in range(n)
        ]
        convs.append(Conversation(rng.choice(systems), turns))
    return convs


class MiniScheduler:
    """Just enough of vLLM's Scheduler to drive a KVCacheManager; every call timed by kind."""

    def __init__(self, impl, manager, convs, max_num_seqs=96, token_budget=2048, max_waiting=192):
        self.impl, self.m = impl, manager
        self.convs = deque(convs)
        self.max_num_seqs, self.token_budget, self.max_waiting = (
            max_num_seqs,
            token_budget,
            max_waiting,
        )
        self.waiting: deque = deque()
        self.running: list = []
        self.t = dict.fromkeys(KINDS + REQUEST_KINDS, 0)
        self.n = dict.fromkeys(KINDS + REQUEST_KINDS, 0)
        self.preemptions = self.steps = self.finished = self.wall = 0
        self.digest = hashlib.blake2b(digest_size=16)
        self._next_id = 0

    def _note(self, *values) -> None:
        self.digest.update(repr(values).encode())

    def _note_blocks(self, blocks) -> None:
        if blocks is None:
            self._note(None)
        else:
            self._note(tuple(tuple(b.block_id for b in g) for g in blocks.blocks))

    def _submit(self, conv: Conversation) -> None:
        user, outputs = conv.turns[conv.next_turn]
        prompt = (conv.history or conv.system) + user
        self._next_id += 1
        pc = time.perf_counter_ns
        t0 = pc()
        req = self.impl.make_request(f"req-{self._next_id}", prompt, self.impl.hasher, len(outputs))
        self.t["Request() (prompt hashing)"] += pc() - t0
        self.n["Request() (prompt hashing)"] += 1
        self.waiting.append((req, conv))

    @property
    def done(self) -> bool:
        return not (self.convs or self.waiting or self.running)

    def advance(self) -> None:
        """Queue new conversations, then run one scheduler step; adds its time to ``wall``."""
        t0 = time.perf_counter_ns()
        while self.convs and len(self.waiting) < self.max_waiting:
            self._submit(self.convs.popleft())
        self.step()
        self.wall += time.perf_counter_ns() - t0

    def step(self) -> None:
        pc, t, n, m = time.perf_counter_ns, self.t, self.n, self.m
        self.steps += 1
        t0 = pc()
        m.new_step_starts()
        t["new_step_starts"] += pc() - t0
        n["new_step_starts"] += 1
        budget, scheduled = self.token_budget, []
        for item in list(self.running):
            req = item[0]
            if item not in self.running:
                continue  # preempted by an earlier request this step
            num_new = min(req.num_tokens - req.num_computed_tokens, budget)
            if num_new <= 0:
                continue
            kind = (
                "allocate_slots prefill chunk"
                if req.num_computed_tokens < req.num_prompt_tokens
                else "allocate_slots decode"
            )
            while True:
                t0 = pc()
                new_blocks = m.allocate_slots(req, num_new)
                t[kind] += pc() - t0
                n[kind] += 1
                self._note_blocks(new_blocks)
                if new_blocks is not None:
                    scheduled.append((item, num_new))
                    budget -= num_new
                    break
                victim = self.running.pop()
                self._preempt(victim)
                if victim is item:
                    break
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            req, conv = self.waiting[0]
            t0 = pc()
            hit_blocks, num_hit = m.get_computed_blocks(req)
            t["get_computed_blocks"] += pc() - t0
            n["get_computed_blocks"] += 1
            num_new = min(req.num_tokens - num_hit, budget)
            t0 = pc()
            new_blocks = m.allocate_slots(req, num_new, num_hit, hit_blocks)
            t["allocate_slots admission"] += pc() - t0
            n["allocate_slots admission"] += 1
            self._note(num_hit)
            self._note_blocks(new_blocks)
            if new_blocks is None:
                break
            self.waiting.popleft()
            req.num_computed_tokens = num_hit
            self.running.append((req, conv))
            scheduled.append(((req, conv), num_new))
            budget -= num_new
        self._execute(scheduled)

    def _free(self, req) -> None:
        pc = time.perf_counter_ns
        t0 = pc()
        self.m.free(req)
        self.t["free"] += pc() - t0
        self.n["free"] += 1

    def _preempt(self, item) -> None:
        self._free(item[0])
        item[0].num_computed_tokens = 0
        item[0].num_preemptions += 1
        self.waiting.appendleft(item)
        self.preemptions += 1

    def _execute(self, scheduled: list) -> None:
        pc = time.perf_counter_ns
        running_ids = {id(item[0]) for item in self.running}
        for (req, conv), num_new in scheduled:
            if id(req) not in running_ids:
                continue  # preempted after it was scheduled
            req.num_computed_tokens += num_new
            if req.num_computed_tokens < req.num_tokens:
                continue  # chunked prefill continues next step
            outputs = conv.turns[conv.next_turn][1]
            done = req.num_output_tokens
            if done < len(outputs):
                t0 = pc()
                req.append_output_token_ids(outputs[done])
                self.t["append_output_token_ids"] += pc() - t0
                self.n["append_output_token_ids"] += 1
            if req.num_output_tokens >= len(outputs):
                self.running.remove((req, conv))
                self._free(req)
                self.finished += 1
                conv.history = list(req.all_token_ids)
                conv.next_turn += 1
                if conv.next_turn < len(conv.turns):
                    self._submit(conv)

    def final_digest(self) -> str:
        queue = self.m.block_pool.free_block_queue.get_all_free_blocks()
        self._note(self.preemptions, self.steps, tuple(b.block_id for b in queue))
        return self.digest.hexdigest()


# ----------------------------------------------------------------------------- measurement
def timer_overhead_ns() -> float:
    """Cost of one ``t0 = pc(); ...; acc += pc() - t0`` bracket around nothing (ns)."""
    pc, acc, best = time.perf_counter_ns, 0, float("inf")
    for _ in range(5):
        start = pc()
        for _ in range(100_000):
            t0 = pc()
            acc += pc() - t0
        best = min(best, (pc() - start) / 100_000)
    return best - 15.0  # the loop's own cost, roughly


def run_lockstep(sides: list[tuple], config: str, args, events: bool = False) -> list[dict]:
    """Run the workload once per side, the sides advanced step by step in turn.

    ``sides`` holds ``(impl, recorder_factory or None)``. Interleaving per scheduler step (the
    side that goes first alternates) exposes both sides to the same load on a shared machine.
    """
    scheds, keep = [], []
    for impl, recorder_factory in sides:
        manager = make_manager(impl, config, args.blocks, events)
        keep.append(recorder_factory(manager) if recorder_factory else None)
        scheds.append(MiniScheduler(impl, manager, make_conversations(args.seed, args.requests)))
    gc.collect()
    gc.disable()
    try:
        step = 0
        while not all(s.done for s in scheds):
            order = scheds if step % 2 == 0 else scheds[::-1]
            for sched in order:
                if not sched.done:
                    sched.advance()
            step += 1
    finally:
        gc.enable()
    return [
        {
            "t": sched.t,
            "n": sched.n,
            "wall": sched.wall,
            "digest": sched.final_digest(),
            "preemptions": sched.preemptions,
            "steps": sched.steps,
            "finished": sched.finished,
            "evictions": sum(
                len(e.block_hashes)
                for e in sched.m.take_events()
                if type(e).__name__ == "BlockRemoved"
            ),
        }
        for sched in scheds
    ]


def corrected(run: dict, kind: str, overhead: float) -> float:
    return max(run["t"][kind] - overhead * run["n"][kind], 1.0)


def compare(vllm, kvlab, config, args, overhead) -> dict:
    runs = {"vLLM": [], "kvlab": []}
    for rep in range(args.repeat):
        v, k = run_lockstep([(vllm, None), (kvlab, None)], config, args)
        runs["vLLM"].append(v)
        runs["kvlab"].append(k)
        print(f"  {config}: repeat {rep + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    digests = {r["digest"] for rs in runs.values() for r in rs}
    if len(digests) != 1:
        raise SystemExit(f"{config}: kvlab and vLLM made different decisions ({digests})")
    rows = {}
    manager_kinds = KINDS
    for kind in KINDS + REQUEST_KINDS:
        ratios = [
            corrected(k, kind, overhead) / corrected(v, kind, overhead)
            for k, v in zip(runs["kvlab"], runs["vLLM"])
        ]
        per_call = {
            name: statistics.median(corrected(r, kind, overhead) for r in rs)
            / max(rs[0]["n"][kind], 1)
            / 1000
            for name, rs in runs.items()
        }
        rows[kind] = (runs["vLLM"][0]["n"][kind], per_call["vLLM"], per_call["kvlab"],
                      statistics.median(ratios))  # fmt: skip

    def total(r):
        return sum(corrected(r, k, overhead) for k in manager_kinds)

    tot_ratios = [total(k) / total(v) for k, v in zip(runs["kvlab"], runs["vLLM"])]
    wall_ratios = [k["wall"] / v["wall"] for k, v in zip(runs["kvlab"], runs["vLLM"])]
    rows["manager total"] = (
        sum(runs["vLLM"][0]["n"][k] for k in manager_kinds),
        statistics.median(total(r) for r in runs["vLLM"]) / 1e6,
        statistics.median(total(r) for r in runs["kvlab"]) / 1e6,
        statistics.median(tot_ratios),
    )
    rows["loop wall"] = (
        runs["vLLM"][0]["steps"],
        statistics.median(r["wall"] for r in runs["vLLM"]) / 1e6,
        statistics.median(r["wall"] for r in runs["kvlab"]) / 1e6,
        statistics.median(wall_ratios),
    )
    first = runs["vLLM"][0]
    # One more run each with KV events on, to count evictions (cached blocks reused).
    with_events = run_lockstep([(vllm, None), (kvlab, None)], config, args, events=True)
    evictions = {r["evictions"] for r in with_events}
    if len(evictions) != 1:
        raise SystemExit(f"{config}: kvlab and vLLM evicted different numbers of blocks")
    return {
        "evictions": evictions.pop(),
        "rows": rows,
        "steps": first["steps"],
        "preemptions": first["preemptions"],
        "finished": first["finished"],
        "tot_ratios": tot_ratios,
    }


def recording(kvlab, config, args) -> tuple[float, float, float]:
    from kvlab.trace import Recorder

    off, on = [], []
    for _ in range(args.repeat):
        r_off, r_on = run_lockstep(
            [(kvlab, None), (kvlab, lambda m: Recorder().attach(m))], config, args
        )
        if r_off["digest"] != r_on["digest"]:
            raise SystemExit(f"{config}: recording changed kvlab's decisions")
        off.append(r_off["wall"])
        on.append(r_on["wall"])
    ratios = [b / a for a, b in zip(off, on)]
    return statistics.median(off) / 1e9, statistics.median(on) / 1e9, statistics.median(ratios)


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores (shared), {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--blocks", type=int, default=2048)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--configs", default="full,hybrid")
    p.add_argument("--no-recording", action="store_true", help="skip recording on vs off")
    p.add_argument("--label", default="", help="heading for this run in the results file")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "vs_vllm.md"))
    p.add_argument("--append", action="store_true", help="append to --out instead of replacing")
    args = p.parse_args(argv)

    vllm, kvlab = load_vllm(), load_kvlab()
    overhead = timer_overhead_ns()
    lines = [
        f"## {args.label or 'kvlab vs vLLM'}",
        "",
        f"Machine: {machine()}; vLLM {vllm.version}, kvlab {kvlab.version}; "
        f"load average at start {', '.join(f'{x:.1f}' for x in os.getloadavg())}.",
        f"Workload: {args.requests} chat requests, {args.blocks} blocks of {BLOCK_SIZE}, "
        f"seed {args.seed}, {args.repeat} repeats, A/B interleaved per step, recording off; "
        f"timer overhead {overhead:.0f} ns/call subtracted.",
        "",
    ]
    for config in args.configs.split(","):
        res = compare(vllm, kvlab, config, args, overhead)
        desc = "full attention" if config == "full" else f"full + sliding window {SLIDING_WINDOW}"
        lines += [
            f"### {config} ({desc}): {res['steps']} steps, {res['finished']} requests finished, "
            f"{res['preemptions']} preemptions, {res['evictions']} cached blocks evicted; "
            "identical decisions: yes",
            "",
            "| call kind | calls | vLLM µs/call | kvlab µs/call | kvlab/vLLM (median) |",
            "|---|---:|---:|---:|---:|",
        ]
        for kind, (count, v, k, ratio) in res["rows"].items():
            unit = "" if kind not in ("manager total", "loop wall") else " (ms total)"
            lines.append(f"| {kind}{unit} | {count} | {v:.2f} | {k:.2f} | {ratio:.2f} |")
        lines += ["", "manager total ratio per repeat: "
                  + ", ".join(f"{x:.2f}" for x in res["tot_ratios"]), ""]  # fmt: skip
        print("\n".join(lines[-len(res["rows"]) - 7 :]), flush=True)
    if not args.no_recording:
        for config in args.configs.split(","):
            off, on, ratio = recording(kvlab, config, args)
            line = (
                f"Recording ({config}): kvlab loop {off:.2f} s off, {on:.2f} s with a "
                f"kvlab.trace Recorder: on/off {ratio:.2f}x (goal <= 2x)."
            )
            print(line, flush=True)
            lines += [line, ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    if args.append and out.exists():
        text = out.read_text() + "\n" + text
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
