"""``kvlab compare``: one workload on the three prefix caches, as a terminal report.

``cli_compare`` is what the ``kvlab compare`` command calls (the lead wires it into
kvlab/cli.py); it returns a rich renderable and, if asked, writes SVG plots and a JSON summary.
rich is imported only here (it is an optional dependency of kvlab).

Workloads by name: ``system-prompt``, ``multi-turn``, ``rag``, ``few-shot``; or a path to a
``.jsonl`` workload, a saved kvlab trace (``.kvtrace`` or any other file ``load_trace`` reads).

Examples:
    >>> rich.print(cli_compare("rag", pool_tokens=2048))           # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kvlab.compare.analyzer import Comparison, compare
from kvlab.compare.driver import POLICIES
from kvlab.compare.workload_io import from_jsonl, from_trace
from kvlab.compare.workloads import (
    Workload,
    few_shot,
    multi_turn_chat,
    rag,
    shared_system_prompt,
)
from kvlab.i18n import _

__all__ = ["PLOTTED_SERIES", "WORKLOADS", "cli_compare", "load_workload"]

WORKLOADS: dict[str, Callable[..., Workload]] = {
    "system-prompt": shared_system_prompt,
    "multi-turn": multi_turn_chat,
    "rag": rag,
    "few-shot": few_shot,
}
"""Generator by CLI name (each takes ``seed``; ``num_requests`` where it has one)."""

PLOTTED_SERIES = (
    ("num_used_tokens", False),
    ("num_cached_tokens", False),
    ("hit_tokens", True),
    ("evicted_tokens", False),
)
"""(series, cumulative) written as SVG plots by ``cli_compare(svg_dir=...)``."""


def load_workload(
    workload: str,
    num_requests: int | None = None,
    seed: int = 0,
    tokenize: Callable[[str], list[int]] | None = None,
) -> Workload:
    """A workload by generator name, or from a .jsonl file or a saved kvlab trace.

    Raises:
        ValueError: If the name is unknown and no such file exists, or the file is bad.
    """
    gen = WORKLOADS.get(workload)
    if gen is not None:
        kwargs: dict[str, Any] = {"seed": seed}
        if num_requests is not None:
            key = "num_conversations" if workload == "multi-turn" else "num_requests"
            kwargs[key] = num_requests
        return gen(**kwargs)
    path = Path(workload)
    if not path.exists():
        raise ValueError(
            f"unknown workload {workload!r}: use one of {', '.join(WORKLOADS)}, "
            "a .jsonl file or a saved kvlab trace"
        )
    if path.suffix == ".jsonl":
        return from_jsonl(path, tokenize=tokenize)
    return from_trace(path, name=path.name)


def cli_compare(
    workload: str,
    pool_tokens: int,
    block_size: int = 16,
    policies: Sequence[str] = tuple(POLICIES),
    num_requests: int | None = None,
    seed: int = 0,
    max_num_seqs: int = 256,
    per_request: bool = False,
    svg_dir: str | Path | None = None,
    json_path: str | Path | None = None,
    tokenize: Callable[[str], list[int]] | None = None,
) -> Any:
    """Run the comparison and return a rich renderable (the report).

    Args:
        workload: A generator name (WORKLOADS) or a .jsonl / kvlab trace path.
        pool_tokens: KV capacity given to every cache (tokens).
        block_size: Block size of the block caches (tokens).
        policies: Caches to run (names from ``kvlab.compare.driver.POLICIES``).
        num_requests: Requests (conversations for multi-turn); None = the generator default.
        seed: Generator seed.
        max_num_seqs: Requests running at once at most.
        per_request: Add the per-request table.
        svg_dir: Write one SVG line plot per PLOTTED_SERIES here (created if needed).
        json_path: Write the summaries as JSON here.
        tokenize: Turns text prompts of a .jsonl file into token ids.

    Returns:
        A rich ``Group``: the comparison table (+ the request table, + written-file lines).

    Raises:
        ValueError: Unknown workload or policy, or invalid sizes.
    """
    from rich.console import Group
    from rich.text import Text

    from kvlab.viz.compare_tables import render_comparison_table, render_request_table

    w = load_workload(workload, num_requests, seed, tokenize)
    comparison = compare(w, pool_tokens, block_size, policies, max_num_seqs)
    parts: list[Any] = [render_comparison_table(comparison)]
    if per_request:
        parts.append(render_request_table(comparison))
    for line in _write_outputs(comparison, svg_dir, json_path):
        parts.append(Text(line, style="dim"))
    return Group(*parts)


def _write_outputs(
    comparison: Comparison, svg_dir: str | Path | None, json_path: str | Path | None
) -> list[str]:
    lines = []
    if svg_dir is not None:
        out = Path(svg_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, cumulative in PLOTTED_SERIES:
            path = out / f"{'cumulative_' if cumulative else ''}{name}.svg"
            comparison.to_svg(name, cumulative, str(path))
            lines.append(_("wrote {path}").format(path=path))
    if json_path is not None:
        data = {
            "workload": comparison.workload.name,
            "summaries": [s.as_dict() for s in comparison.summaries()],
            "requests": comparison.request_rows(),
        }
        Path(json_path).write_text(json.dumps(data, indent=2), encoding="utf-8")
        lines.append(_("wrote {path}").format(path=json_path))
    return lines
