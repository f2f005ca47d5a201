"""How long the timed clock takes on a Mooncake trace, next to the sequence clock (2-core machine).

    PYTHONPATH=. python benchmarks/bench_traffic_timed.py [TRACE] [--capacities 1e5,1e6,1e7]
        [--block-size 512] [--step-by-step]

Hashes the trace once, then replays vLLM (kvlab.core) at each capacity on the sequence clock
and on the timed clock (kvlab.traffic.timed, default ServiceModel and budgets), side by side;
``--step-by-step`` adds the timed clock without its decode fast-forward (same results, checked
here) to show what the fast-forward saves. Prints a Markdown table: seconds per replay, the
ratios, and the hit rates / preemptions / queueing delay as sanity columns. Times are CPU
seconds of this process (``time.process_time``), steadier than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import time

from kvlab.traffic import prepare_blocks, read_mooncake, replay_sequence, replay_timed


def _timed(fn, *args, **kwargs):
    """(fn(...), CPU seconds of this process): the machine is shared, so wall time is noisier."""
    t = time.process_time()
    out = fn(*args, **kwargs)
    return out, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?",
                    default="/work/shared/data/mooncake/conversation_trace.jsonl")
    ap.add_argument("--capacities", default="1e5,1e6,1e7")
    ap.add_argument("--block-size", type=int, default=512)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--step-by-step", action="store_true")
    args = ap.parse_args()
    caps = [int(float(c)) for c in args.capacities.split(",")]
    reqs, t_read = _timed(read_mooncake, args.trace, args.limit)
    blocked, t_hash = _timed(prepare_blocks, reqs, args.block_size)
    t_prep = t_read + t_hash
    print(f"{len(blocked):,} requests, {blocked.num_prompt_tokens:,} prompt tokens, block size "
          f"{args.block_size}: read + hash {t_prep:.1f} CPU s\n")
    head = "| capacity (tokens) | sequence (CPU s) | timed (CPU s) | timed / sequence |"
    line = "|---|---|---|---|"
    if args.step_by_step:
        head += " timed, step by step (CPU s) | fast-forward speed-up |"
        line += "---|---|"
    print(head + " hit rate seq / timed | preemptions | steps | mean / p99 wait (ms) |")
    print(line + "---|---|---|---|")
    for cap in caps:
        seq, t_seq = _timed(replay_sequence, blocked, "vllm", cap)
        tim, t_tim = _timed(replay_timed, blocked, "vllm", cap)
        row = f"| {cap:,} | {t_seq:.1f} | {t_tim:.1f} | {t_tim / t_seq:.0f}x |"
        if args.step_by_step:
            slow, t_slow = _timed(replay_timed, blocked, "vllm", cap, fast_forward=False)
            assert slow.to_dict() == tim.to_dict(), "fast-forward changed the result"
            row += f" {t_slow:.1f} | {t_slow / t_tim:.1f}x |"
        print(f"{row} {seq.hit_rate:.3f} / {tim.hit_rate:.3f} | {tim.preemptions:,} | "
              f"{tim.num_steps:,} | {tim.mean_queueing_delay_ms:,.0f} / "
              f"{tim.p99_queueing_delay_ms:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
