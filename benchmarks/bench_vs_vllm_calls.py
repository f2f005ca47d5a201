"""Benchmark: one admission (allocate_slots of a new request) and one free, kvlab vs vLLM 0.22.1.

A narrower companion of bench_vs_vllm.py (same loaders and managers; runs where vLLM 0.22.1 is
importable, kvlab on PYTHONPATH)::

    PYTHONHASHSEED=0 PYTHONPATH=$PWD ORACLE_VENV/bin/python benchmarks/bench_vs_vllm_calls.py

``--requests`` requests (default 600) of 1,900 tokens sharing an 800-token prefix go through
one manager per implementation (4,096 blocks of 16): get_computed_blocks, allocate_slots (timed:
"admission", with prefix hits after the first), then free (timed). kvlab and vLLM alternate per
request (the side that goes first alternates), garbage collection is off, and the ratio is the
median over requests of kvlab time / vLLM time for the same request, so load from other jobs on
a shared machine hits both alike. Prints one line per config and call kind.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":  # block hashes depend on it (see bench_vs_vllm)
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

import argparse  # noqa: E402
import gc  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_vllm as bench  # noqa: E402


def run(impls: dict, config: str, num_requests: int, seed: int) -> dict:
    """Per side and kind, the ns of each request's call."""
    managers = {name: bench.make_manager(impl, config, 4096) for name, impl in impls.items()}
    times = {name: {"admission": [], "free": []} for name in impls}
    rnd = random.Random(seed)
    prefix = [rnd.randrange(1000) for _ in range(800)]
    pc = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        for i in range(num_requests):
            tokens = prefix + [rnd.randrange(1000) for _ in range(1100)]
            names = list(impls) if i % 2 == 0 else list(impls)[::-1]
            for name in names:
                impl, m = impls[name], managers[name]
                req = impl.make_request(f"r{i}", tokens, impl.hasher, 16)
                hits, num_hit = m.get_computed_blocks(req)
                t0 = pc()
                out = m.allocate_slots(req, len(tokens) - num_hit, num_hit, hits)
                t1 = pc()
                if out is None:
                    raise SystemExit(f"{name}: allocate_slots refused request {i}")
                req.num_computed_tokens = len(tokens)
                t2 = pc()
                m.free(req)
                t3 = pc()
                times[name]["admission"].append(t1 - t0)
                times[name]["free"].append(t3 - t2)
    finally:
        gc.enable()
    return times


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--configs", default="full,hybrid")
    args = p.parse_args(argv)
    impls = {"vLLM": bench.load_vllm(), "kvlab": bench.load_kvlab()}
    for config in args.configs.split(","):
        times = run(impls, config, args.requests, args.seed)
        for kind in ("admission", "free"):
            k, v = times["kvlab"][kind], times["vLLM"][kind]
            ratio = statistics.median(a / b for a, b in zip(k, v))
            print(f"{config:6s} {kind:9s}: vLLM {statistics.median(v) / 1e3:7.1f} µs, kvlab "
                  f"{statistics.median(k) / 1e3:7.1f} µs (medians); kvlab/vLLM median of "
                  f"per-request ratios {ratio:.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
