"""Two (or three) caches at the same driver step, side by side.

Block caches (vLLM V1, nano-vllm) are drawn with the pool grid and the free queue of their kvlab
Trace; the radix cache with its tree. Each panel shows the state at the *end* of the step (the
last event stamped with that step or an earlier one). Needs runs made with ``record=True``.

Examples:
    >>> c = compare(workload, pool_tokens=512, record=True)     # doctest: +SKIP
    >>> rich.print(render_side_by_side(c, step=10))             # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kvlab.viz.compare_radix import render_radix_tree
from kvlab.viz.terminal import render_free_queue, render_pool_grid

__all__ = ["event_index_at_step", "render_cache_at_step", "render_side_by_side"]


def event_index_at_step(recording: Any, step: int) -> int:
    """The last event of ``recording`` at or before driver step ``step`` (-1 if none).

    Args:
        recording: A kvlab Trace (``steps()``) or a RadixRecorder (``index_of_step``).
    """
    if hasattr(recording, "index_of_step"):
        return int(recording.index_of_step(step))
    steps = recording.steps()
    return int(np.searchsorted(steps, step, side="right")) - 1


def render_cache_at_step(recording: Any, step: int, max_blocks: int = 256) -> RenderableType:
    """One cache's state at the end of ``step``: pool grid + free queue, or the radix tree.

    Raises:
        TypeError: If ``recording`` is None (the run was not recorded) or unknown.
    """
    if recording is None:
        raise TypeError("this run has no recording: run compare(..., record=True)")
    index = event_index_at_step(recording, step)
    if hasattr(recording, "index_of_step"):
        return render_radix_tree(recording.state_at(index), max_nodes=60)
    if hasattr(recording, "state_at") and hasattr(recording, "steps"):
        return Group(
            render_pool_grid(recording, index, max_blocks=max_blocks, legend=False),
            render_free_queue(recording, index, max_blocks=16),
        )
    raise TypeError(f"cannot draw a {type(recording).__name__}")


def render_side_by_side(
    comparison: Any, step: int, policies: Sequence[str] | None = None, max_blocks: int = 256
) -> RenderableType:
    """The chosen caches at the end of the same step, one panel each, left to right.

    Args:
        comparison: A kvlab.compare.Comparison made with ``record=True`` (or a dict
            policy -> RunResult).
        step: Driver step.
        policies: Which runs (default: all, in run order).
        max_blocks: Cells per pool grid at most (blocks).

    Raises:
        KeyError: If a policy was not run.
        TypeError: If a chosen run has no recording.
    """
    runs = comparison.runs if hasattr(comparison, "runs") else comparison
    names = list(policies) if policies is not None else list(runs)
    missing = [p for p in names if p not in runs]
    if missing:
        raise KeyError(f"policies {missing} were not run; runs: {', '.join(runs)}")
    grid = Table.grid(expand=True, padding=(0, 1))
    panels = []
    for name in names:
        run = runs[name]
        usage = run.steps[min(step, len(run.steps) - 1)] if run.steps else None
        subtitle = None
        if usage is not None:
            subtitle = (f"used {usage.num_used_tokens} · cached {usage.num_cached_tokens} · "
                        f"running {usage.num_running} · waiting {usage.num_waiting}")  # fmt: skip
        grid.add_column(ratio=1)
        body = render_cache_at_step(run.trace, step, max_blocks)
        panels.append(Panel(body, title=Text(f"{name} · step {step}", style="bold"),
                            subtitle=subtitle))  # fmt: skip
    grid.add_row(*panels)
    return grid
