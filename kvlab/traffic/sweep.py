"""A what-if sweep: one trace through several caches, capacities and block sizes.

The API behind ``kvlab whatif``: ``sweep`` cuts the work into independent tasks
(``sweep_tasks``: per block size the infinite cache, the vLLM and nano-vllm curves in one pass
each, the radix curve (``radix.radix_curve``), Belady at each capacity) and runs them serially,
on local processes (``jobs``) or on a Dask cluster (``client``), with the same results
(``parallel.py``). The infinite-cache row of each block size has ``capacity_tokens`` None in
``rows``.

``warmup`` (a fraction of the requests, as the peers' "second half" = 0.5) replays the first
``floor(n * warmup)`` requests without counting them. ``sweep_models`` sizes a model at each
budget in bytes (``sizing.py``) and ``sweep_fleet`` routes the trace across replicas
(``fleet.py``), through the same task runner. ``sweep_rows`` adds, where Belady ran beside
vLLM, the split of the infinite cache's hits: ``hits_lost_to_capacity`` (infinite - belady)
and ``hits_lost_to_lru`` (belady - vllm).

Examples:
    >>> from kvlab.traffic import read_mooncake_lines
    >>> reqs = read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    ...     '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}'])
    >>> [(r["cache"], r["block_size"], r["capacity_tokens"], r["hit_tokens"])
    ...  for r in sweep_rows(sweep(reqs, ["vllm"], [512, 4096], [512]))]
    [('infinite', 512, None, 1024), ('vllm', 512, 512, 0), ('vllm', 512, 4096, 1024)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kvlab.traffic.blocks import check_block_size, progress_iter
from kvlab.traffic.mooncake import TrafficRequest
from kvlab.traffic.parallel import run_tasks
from kvlab.traffic.replay import ReplayResult, check_capacity

__all__ = ["CLOCKS", "SWEEP_CACHES", "sweep", "sweep_fleet", "sweep_models", "sweep_rows"]

CLOCKS = ("sequence", "timed")
"""Replay clocks: ``replay_sequence`` and ``replay_timed`` (vllm only)."""

SWEEP_CACHES = ("vllm", "nano", "radix", "belady", "infinite")
"""Caches ``sweep`` takes ("infinite" is always added; naming it changes nothing)."""


def warmup_requests(num_requests: int, warmup: float) -> int:
    """``floor(num_requests * warmup)``.

    Raises:
        ValueError: Unless 0 <= warmup < 1.
    """
    if isinstance(warmup, bool) or not isinstance(warmup, (int, float)) or not 0 <= warmup < 1:
        raise ValueError(f"warmup must be a fraction of the requests in [0, 1), got {warmup!r}")
    return math.floor(num_requests * warmup)


def _run(requests: Sequence[TrafficRequest], tasks: list[tuple], jobs: int, client: Any,
         progress: bool | None) -> list[Any]:  # fmt: skip
    if jobs == 1 and client is None and progress is not False:
        from kvlab.traffic.parallel import run_task

        token = f"serial-{id(requests)}"
        it = progress_iter(tasks, progress, desc="what-if replays", unit="replay")
        nested = [run_task(token, requests, t) for t in it]
    else:
        nested = run_tasks(requests, tasks, jobs, client)
    return [r for results in nested for r in results]


def sweep(
    requests: Sequence[TrafficRequest],
    caches: Sequence[str],
    capacities_tokens: Sequence[int],
    block_sizes: Sequence[int],
    progress: bool | None = False,
    clock: str = "sequence",
    *,
    warmup: float = 0.0,
    jobs: int = 1,
    client: Any = None,
    max_model_len: int | None = None,
    policies: Sequence[str] = (),
) -> list[ReplayResult]:
    """Replay ``requests`` at every (block size, cache, capacity) on one clock.

    Args:
        requests: The traffic (``load_traffic``).
        caches: Names of SWEEP_CACHES ("infinite" is always added).
        capacities_tokens: Pool sizes (tokens), each at least one block of every block size.
        block_sizes: kvlab block sizes (tokens).
        progress: tqdm bars: True always, None only on a terminal, False none.
        clock: "sequence" or "timed" (only cache "vllm"; ``replay_timed``'s defaults). The
            infinite cache is always replayed on the sequence clock (it has no scheduler).
        warmup: Fraction of the requests replayed but not counted, in [0, 1).
        jobs: Local processes (``parallel.run_tasks``).
        client: A dask.distributed Client, or None.
        max_model_len: Prompts longer than this are refused (tokens; None = no limit).
        policies: libCacheSim policies (``peer_policies.POLICIES``) replayed at each capacity
            after the caches (sequence clock).

    Returns:
        Per block size: the infinite cache, then each cache at each capacity (in the order
        given), then each policy at each capacity.

    Raises:
        ValueError: Unknown cache or clock, a cache other than vllm on the timed clock, a
            capacity below one block, a block size not dividing the trace's hash block size,
            a warmup outside [0, 1), or an empty list. Nothing is replayed then.
    """
    for name, values in (("caches", caches), ("capacities_tokens", capacities_tokens),
                         ("block_sizes", block_sizes)):  # fmt: skip
        if not values:
            raise ValueError(f"{name} is empty; allowed: at least one")
    bad = [c for c in caches if c not in SWEEP_CACHES]
    if bad:
        raise ValueError(f"unknown cache {bad[0]!r}; allowed: {', '.join(SWEEP_CACHES)}")
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}; allowed: {', '.join(CLOCKS)}")
    named = [c for c in dict.fromkeys(caches) if c != "infinite"]
    if clock == "timed" and any(c != "vllm" for c in named):
        bad = next(c for c in named if c != "vllm")
        raise ValueError(f"only the 'vllm' cache supports the timed clock, got {bad!r}")
    for bs in block_sizes:
        check_block_size(bs, requests)
        for cap in capacities_tokens:
            check_capacity(cap, bs)
    from kvlab.traffic.peer_policies import POLICIES

    bad = [p for p in policies if p not in POLICIES]
    if bad:
        raise ValueError(f"unknown policy {bad[0]!r}; allowed: {', '.join(POLICIES)}")
    if policies and clock == "timed":
        raise ValueError("libCacheSim's policies replay on the sequence clock only")
    w = warmup_requests(len(requests), warmup)
    caps = tuple(int(c) for c in capacities_tokens)
    tasks: list[tuple] = []
    for bs in block_sizes:
        tasks.append(("infinite", bs, w, max_model_len))
        for cache in named:
            if cache in ("vllm", "nano", "radix") and clock == "sequence":
                tasks.append(("curve", bs, cache, caps, w, max_model_len))
            else:
                kind = "timed" if clock == "timed" else cache
                tasks.extend((kind, bs, cap, w, max_model_len) for cap in caps)
        tasks.extend(("policy", bs, p, cap, w, max_model_len) for p in policies for cap in caps)
    return _run(requests, tasks, jobs, client, progress)


def sweep_models(
    requests: Sequence[TrafficRequest],
    model_config: dict[str, Any],
    budgets_bytes: Sequence[int],
    *,
    warmup: float = 0.0,
    jobs: int = 1,
    client: Any = None,
    max_model_len: int | None = None,
    block_size: int | None = None,
    progress: bool | None = False,
) -> list[ReplayResult]:
    """One model at each KV-cache budget (bytes), sized and replayed as vLLM (``sizing.py``).

    Returns:
        Per budget a ReplayResult with ``sizing`` set (cache "vllm"), after one infinite-cache
        row at the model's block size.

    Raises:
        ValueError: As ``sizing.size_kv_cache`` (checked for every budget before any replay).
    """
    from kvlab.traffic.sizing import size_kv_cache

    if not budgets_bytes:
        raise ValueError("budgets_bytes is empty; allowed: at least one")
    sized = [size_kv_cache(model_config, b, max_model_len, block_size) for b in budgets_bytes]
    w = warmup_requests(len(requests), warmup)
    mml = sized[0].max_model_len
    tasks = [("infinite", sized[0].block_size, w, mml)]
    tasks += [("model", model_config, b, w, mml, block_size) for b in budgets_bytes]
    return _run(requests, tasks, jobs, client, progress)


def sweep_fleet(
    requests: Sequence[TrafficRequest],
    num_replicas: int,
    routings: Sequence[str],
    capacities_tokens: Sequence[int],
    block_size: int,
    *,
    warmup: float = 0.0,
    jobs: int = 1,
    client: Any = None,
    max_model_len: int | None = None,
    seed: int = 0,
    progress: bool | None = False,
) -> list[Any]:
    """Every routing at every capacity per replica (``fleet.replay_fleet``): FleetResults.

    Raises:
        ValueError: An unknown routing, replicas < 1, or a capacity below one block.
    """
    from kvlab.traffic.fleet import ROUTINGS

    bad = [r for r in routings if r not in ROUTINGS]
    if bad or not routings:
        raise ValueError(f"unknown routing {(bad or [''])[0]!r}; allowed: {', '.join(ROUTINGS)}")
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ValueError(f"replicas must be an int >= 1, got {num_replicas!r}")
    check_block_size(block_size, requests)
    for cap in capacities_tokens:
        check_capacity(cap, block_size)
    w = warmup_requests(len(requests), warmup)
    tasks = [("fleet", block_size, num_replicas, r, int(cap), w, max_model_len, seed)
             for r in routings for cap in capacities_tokens]  # fmt: skip
    return _run(requests, tasks, jobs, client, progress)


def sweep_rows(results: Sequence[Any]) -> list[dict[str, Any]]:
    """The JSON rows of ``kvlab whatif`` (``to_dict``; infinite: capacity None), with the
    capacity / LRU split on the vllm and belady rows where both ran (see the module doc)."""
    out = []
    for r in results:
        row = r.to_dict()
        if row["cache"] == "infinite":
            row["capacity_tokens"] = None
        out.append(row)
    best = {(r["block_size"], r.get("model")): r["hit_tokens"] for r in out
            if r["cache"] == "infinite"}  # fmt: skip
    belady = {(r["block_size"], r["capacity_tokens"]): r["hit_tokens"] for r in out
              if r["cache"] == "belady"}  # fmt: skip
    vllm = {(r["block_size"], r["capacity_tokens"]): r["hit_tokens"] for r in out
            if r["cache"] == "vllm" and "routing" not in r}  # fmt: skip
    for r in out:
        key = (r["block_size"], r["capacity_tokens"])
        if r["cache"] in ("vllm", "belady") and key in belady and key in vllm:
            r["hits_lost_to_capacity"] = best[(r["block_size"], None)] - belady[key]
            r["hits_lost_to_lru"] = belady[key] - vllm[key]
    return out
