"""Readable text for an Explanation (what ``str(explain(trace, call))`` prints)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.trace.explain import Explanation
    from kvlab.trace.explain_nano import NanoExplanation, NanoProbe

__all__ = ["render_lines", "render_nano_lines"]


def render_lines(e: Explanation) -> list[str]:
    """The explanation as lines of text: the hit and cap, each turn, then why it stopped.

    Args:
        e: An Explanation from ``kvlab.trace.explain``.
    """
    return _header(e) + _turns(e) + _causes(e) + [f"  reason: {e.reason}"]


def _header(e: Explanation) -> list[str]:
    c, bs = e.call, max(e.block_size, 1)
    hit = (
        f"get_computed_blocks for request {c.request} (event #{c.begin}, step {c.step}): "
        f"hit {e.num_new_computed_tokens} of {e.num_tokens} tokens "
        f"({e.num_new_computed_tokens // bs} blocks of {e.block_size})"
    )
    cap = (
        f"  cap: at most num_tokens - 1 = {e.max_cache_hit_length} tokens ("
        f"{e.max_cache_hit_length // bs} full blocks); the last token is recomputed"
    )
    lines = [hit, cap]
    if e.capped:
        lines.append(
            "  stopped by the cap: every block within it hit; the last full block "
            "is recomputed to produce logits"
        )
    return lines


def _turns(e: Explanation) -> list[str]:
    lines = []
    for t in e.turns:
        hits = sum(p.hit for p in t.probes)
        span = (
            f"{t.hit_length_in} -> {t.hit_length_out} tokens"
            if t.hit_length_out is not None
            else f"max {t.hit_length_in} tokens"
        )
        reused = " (reused earlier hit)" if t.reused else ""
        lines.append(
            f"  iteration {t.iteration} groups {t.kv_cache_group_ids} ({t.spec}): "
            f"{span}, {len(t.probes)} probes, {hits} hits{reused}"
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
    return lines


def _causes(e: Explanation) -> list[str]:
    lines = []
    if (m := e.deciding_miss) is not None:
        lines.append(
            f"  miss: block index {m.block_index} (hash {m.hash}) not cached in group "
            f"{m.kv_cache_group_id} (event #{m.seq})"
        )
    if e.eagle_dropped_blocks:
        lines.append(
            f"  EAGLE: dropped the last {e.eagle_dropped_blocks} matched block(s) "
            "(recomputed for the draft head)"
        )
    if (ev := e.eviction) is not None:
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
    lines += {
        "complete": ["  every full block within the cap hit; the remaining tokens fill no block"],
        "too_short": ["  no lookup: the prompt is shorter than one block plus one token"],
        "no_lookup": ["  no lookup: prefix caching is off or the request skips it"],
    }.get(e.reason, [])
    return lines


_VERDICTS = {
    "hit": "hit block {b}",
    "stale_hit": "hit block {b} through a stale hash_to_block_id entry (same tokens, another "
    "prefix: nano-vllm reuses KV computed for that prefix)",
    "no_entry": "miss: no hash_to_block_id entry",
    "token_mismatch": "miss: hash_to_block_id names block {e}, whose token_ids differ",
}


def render_nano_lines(e: NanoExplanation) -> list[str]:
    """A nano-vllm allocate explained: the hit, each probe, re-activations, why it stopped.

    Args:
        e: A NanoExplanation from ``kvlab.trace.explain_nano``.
    """
    c, bs = e.call, max(e.block_size, 1)
    lines = [
        (
            f"allocate for request {c.request} (event #{c.begin}, step {c.step}, nano-vllm "
            f"BlockManager): hit {e.num_cached_tokens} of {e.num_tokens} tokens "
            f"({e.num_cached_tokens // bs} of {e.num_blocks} blocks of {e.block_size})"
        ),
        (
            "  lookups go block 0, 1, ... and stop at the first miss; every later block is taken "
            "fresh from the head of free_block_ids"
        ),
    ]
    for p in e.probes:
        text = _VERDICTS[p.verdict].format(b=p.block_id, e=p.entry_block_id)
        lines.append(f"  probe block {p.block_index} (hash {p.hash}, event #{p.seq}): {text}")
    for block_id, steps in e.reactivated:
        lines.append(
            f"  re-activated freed cached block {block_id}: removed from free_block_ids after "
            f"scanning {steps} position(s) (O(n); vLLM V1 unlinks in O(1))"
        )
    return lines + _nano_cause(e) + [f"  reason: {e.reason}"]


def _nano_cause(e: NanoExplanation) -> list[str]:
    m: NanoProbe | None = e.deciding_miss
    if m is None:
        return {
            "complete": ["  every block hit (the prompt fills whole blocks)"],
            "partial_last_block": [
                "  every full block hit; the partial last block has no hash and is not looked up"
            ],
            "too_short": ["  no lookup: the prompt is shorter than one block"],
        }[e.reason]
    if m.verdict == "no_entry":
        lines = [f"  stopped at block index {m.block_index}: first missing hash {m.hash}"]
    else:
        kind = "a stale entry" if m.entry_stale else "a valid entry (an xxhash64 collision)"
        lines = [
            (
                f"  stopped at block index {m.block_index}: token-id mismatch: hash {m.hash} has "
                f"{kind} naming block {m.entry_block_id}, which holds other tokens now"
            )
        ]
    if (ev := e.eviction) is not None:
        stored = f"; cached by request {ev.stored_by}" if ev.stored_by is not None else ""
        lines.append(
            f"  removed from the cache at event #{ev.seq} (step {ev.step}): {ev.how}{stored}"
        )
    elif m.verdict == "no_entry":
        lines.append("  no request had stored this hash earlier in this trace")
    return lines
