"""What-if at scale, side by side in one run: exactness, the peers, speed (CPU seconds), memory.

    PYTHONPATH=. BENCH_VENV/bin/python benchmarks/bench_traffic.py [--random 100] [--scale 100]

BENCH_VENV is a benchmark-only environment with kvlab's own requirements plus the peers:
``pip install kvcache-simulator==0.1.3 libcachesim==0.3.5`` (never kvlab dependencies). Every
time is CPU time (``time.process_time``; the peer's C++ child through ``RUSAGE_CHILDREN``), not
wall time: the machine is shared. Prints Markdown (benchmarks/results/traffic.md keeps a copy).

1. Exactness: the one-pass curve (kvlab.traffic.stack) against kvlab.core replayed at each
   capacity, request by request, on both Mooncake traces and on random traces
   (kvlab.traffic.synthetic); the O(1) nano-vllm cache against the faithful NanoBlockManager;
   the lean radix tree against kvlab.sglang's faithful RadixCache (``--only radix``: alone).
2. Peers on the same window (second half): kvcache-simulator's LRU and optimal (C++ backend)
   beside kvlab's vLLM and Belady; libCacheSim's LRU driven in vLLM's freeing order.
3. Speed: the vLLM curve at 7 capacities against kvcache-simulator's C++ backend (both from
   the trace file; its rows are left out where it is not installed), nano-vllm and radix (the
   lean tree of kvlab.traffic.radix, and kvlab.sglang's faithful replays) against the vLLM
   curve.
4. Scale: 1x, 10x and 100x the conversation trace streamed through the curve (a child process
   each): peak memory stays bounded by the largest capacity, not by the trace.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import subprocess
import sys
import time

from kvlab.traffic import prepare_blocks, read_mooncake, read_mooncake_lines, replay_sequence
from kvlab.traffic.belady import belady
from kvlab.traffic.lru import LRUPrefixCache
from kvlab.traffic.radix import radix_curve
from kvlab.traffic.stack import lru_curve
from kvlab.traffic.synthetic import random_mooncake_lines

DATA = "/work/shared/data/mooncake"
TRACES = {"conversation": f"{DATA}/conversation_trace.jsonl",
          "synthetic": f"{DATA}/synthetic_trace.jsonl"}  # fmt: skip
CAPS = [10**4, 10**5, 10**6, 3 * 10**6, 10**7, 5 * 10**7, 10**9]
BS = 512


def cpu() -> float:
    return time.process_time()


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def exactness(n_random: int) -> None:
    print("## 1. Exactness: one pass = per-capacity replay, request by request\n")
    print("| trace | capacities | one pass = kvlab.core (every request, evictions, refusals) "
          "| capacities handed over (from request) |")
    print("|---|---|---|---|")
    for name, path in TRACES.items():
        b = prepare_blocks(read_mooncake(path), BS)
        points = lru_curve(b, CAPS)
        same = all(
            (p.per_request_hit_tokens, p.evicted_blocks, p.rejected)
            == ((r := replay_sequence(b, "vllm", c)).per_request_hit_tokens, r.evicted_blocks,
                r.rejected)
            for c, p in zip(CAPS, points, strict=True))  # fmt: skip
        handed = ", ".join(f"{c:.0e}: {p.replayed_from}" for c, p in zip(CAPS, points,
                                                                          strict=True)
                           if p.replayed_from is not None)  # fmt: skip
        print(f"| {name} | 7 (1e4 ... 1e9 tokens) | {same} | {handed or 'none'} |")
    ok = hand = 0
    t = cpu()
    for seed in range(n_random):
        rng = random.Random(seed)
        b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 40)),
                           rng.choice([16, 64, 128, 512]))  # fmt: skip
        caps = sorted({rng.randint(1, 80) * b.block_size for _ in range(6)} | {10**6})
        pts = lru_curve(b, caps)
        hand += sum(p.replayed_from is not None for p in pts)
        ok += all(p.per_request_hit_tokens == replay_sequence(b, "vllm", c).per_request_hit_tokens
                  for c, p in zip(caps, pts, strict=True))  # fmt: skip
    print(f"| {n_random} random traces (40 requests, block 16/64/128/512) | 7 each | "
          f"{ok} of {n_random} equal | {hand} hand-overs ({cpu() - t:.0f} CPU s) |\n")
    print("nano-vllm: the O(1) cache (kvlab.traffic.lru, cap_hit=False) and its one pass "
          "against the faithful NanoBlockManager (kvlab.nanovllm):\n")
    print("| trace | capacity (tokens) | O(1) = faithful (every request) | one pass = faithful "
          "| faithful CPU s | O(1) CPU s |")
    print("|---|---|---|---|---|---|")
    for name, path in TRACES.items():
        b = prepare_blocks(read_mooncake(path), BS)
        for cap in (10**5, 10**6):
            t = cpu()
            faithful = replay_sequence(b, "nano", cap).per_request_hit_tokens
            t_f = cpu() - t
            t = cpu()
            sim = LRUPrefixCache(cap // BS, BS, cap_hit=False, first_block_id=0)
            fast = [max(h, 0) for h in sim.serve_all(b.keys, [r.num_prompt_tokens
                                                              for r in b.requests])]
            t_o = cpu() - t
            one = lru_curve(b, [cap], cap_hit=False)[0].per_request_hit_tokens
            print(f"| {name} | {cap:,} | {fast == faithful} | {one == faithful} | {t_f:.1f} "
                  f"| {t_o:.2f} |")
    print()


def radix_exactness(n_random: int) -> None:
    print("radix: the lean tree (kvlab.traffic.radix) against kvlab.sglang's faithful RadixCache "
          "(replay_sequence(faithful=True)):\n")
    print("| trace | capacities | lean curve = faithful (every request, evictions, refusals) "
          "| faithful CPU s | lean curve CPU s |")
    print("|---|---|---|---|---|")
    for name, path in TRACES.items():
        b = prepare_blocks(read_mooncake(path), BS)
        t = cpu()
        want = [replay_sequence(b, "radix", c, faithful=True) for c in CAPS]
        t_f = cpu() - t
        t = cpu()
        points = radix_curve(b, CAPS)
        t_l = cpu() - t
        same = all((p.per_request_hit_tokens, p.evicted_blocks, p.rejected)
                   == (r.per_request_hit_tokens, r.evicted_blocks, r.rejected)
                   for p, r in zip(points, want, strict=True))  # fmt: skip
        print(f"| {name} | 7 (1e4 ... 1e9 tokens) | {same} | {t_f:.2f} | {t_l:.2f} |")
    ok = 0
    for seed in range(n_random):
        rng = random.Random(seed)
        b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 40)),
                           rng.choice([16, 64, 128, 512]))  # fmt: skip
        caps = sorted({rng.randint(1, 80) * b.block_size for _ in range(6)} | {10**6})
        ok += all((p.per_request_hit_tokens, p.evicted_blocks, p.rejected)
                  == ((r := replay_sequence(b, "radix", c, faithful=True)).per_request_hit_tokens,
                      r.evicted_blocks, r.rejected)
                  for c, p in zip(caps, radix_curve(b, caps), strict=True))  # fmt: skip
    print(f"| {n_random} random traces (40 requests, block 16/64/128/512) | 7 each | "
          f"{ok} of {n_random} equal | | |\n")


def peers() -> None:
    from kvcache_sim.cpp_backend import run_cpp_sweep
    from kvcache_sim.trace import parse_trace_file

    from kvlab.traffic.peer_policies import replay_policy

    print("## 2. Against kvcache-simulator (C++ backend) on the second half of each trace\n")
    print("Capacities in blocks of 512 tokens; hit rate = hit tokens / prompt tokens of "
          "requests n/2 ... n. kvlab: vLLM (LRU) and Belady under vLLM's rules.\n")
    print("| trace | capacity (tokens) | refused by kvlab | kvcache-sim LRU | kvlab vLLM | diff "
          "| kvcache-sim optimal | kvlab Belady, bypass | diff | kvlab Belady, vLLM's rules "
          "| libCacheSim LRU = kvlab |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, path in TRACES.items():
        reqs = read_mooncake(path)
        b = prepare_blocks(reqs, BS)
        w = len(reqs) // 2
        tr = parse_trace_file(path, block_size=BS)
        blocks = [c // BS for c in CAPS]
        res = run_cpp_sweep(tr, capacities=blocks, policies=["lru", "optimal"],
                            warmup_requests=w)  # fmt: skip
        points = lru_curve(b, CAPS, warmup_requests=w)
        for cap, nblk, p in zip(CAPS, blocks, points, strict=True):
            lru, opt = res.results[("lru", nblk)], res.results[("optimal", nblk)]
            if lru.measurementMode != "fixed_window":
                print(f"| {name} | {cap:,} | | not filled before the window (omitted by the "
                      "peer) | | | | | | | |")
                continue
            bel = sum(belady(b, cap).per_request_hit_tokens[w:]) / p.prompt_tokens
            byp = sum(belady(b, cap, bypass=True).per_request_hit_tokens[w:]) / p.prompt_tokens
            lcs = replay_policy(b, "lru", cap)
            print(f"| {name} | {cap:,} | {p.rejected} | {lru.hitRate:.4f} | "
                  f"{p.hit_tokens / p.prompt_tokens:.4f} | "
                  f"{p.hit_tokens / p.prompt_tokens - lru.hitRate:+.4f} | {opt.hitRate:.4f} | "
                  f"{byp:.4f} | {byp - opt.hitRate:+.4f} | {bel:.4f} | "
                  f"{lcs.per_request_hit_tokens == p.per_request_hit_tokens} |")
        print(f"| {name} | infinite | | ceiling {res.ceiling.hitRate:.4f} | | | | | | | |")
    print()


def _peer_cpu(path: str) -> tuple[float, float]:
    from kvcache_sim.cpp_backend import ensure_cpp_simulator, run_cpp_sweep
    from kvcache_sim.trace import parse_trace_file

    ensure_cpp_simulator()
    t, c = cpu(), children_cpu()
    tr = parse_trace_file(path, block_size=BS)
    run_cpp_sweep(tr, capacities=[x // BS for x in CAPS], policies=["lru"],
                  warmup_requests=len(tr.request_starts) // 2)  # fmt: skip
    return cpu() - t + children_cpu() - c, children_cpu() - c


def speed() -> None:
    print("## 3. Speed (CPU seconds, conversation trace, 7 capacities, block size 512)\n")
    path = TRACES["conversation"]
    try:
        import kvcache_sim  # noqa: F401
    except ImportError:
        has_peer = False
        print("kvcache-simulator is not installed here (see BENCH_VENV): its rows are left out.\n")
    else:
        has_peer = True
    rows = []
    for _ in range(3):  # NOTE: best of three for both sides: the machine is shared
        t = cpu()
        b = prepare_blocks(read_mooncake(path), BS)
        t_read = cpu() - t
        t = cpu()
        lru_curve(b, CAPS, warmup_requests=len(b) // 2)
        t_curve = cpu() - t
        t = cpu()
        lru_curve(b, CAPS, cap_hit=False)
        t_nano = cpu() - t
        t = cpu()
        radix_curve(b, CAPS)
        t_lean = cpu() - t
        t = cpu()
        for cap in CAPS:
            replay_sequence(b, "radix", cap)
        t_lean7 = cpu() - t
        peer_total, peer_child = _peer_cpu(path) if has_peer else (float("nan"),) * 2
        rows.append((t_read, t_curve, t_nano, t_lean, t_lean7, peer_total, peer_child))
    t_read, t_curve, t_nano, t_lean, t_lean7, peer_total, peer_child = (
        min(r[i] for r in rows) for i in range(7))
    t = cpu()
    faithful = [replay_sequence(b, "radix", cap, faithful=True) for cap in CAPS]
    t_radix = cpu() - t
    same = all(f.per_request_hit_tokens == p.per_request_hit_tokens
               and (f.evicted_blocks, f.rejected) == (p.evicted_blocks, p.rejected)
               for f, p in zip(faithful, radix_curve(b, CAPS), strict=True))  # fmt: skip
    print("| what | CPU s | ratio |")
    print("|---|---|---|")
    print(f"| kvlab: read the trace + block keys | {t_read:.2f} | |")
    print(f"| kvlab: vLLM curve, one pass | {t_curve:.2f} | 1 |")
    if has_peer:
        print(f"| **kvlab: trace file to vLLM curve** | **{t_read + t_curve:.2f}** | "
              f"{(t_read + t_curve) / peer_total:.2f} x the peer |")
        print(f"| kvcache-simulator (C++): trace file to LRU curve (Python parse + C++) | "
              f"{peer_total:.2f} | 1 |")
        print(f"| kvcache-simulator: its C++ process alone | {peer_child:.2f} | |")
    print(f"| kvlab: nano-vllm curve, one pass | {t_nano:.2f} | {t_nano / t_curve:.2f} x vLLM |")
    print(f"| kvlab: radix curve, lean tree (radix_curve) | {t_lean:.2f} | "
          f"{t_lean / t_curve:.2f} x vLLM |")
    print(f"| kvlab: radix, 7 lean replays (replay_sequence) | {t_lean7:.2f} | "
          f"{t_lean7 / t_curve:.2f} x vLLM |")
    print(f"| kvlab: radix, 7 faithful replays (kvlab.sglang) | {t_radix:.2f} | "
          f"{t_radix / t_curve:.1f} x vLLM |\n")
    print(f"Lean radix = faithful kvlab.sglang replay at the 7 capacities (every request, "
          f"evictions, refusals): {same}.\n")


_SCALE = """
import resource, sys, time
from kvlab.traffic import read_mooncake
from kvlab.traffic.blocks import hash_id_keys
from kvlab.traffic.stack import LRUCurve
from kvlab.traffic.synthetic import extend_trace
copies = int(sys.argv[1])
base = read_mooncake("{path}")
t = time.process_time()
curve = LRUCurve(512, {caps}, keep_per_request=False)
n = 0
for r in extend_trace(base, copies):
    curve.feed(hash_id_keys(r, 512), r.num_prompt_tokens)
    n += 1
pts = curve.finish()
print(n, time.process_time() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      [round(p.hit_tokens / p.prompt_tokens, 4) for p in pts])
"""


def scale(copies: int) -> None:
    print(f"## 4. Scale: {copies}x the conversation trace, streamed\n")
    code = _SCALE.format(path=TRACES["conversation"], caps=CAPS)
    print("| copies | requests | CPU s | peak RSS (MiB) | hit rate at 1e4 ... 1e9 tokens |")
    print("|---|---|---|---|---|")
    for k in (1, 10, copies):
        out = subprocess.run([sys.executable, "-c", code, str(k)], capture_output=True,
                             text=True, check=True).stdout.split(maxsplit=3)  # fmt: skip
        print(f"| {k} | {int(out[0]):,} | {float(out[1]):.1f} | {int(out[2]) / 1024:.0f} | "
              f"{out[3].strip()} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", type=int, default=100)
    ap.add_argument("--scale", type=int, default=100)
    ap.add_argument("--only", default="exactness,peers,speed,scale",
                    help="comma-separated parts; 'radix' runs only the radix exactness table")
    args = ap.parse_args()
    parts = args.only.split(",")
    print(f"Machine: {platform.machine()} ({os.cpu_count()} CPUs, shared), Python "
          f"{platform.python_version()}; CPU seconds (time.process_time).\n")
    if "exactness" in parts:
        exactness(args.random)
    if "exactness" in parts or "radix" in parts:
        radix_exactness(args.random)
    if "peers" in parts:
        peers()
    if "speed" in parts:
        speed()
    if "scale" in parts:
        scale(args.scale)


if __name__ == "__main__":
    main()
