"""Notebook 11's exercises (real traffic: how big must my cache be?).

The keys replay the Mooncake excerpts shipped with the repository (``tests/data/mooncake``)
through kvlab.traffic, as the notebook does; they take a few seconds each.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from pathlib import Path

from kvlab.course.lab_setup import seed_hashing
from kvlab.course.check import Exercise, register

CAPACITIES = (10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000)
"""The notebook's swept capacities (tokens)."""


def data_dir() -> Path:
    """The Mooncake excerpts of the checkout (``tests/data/mooncake``).

    Raises:
        FileNotFoundError: Not a kvlab checkout (the excerpts are not part of the package).
    """
    folder = Path(__file__).resolve().parents[2] / "tests" / "data" / "mooncake"
    if not (folder / "conversation_excerpt.jsonl").is_file():
        raise FileNotFoundError(f"the Mooncake excerpts are not in {folder}: notebook 11's exercises "
                                "need a kvlab checkout")  # fmt: skip
    return folder


@lru_cache(maxsize=4)
def _conversation(block_size: int = 512):
    from kvlab.traffic import prepare_blocks, read_mooncake

    seed_hashing()
    reqs = read_mooncake(data_dir() / "conversation_excerpt.jsonl")
    return reqs, prepare_blocks(reqs, block_size)


@lru_cache(maxsize=1)
def caches_differ() -> tuple[int, int]:
    """(capacities where vllm, nano and radix differ in hit tokens, ... in evicted blocks)."""
    from kvlab.traffic import sweep, sweep_rows

    reqs, _ = _conversation()
    rows = [r for r in sweep_rows(sweep(reqs, ["vllm", "nano", "radix"], list(CAPACITIES), [512]))
            if r["cache"] != "infinite"]  # fmt: skip
    by_cap: dict[int, list[dict]] = {}
    for r in rows:
        by_cap.setdefault(r["capacity_tokens"], []).append(r)
    differ = {col: sum(len({r[col] for r in group}) > 1 for group in by_cap.values())
              for col in ("hit_tokens", "evicted_blocks")}  # fmt: skip
    return differ["hit_tokens"], differ["evicted_blocks"]


def reuse_gaps() -> list[int]:
    """Per reused 512-token block: prompt tokens of the requests between its uses (notebook 11)."""
    reqs, blocked = _conversation()
    before = [0, *itertools.accumulate(r.num_prompt_tokens for r in reqs)]
    last_use: dict = {}
    gaps = []
    for i, req in enumerate(reqs):
        n = 0
        while n < (req.num_prompt_tokens - 1) // 512 and blocked.keys[i][n] in last_use:
            gaps.append(before[i] - before[last_use[blocked.keys[i][n]] + 1])
            n += 1
        last_use.update((k, i) for k in blocked.keys[i])
    return gaps


@lru_cache(maxsize=4)
def the_jump(part: float = 0.6) -> tuple[int, int]:
    """(first capacity of 1.0M, 1.2M ... 3.0M tokens getting ``part`` of the possible hits,
    reuse gaps at most that capacity)."""
    from kvlab.traffic import sweep, sweep_rows

    reqs, _ = _conversation()
    rows = sweep_rows(sweep(reqs, ["vllm"], list(range(1_000_000, 3_000_001, 200_000)), [512]))
    best = rows[0]["hit_rate"]  # the infinite cache
    capacity = next(r["capacity_tokens"] for r in rows[1:] if r["hit_rate"] >= part * best)
    return capacity, sum(gap <= capacity for gap in reuse_gaps())


def top_prefix_at(block_size: int = 16) -> tuple[int, int]:
    """(tokens, requests) of the conversation excerpt's most reused prefix at ``block_size``."""
    from kvlab.traffic import top_prefixes

    top = top_prefixes(_conversation(block_size)[1], 1)[0]
    return top.num_tokens, top.num_requests


def evicted_by(index: int = 134, capacity: int = 100_000) -> str:
    """The request whose allocation evicted the block request ``index`` missed on."""
    from kvlab.traffic import explain_request

    why = explain_request(_conversation()[1], capacity, index)
    return why.explanation.eviction.call.request


register(Exercise(
    id="11.1",
    question="Add 'radix' and 'nano' to the sweep's caches. At how many of the 7 capacities do "
    "the three caches' hit tokens differ, and at how many their evicted blocks? Answer (hits, evictions).",
    solve=caches_differ,
    hint="sweep(conv, ['vllm', 'nano', 'radix'], CAPACITIES, [512]) and compare the rows of each capacity.",
    explain="A Mooncake trace shares whole 512-token blocks only, and the three caches evict the "
    "least recently used prefix first: they hit the same; they differ in which blocks they evict.",
    mistakes=(((7, 7), "the curves lie on top of each other: compare hit_tokens row by row."),),
))  # fmt: skip
register(Exercise(
    id="11.2",
    question="Sweep the conversation excerpt from 1,000,000 to 3,000,000 tokens in steps of "
    "200,000. At which capacity does it first get 60% of its possible hits, and how many of the "
    "675 reuse gaps are at most that capacity? Answer (capacity, gaps).",
    solve=the_jump,
    hint="divide each row's hit_rate by the infinite cache's; count reuse_gaps('conversation') <= C.",
    explain="The returning conversations come back after 1-3 million tokens of other traffic: the "
    "curve climbs as the capacity passes their gaps.",
    mistakes=(((3_000_000, 600), "the curve passes 60% before 3,000,000 tokens."),),
))  # fmt: skip
register(Exercise(
    id="11.3",
    question="At block size 16 (prepare_blocks(conv, 16)), what is the conversation excerpt's most "
    "reused prefix? Answer (tokens, requests).",
    solve=top_prefix_at,
    hint="top_prefixes(prepare_blocks(traces['conversation'], 16), 1)[0]",
    explain="The same 512-token system prompt (32 blocks of 16), in all 300 requests: the trace "
    "knows sharing at 512-token granularity only.",
    mistakes=(((16, 300), "the shared prefix is 32 blocks of 16 tokens."),),
))  # fmt: skip
register(Exercise(
    id="11.4",
    question="Explain request 134 at 100,000 tokens: which request's allocation evicted the block "
    "it missed on?",
    solve=evicted_by,
    hint="explain_request(blocked['conversation'], 100_000, 134).explanation.eviction.call.request",
    explain="The block was reused for a later request's new blocks, from the free queue's head.",
    mistakes=(("mc-73", "that is request 133's evictor."),),
))  # fmt: skip
