"""Readable text for an Explanation (what ``str(explain(trace, call))`` prints)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.trace.explain import Explanation

__all__ = ["render_lines"]


def render_lines(e: Explanation) -> list[str]:
    """The explanation as lines of text, most important first.

    Args:
        e: An Explanation from ``kvlab.trace.explain``.
    """
    c = e.call
    bs = max(e.block_size, 1)
    lines = [
        (
            f"get_computed_blocks for request {c.request} (event #{c.begin}, step {c.step}): "
            f"hit {e.num_new_computed_tokens} of {e.num_tokens} tokens "
            f"({e.num_new_computed_tokens // bs} blocks of {e.block_size})"
        ),
        (
            f"  cap: at most num_tokens - 1 = {e.max_cache_hit_length} tokens "
            f"({e.max_cache_hit_length // bs} full blocks); the last token is recomputed"
        ),
    ]
    if e.capped:
        lines.append(
            "  stopped by the cap: every block within it hit; the last full block is "
            "recomputed to produce logits"
        )
    for t in e.turns:
        hits = sum(p.hit for p in t.probes)
        span = (
            f"{t.hit_length_in} -> {t.hit_length_out} tokens"
            if t.hit_length_out is not None
            else f"max {t.hit_length_in} tokens"
        )
        lines.append(
            f"  iteration {t.iteration} groups {t.kv_cache_group_ids} ({t.spec}): {span}, "
            f"{len(t.probes)} probes, {hits} hits" + (" (reused earlier hit)" if t.reused else "")
        )
    for t in e.shortened_by:
        why = (
            " (every probe hit: rounded down to whole blocks)"
            if all(p.hit for p in t.probes)
            else ""
        )
        lines.append(
            f"  shortened by groups {t.kv_cache_group_ids} ({t.spec}) in iteration "
            f"{t.iteration}: {t.hit_length_in} -> {t.hit_length_out} tokens{why}"
        )
    if e.deciding_miss is not None:
        m = e.deciding_miss
        lines.append(
            f"  miss: block index {m.block_index} (hash {m.hash}) not cached in group "
            f"{m.kv_cache_group_id} (event #{m.seq})"
        )
    if e.eagle_dropped_blocks:
        lines.append(
            f"  EAGLE: dropped the last {e.eagle_dropped_blocks} matched block(s) "
            "(recomputed for the draft head)"
        )
    if e.eviction is not None:
        ev = e.eviction
        stored = (
            f"; cached by request {ev.stored_by} at event #{ev.stored_seq}"
            if ev.stored_seq is not None
            else ""
        )
        lines.append(f"  evicted at event #{ev.seq} (step {ev.step}, {ev.kind}): {ev.how}{stored}")
    elif e.never_cached:
        lines.append(
            "  that block was never cached earlier in this trace (no request had "
            "computed this prefix as a full block)"
        )
    if e.reason == "complete":
        lines.append("  every full block within the cap hit; the remaining tokens fill no block")
    elif e.reason in ("no_lookup", "too_short"):
        lines.append(
            "  no lookup: "
            + (
                "the prompt is shorter than one block plus one token"
                if e.reason == "too_short"
                else "prefix caching is off or the request skips it"
            )
        )
    lines.append(f"  reason: {e.reason}")
    return lines
