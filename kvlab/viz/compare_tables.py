"""Rich tables for kvlab.compare: overall outcomes per cache, and per-request hits.

Both take a ``kvlab.compare.Comparison`` (duck-typed: ``summaries()``, ``request_rows()``,
``runs``); kvlab.viz does not import kvlab.compare.

Examples:
    >>> print(to_text(render_comparison_table(comparison)))    # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from kvlab.i18n import N_, _, with_language
from kvlab.trace.untrusted import shown

__all__ = ["COMPARISON_ROWS", "render_comparison_table", "render_request_table"]

COMPARISON_ROWS = (
    ("hit_tokens", N_("prefix-cache hit (tokens)")),
    ("hit_rate", N_("hit rate (of prompt tokens)")),
    ("evicted_tokens", N_("evicted (tokens)")),
    ("num_preemptions", N_("preemptions")),
    ("recomputed_tokens", N_("recomputed after preemption (tokens)")),
    ("readmit_hit_tokens", N_("hit on re-admission (tokens)")),
    ("peak_used_tokens", N_("peak used by running requests (tokens)")),
    ("peak_cached_tokens", N_("peak cached content (tokens)")),
    ("computed_tokens", N_("KV computed (tokens)")),
    ("num_steps", N_("steps")),
    ("num_finished", N_("finished requests")),
    ("num_rejected", N_("rejected requests")),
)
"""(Summary field, row label) in table order (labels in English; rendered translated)."""

_HIGHER_IS_BETTER = {"hit_tokens", "hit_rate", "readmit_hit_tokens", "num_finished"}
_LOWER_IS_BETTER = {"evicted_tokens", "num_preemptions", "recomputed_tokens", "computed_tokens",
                    "num_steps", "num_rejected", "peak_used_tokens"}  # fmt: skip


def _fmt(field: str, value: Any) -> str:
    return f"{value:.1%}" if field == "hit_rate" else f"{value:,}"


@with_language
def render_comparison_table(comparison: Any) -> Table:
    """One column per cache, one row per metric; the best value of a row is bold green.

    Args:
        comparison: A kvlab.compare.Comparison.
        lang: "en", "zh" or None (the current language, kvlab.i18n).
    """
    summaries = comparison.summaries()
    first = summaries[0] if summaries else None
    title = _("prefix caches side by side")
    if first is not None:
        title += " · " + _("{workload} · {requests} requests, {prompt_tokens} prompt tokens · "
                           "pool {pool_tokens} tokens").format(
            workload=shown(first.workload), requests=first.num_requests,
            prompt_tokens=f"{first.prompt_tokens:,}", pool_tokens=f"{first.pool_tokens:,}")
    table = Table(title=title, title_style="bold")
    table.add_column(_("metric"), style="bold")
    for s in summaries:
        table.add_column(s.policy, justify="right")
    for field, label in COMPARISON_ROWS:
        values = [getattr(s, field) for s in summaries]
        best = None
        if len(set(values)) > 1 and field in _HIGHER_IS_BETTER:
            best = max(values)
        elif len(set(values)) > 1 and field in _LOWER_IS_BETTER:
            best = min(values)
        cells = [Text(_fmt(field, v), style="bold #16a34a" if v == best else "") for v in values]
        table.add_row(_(label), *cells)
    return table


@with_language
def render_request_table(comparison: Any, max_rows: int = 30) -> Table:
    """Per request: prompt length, then per cache its hit (tokens) and preemptions.

    Args:
        comparison: A kvlab.compare.Comparison.
        max_rows: Requests shown at most (the rest are counted in the caption).
        lang: "en", "zh" or None (the current language, kvlab.i18n).

    Raises:
        ValueError: If max_rows < 1.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    rows = comparison.request_rows()
    policies = list(comparison.runs)
    table = Table(title=_("per request: prefix-cache hit (tokens) / preemptions"),
                  title_style="bold")
    table.add_column(_("request"), style="bold")
    table.add_column(_("prompt"), justify="right")
    for p in policies:
        table.add_column(p, justify="right")
    for row in rows[:max_rows]:
        cells = []
        for p in policies:
            cell = f"{row[f'{p}.hit_tokens']:,}"
            if row[f"{p}.num_preemptions"]:
                cell += f" / {row[f'{p}.num_preemptions']}p"
            cells.append(cell)
        table.add_row(shown(row["request_id"]), f"{row['num_prompt_tokens']:,}", *cells)
    if len(rows) > max_rows:
        table.caption = _("{n} more requests not shown").format(n=len(rows) - max_rows)
    return table
