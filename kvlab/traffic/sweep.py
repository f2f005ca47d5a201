"""A what-if sweep: one trace through several caches, capacities and block sizes.

The API behind ``kvlab whatif``: ``sweep`` hashes the traffic once per block size and replays
it on the sequence clock at every (cache, capacity), plus one infinite-cache replay per block
size (its ``capacity_tokens`` is None in ``rows``: it has no capacity).

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

from collections.abc import Sequence
from typing import Any

from kvlab.traffic.blocks import check_block_size, prepare_blocks
from kvlab.traffic.mooncake import TrafficRequest
from kvlab.traffic.replay import CACHES, ReplayResult, check_capacity, replay_sequence
from kvlab.traffic.timed import replay_timed

__all__ = ["CLOCKS", "sweep", "sweep_rows"]

CLOCKS = ("sequence", "timed")
"""Replay clocks: ``replay_sequence`` and ``replay_timed`` (vllm only)."""


def sweep(
    requests: Sequence[TrafficRequest],
    caches: Sequence[str],
    capacities_tokens: Sequence[int],
    block_sizes: Sequence[int],
    progress: bool | None = False,
    clock: str = "sequence",
) -> list[ReplayResult]:
    """Replay ``requests`` at every (block size, cache, capacity) on one clock.

    Args:
        requests: The traffic (``load_traffic``).
        caches: Names of CACHES other than "infinite" (it is always added).
        capacities_tokens: Pool sizes (tokens), each at least one block of every block size.
        block_sizes: kvlab block sizes (tokens).
        progress: tqdm bars: True always, None only on a terminal, False none.
        clock: "sequence" or "timed" (only cache "vllm"; ``replay_timed``'s defaults). The
            infinite cache is always replayed on the sequence clock (it has no scheduler).

    Returns:
        Per block size: the infinite cache, then each cache at each capacity (in the order
        given).

    Raises:
        ValueError: Unknown cache or clock, a cache other than vllm on the timed clock, a
            capacity below one block, a block size not dividing the
            trace's hash block size, or an empty list. Nothing is replayed then.
    """
    for name, values in (("caches", caches), ("capacities_tokens", capacities_tokens),
                         ("block_sizes", block_sizes)):  # fmt: skip
        if not values:
            raise ValueError(f"{name} is empty; allowed: at least one")
    bad = [c for c in caches if c not in CACHES or c == "infinite"]
    if bad:
        allowed = ", ".join(c for c in CACHES if c != "infinite")
        raise ValueError(f"unknown cache {bad[0]!r}; allowed: {allowed} (infinite is added)")
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}; allowed: {', '.join(CLOCKS)}")
    if clock == "timed" and any(c != "vllm" for c in caches):
        bad = next(c for c in caches if c != "vllm")
        raise ValueError(f"only the 'vllm' cache supports the timed clock, got {bad!r}")
    for bs in block_sizes:
        check_block_size(bs, requests)
        for cap in capacities_tokens:
            check_capacity(cap, bs)
    out = []
    for bs in block_sizes:  # NOTE: one block size's hashes in memory at a time
        b = prepare_blocks(requests, bs, progress=progress)
        out.append(replay_sequence(b, "infinite", b.block_size))
        for cache in caches:
            for cap in capacities_tokens:
                if clock == "timed":
                    out.append(replay_timed(b, cache, cap, progress=progress))
                else:
                    out.append(replay_sequence(b, cache, cap, progress=progress))
    return out


def sweep_rows(results: Sequence[ReplayResult]) -> list[dict[str, Any]]:
    """The JSON rows of ``kvlab whatif`` (``ReplayResult.to_dict``; infinite: capacity None)."""
    out = []
    for r in results:
        row = r.to_dict()
        if r.cache == "infinite":
            row["capacity_tokens"] = None
        out.append(row)
    return out
