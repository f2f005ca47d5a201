"""How long a what-if sweep over the full Mooncake conversation trace takes (2-core machine).

    PYTHONPATH=. python benchmarks/bench_traffic.py [TRACE] [--block-size 512]

Times hashing once, then the sequence-clock replay of each cache at 7 capacities; prints a
Markdown table (seconds, and hit rate as a sanity column).
"""

from __future__ import annotations

import argparse
import time

from kvlab.traffic import prepare_blocks, read_mooncake, replay_sequence

CAPACITIES = [10**4, 10**5, 10**6, 3 * 10**6, 10**7, 5 * 10**7, 10**9]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?", default="/work/shared/data/mooncake/conversation_trace.jsonl")
    ap.add_argument("--block-size", type=int, default=512)
    ap.add_argument("--caches", default="vllm,radix,nano")
    args = ap.parse_args()
    t0 = time.perf_counter()
    reqs = read_mooncake(args.trace)
    blocked = prepare_blocks(reqs, args.block_size)
    t_prep = time.perf_counter() - t0
    print(f"{len(reqs):,} requests, {blocked.num_prompt_tokens:,} prompt tokens, "
          f"block size {args.block_size}: read + hash {t_prep:.1f} s\n")
    print("| cache | capacities | seconds (7 replays) | hit rate at 1e6 / 1e7 / 1e9 tokens |")
    print("|---|---|---|---|")
    total = t_prep
    for cache in args.caches.split(","):
        t = time.perf_counter()
        rates = {c: replay_sequence(blocked, cache, c).hit_rate for c in CAPACITIES}
        dt = time.perf_counter() - t
        total += dt
        print(f"| {cache} | 7 | {dt:.1f} | {rates[10**6]:.3f} / {rates[10**7]:.3f} / "
              f"{rates[10**9]:.3f} |")
    print(f"\ntotal (read, hash, all replays): {total:.1f} s")


if __name__ == "__main__":
    main()
