"""Compare runs: per-request and overall outcomes, and per-step time series, as plain data.

``compare`` runs one workload on several caches with the same pool; the ``Comparison`` it
returns answers "which policy serves this traffic best" in numbers:

==================  =======================================================================
hit_tokens          prompt tokens served from the prefix cache at first admission (tokens)
hit_rate            hit_tokens / prompt tokens
evicted_tokens      cached tokens dropped to make room (block caches: blocks x block_size)
recomputed_tokens   tokens computed again after preemption (tokens)
num_preemptions     preemptions (all requests)
peak_used_tokens    most capacity held by running requests at the end of a step (tokens)
peak_cached_tokens  most cached (reusable) content resident at the end of a step (tokens)
computed_tokens     KV computed in total, prefills + decodes (tokens): the work done
num_steps           steps until the last request finished
==================  =======================================================================

Rich tables live in ``kvlab.viz.compare_tables``; plots (matplotlib) in ``kvlab.compare.plot``
(``Comparison.figure``, ``Comparison.to_svg``).

Examples:
    >>> from kvlab.compare.workloads import shared_system_prompt
    >>> c = compare(shared_system_prompt(4, 32, 8, 4), pool_tokens=256, block_size=16)
    >>> [c.summary(p).hit_tokens for p in c.runs]
    [96, 96, 96]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from kvlab.compare.driver import POLICIES, RunResult, StepRecord, run_workload
from kvlab.compare.workloads import Workload

__all__ = ["SERIES", "Comparison", "Summary", "compare", "series", "summarize"]

SERIES = tuple(f.name for f in fields(StepRecord) if f.name != "step")
"""Per-step quantities ``series`` accepts (StepRecord field names)."""


@dataclass(frozen=True)
class Summary:
    """Overall outcome of one run (see the module table for the metrics)."""

    policy: str
    workload: str
    pool_tokens: int
    num_requests: int
    num_finished: int
    num_rejected: int
    num_steps: int
    prompt_tokens: int
    hit_tokens: int
    hit_rate: float
    readmit_hit_tokens: int
    evicted_tokens: int
    recomputed_tokens: int
    num_preemptions: int
    peak_used_tokens: int
    peak_cached_tokens: int
    computed_tokens: int

    def as_dict(self) -> dict[str, Any]:
        """The fields by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def summarize(run: RunResult) -> Summary:
    """The overall outcome of ``run``."""
    reqs = list(run.requests.values())
    prompt = sum(r.num_prompt_tokens for r in reqs)
    hits = sum(r.first_hit_tokens for r in reqs)
    last_finish = max((r.finish_step for r in reqs if r.finish_step is not None), default=-1)
    return Summary(
        policy=run.policy,
        workload=run.workload,
        pool_tokens=run.pool_tokens,
        num_requests=len(reqs),
        num_finished=sum(r.finish_step is not None for r in reqs),
        num_rejected=sum(r.rejected for r in reqs),
        num_steps=last_finish + 1,
        prompt_tokens=prompt,
        hit_tokens=hits,
        hit_rate=hits / prompt if prompt else 0.0,
        readmit_hit_tokens=sum(r.readmit_hit_tokens for r in reqs),
        evicted_tokens=run.steps[-1].evicted_tokens if run.steps else 0,
        recomputed_tokens=sum(r.recomputed_tokens for r in reqs),
        num_preemptions=sum(r.num_preemptions for r in reqs),
        peak_used_tokens=max((s.num_used_tokens for s in run.steps), default=0),
        peak_cached_tokens=max((s.num_cached_tokens for s in run.steps), default=0),
        computed_tokens=sum(r.computed_tokens for r in reqs),
    )


def series(run: RunResult, name: str, cumulative: bool = False) -> np.ndarray:
    """One per-step quantity of ``run`` as an array (index = step).

    Args:
        run: The run.
        name: A StepRecord field (``SERIES``).
        cumulative: Running sum (for per-step counts such as hit_tokens).

    Returns:
        int64 [num_steps].

    Raises:
        KeyError: If ``name`` is not in SERIES.
    """
    if name not in SERIES:
        raise KeyError(f"unknown series {name!r}; known: {', '.join(SERIES)}")
    values = np.array([getattr(s, name) for s in run.steps], dtype=np.int64)
    return np.cumsum(values) if cumulative else values


@dataclass
class Comparison:
    """One workload run on several caches (``compare`` builds it).

    Attributes:
        workload: The workload.
        runs: policy name -> RunResult, in the order asked for.
    """

    workload: Workload
    runs: dict[str, RunResult]

    def summary(self, policy: str) -> Summary:
        """The Summary of one policy's run.

        Raises:
            KeyError: If the policy was not run.
        """
        if policy not in self.runs:
            raise KeyError(f"policy {policy!r} was not run; runs: {', '.join(self.runs)}")
        return summarize(self.runs[policy])

    def summaries(self) -> list[Summary]:
        """One Summary per run, in run order."""
        return [summarize(r) for r in self.runs.values()]

    def request_rows(self) -> list[dict[str, Any]]:
        """One row per request: its prompt length, then per policy hit / preemptions / recomputed."""
        rows = []
        for rid in (r.request_id for r in self.workload.requests):
            row: dict[str, Any] = {"request_id": rid}
            for name, run in self.runs.items():
                rec = run.requests[rid]
                row["num_prompt_tokens"] = rec.num_prompt_tokens
                row[f"{name}.hit_tokens"] = rec.first_hit_tokens
                row[f"{name}.num_preemptions"] = rec.num_preemptions
                row[f"{name}.recomputed_tokens"] = rec.recomputed_tokens
                row[f"{name}.finish_step"] = rec.finish_step
            rows.append(row)
        return rows

    def series(self, name: str, cumulative: bool = False) -> dict[str, np.ndarray]:
        """policy -> the per-step series ``name`` (see ``series``)."""
        return {p: series(r, name, cumulative) for p, r in self.runs.items()}

    def figure(self, name: str = "num_used_tokens", cumulative: bool = False) -> Any:
        """A matplotlib figure of one series, one line per policy (shown as SVG in a notebook).

        Raises:
            KeyError: If ``name`` is not in SERIES.
            ImportError: Without matplotlib.
        """
        from kvlab.compare.plot import series_figure

        label = f"{'cumulative ' if cumulative else ''}{name}"
        return series_figure(
            {p: v.tolist() for p, v in self.series(name, cumulative).items()},
            title=f"{self.workload.name}: {label}",
            x_label="step",
            y_label=label,
        )

    def to_svg(self, name: str = "num_used_tokens", cumulative: bool = False,
               path: str | None = None) -> str:  # fmt: skip
        """``figure`` as SVG text, the same bytes on every run (written to ``path`` if given).

        Raises:
            KeyError: If ``name`` is not in SERIES.
            ImportError: Without matplotlib.
        """
        from kvlab.charts import figure_svg

        svg = figure_svg(self.figure(name, cumulative))
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(svg)
        return svg

def compare(
    workload: Workload,
    pool_tokens: int,
    block_size: int = 16,
    policies: Sequence[str] | Iterable[str] = tuple(POLICIES),
    max_num_seqs: int = 256,
    record: bool = False,
) -> Comparison:
    """Run ``workload`` on each policy with the same pool.

    Args:
        workload: The requests.
        pool_tokens: Usable KV capacity for every policy (tokens).
        block_size: Tokens per block for the block caches (tokens).
        policies: Names from ``kvlab.compare.driver.POLICIES``.
        max_num_seqs: Requests running at once at most.
        record: Keep each cache's trace (``RunResult.trace``).

    Raises:
        ValueError: Unknown policy name or invalid sizes.
    """
    runs = {}
    for name in policies:
        runs[name] = run_workload(workload, name, pool_tokens, block_size, max_num_seqs, record)
    return Comparison(workload, runs)
