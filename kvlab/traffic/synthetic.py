"""Made-up traffic in the Mooncake format: random traces, and a real trace repeated at scale.

* ``random_mooncake_lines``: prefix trees of hash ids (a request extends a random prefix of an
  earlier one), block-aligned prompts (vLLM allocates their cached last block again: a second
  copy of one hash), exact repeats, partial last blocks, and requests larger than small pools:
  what breaks the LRU stack property (``kvlab.traffic.stack``). The tests and
  ``benchmarks/bench_traffic.py`` (its >= 100-trace exactness check) draw from it.
* ``extend_trace``: ``k`` copies of a trace one after another, copy ``c`` with its hash ids
  shifted by ``c * (max id + 1)`` and its timestamps by ``c * (last timestamp + 1)`` ms, made
  lazily (one request at a time), so a 100x trace is never held in memory.

Examples:
    >>> from kvlab.traffic.mooncake import read_mooncake_lines
    >>> base = read_mooncake_lines(['{"timestamp": 5, "input_length": 600, "output_length": 1, '
    ...                              '"hash_ids": [0, 1]}'])
    >>> [(r.request_id, r.arrival_ms, r.hash_ids) for r in extend_trace(base, 2)]
    [('mc-0', 5.0, (0, 1)), ('mc-1', 11.0, (2, 3))]
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import replace

from kvlab.traffic.mooncake import TrafficRequest

__all__ = ["extend_trace", "random_mooncake_lines"]


def random_mooncake_lines(rng: random.Random, num_requests: int = 40) -> list[str]:
    """Mooncake JSONL lines (512-token hash ids) drawn from ``rng``."""
    lines: list[str] = []
    docs: list[list[int]] = []
    counter = [0]

    def new_id() -> int:
        counter[0] += 1
        return counter[0]

    for i in range(num_requests):
        if lines and rng.random() < 0.15:
            lines.append(rng.choice(lines))  # NOTE: an exact repeat (same ids, same length)
            continue
        base: list[int] = []
        if docs and rng.random() < 0.7:
            doc = rng.choice(docs)
            base = doc[: rng.randint(1, len(doc))]
        num_new = rng.randint(0 if base else 1, rng.choice([2, 4, 12]))
        ids = base + [new_id() for _ in range(num_new)]
        docs.append(ids)
        if rng.random() < 0.5:
            full, n_in = ids, 512 * len(ids)
        else:  # NOTE: a partial last id is always new (an id names one block content)
            full, n_in = ids + [new_id()], 512 * len(ids) + rng.choice([1, 16, 100, 256, 511])
        lines.append(json.dumps({"timestamp": i, "input_length": n_in, "output_length": 1,
                                 "hash_ids": full}))  # fmt: skip
    return lines


def extend_trace(requests: Sequence[TrafficRequest], copies: int) -> Iterator[TrafficRequest]:
    """Yield ``copies`` shifted copies of hash-id ``requests`` (see the module docstring).

    Args:
        requests: A hash-id trace (``read_mooncake``), held once.
        copies: How many copies (>= 1); request ids run ``mc-0`` ... across all copies.

    Raises:
        ValueError: If copies < 1 or a request has no hash ids.
    """
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise ValueError(f"copies must be an int >= 1, got {copies!r}")
    if any(r.hash_ids is None for r in requests):
        raise ValueError("extend_trace needs hash-id requests (Mooncake or kvevents)")
    id_step = 1 + max((max(r.hash_ids or (0,)) for r in requests), default=0)
    time_step = 1.0 + max((r.arrival_ms for r in requests), default=0.0)
    index = 0
    for c in range(copies):
        for r in requests:
            assert r.hash_ids is not None
            yield replace(r, request_id=f"mc-{index}", arrival_ms=r.arrival_ms + c * time_step,
                          hash_ids=tuple(h + c * id_step for h in r.hash_ids))  # fmt: skip
            index += 1
