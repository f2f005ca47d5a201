"""Readable text for an Explanation (what ``str(explain(trace, call))`` prints).

The text is in the language of kvlab.i18n: ``render_lines(e, lang="zh")`` (keyword-only; None =
the current language). vLLM's identifiers (get_computed_blocks, num_tokens, hash_to_block_id ...),
block ids, hashes and every number are the same in every language.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlab.i18n import N_, _, with_language
from kvlab.trace.untrusted import shown

if TYPE_CHECKING:
    from kvlab.trace.explain import Explanation
    from kvlab.trace.explain_nano import NanoExplanation, NanoProbe

__all__ = ["render_lines", "render_nano_lines"]


REASON_NAMES = {
    "miss": N_("a probe missed"),
    "capped": N_("the num_tokens - 1 cap"),
    "eagle": N_("the EAGLE drop"),
    "hybrid": N_("another group's alignment"),
    "complete": N_("every full block hit"),
    "too_short": N_("no full block"),
    "no_lookup": N_("no lookup"),
    "no_entry": N_("no map entry"),
    "token_mismatch": N_("the token check failed"),
    "partial_last_block": N_("a partial last block"),
}
"""explain()'s reason codes (Explanation.reason, NanoExplanation.reason) -> what they mean."""


def _reason_line(reason: str) -> str:
    """``reason: miss`` in English; elsewhere the meaning, with the code kept for searching
    (``原因：未命中（miss）``)."""
    name = _(REASON_NAMES[reason]) if reason in REASON_NAMES else reason
    shown = reason if name == REASON_NAMES.get(reason, reason) else _("{name} ({code})").format(
        name=name, code=reason)
    return _("  reason: {reason}").format(reason=shown)


@with_language
def render_lines(e: Explanation) -> list[str]:
    """The explanation as lines of text: the hit and cap, each turn, then why it stopped.

    Args:
        e: An Explanation from ``kvlab.trace.explain``.
    """
    return _header(e) + _turns(e) + _causes(e) + [_reason_line(e.reason)]


def _header(e: Explanation) -> list[str]:
    c, bs = e.call, max(e.block_size, 1)
    hit = _(
        "get_computed_blocks for request {request} (event #{seq}, step {step}): "
        "hit {hit} of {num_tokens} tokens ({hit_blocks} blocks of {block_size})"
    ).format(
        request=shown(c.request),
        seq=c.begin,
        step=c.step,
        hit=e.num_new_computed_tokens,
        num_tokens=e.num_tokens,
        hit_blocks=e.num_new_computed_tokens // bs,
        block_size=e.block_size,
    )
    cap = _(
        "  cap: at most num_tokens - 1 = {cap} tokens ({cap_blocks} full blocks); "
        "the last token is recomputed"
    ).format(cap=e.max_cache_hit_length, cap_blocks=e.max_cache_hit_length // bs)
    lines = [hit, cap]
    if e.capped:
        lines.append(
            _(
                "  stopped by the cap: every block within it hit; the last full block "
                "is recomputed to produce logits"
            )
        )
    return lines


def _turns(e: Explanation) -> list[str]:
    lines = []
    for t in e.turns:
        hits = sum(p.hit for p in t.probes)
        span = (
            _("{hit_in} -> {hit_out} tokens").format(
                hit_in=t.hit_length_in, hit_out=t.hit_length_out
            )
            if t.hit_length_out is not None
            else _("max {hit_in} tokens").format(hit_in=t.hit_length_in)
        )
        reused = _(" (reused earlier hit)") if t.reused else ""
        lines.append(
            _(
                "  iteration {iteration} groups {groups} ({spec}): "
                "{span}, {num_probes} probes, {hits} hits{reused}"
            ).format(
                iteration=t.iteration,
                groups=t.kv_cache_group_ids,
                spec=shown(t.spec),
                span=span,
                num_probes=len(t.probes),
                hits=hits,
                reused=reused,
            )
        )
    for t in e.shortened_by:
        why = (
            _(" (every probe hit: rounded down to whole blocks)")
            if all(p.hit for p in t.probes)
            else ""
        )
        lines.append(
            _(
                "  shortened by groups {groups} ({spec}) in iteration "
                "{iteration}: {hit_in} -> {hit_out} tokens{why}"
            ).format(
                groups=t.kv_cache_group_ids,
                spec=shown(t.spec),
                iteration=t.iteration,
                hit_in=t.hit_length_in,
                hit_out=t.hit_length_out,
                why=why,
            )
        )
    return lines


_REASON_NOTES = {
    "complete": N_("  every full block within the cap hit; the remaining tokens fill no block"),
    "too_short": N_("  no lookup: the prompt is shorter than one block plus one token"),
    "no_lookup": N_("  no lookup: prefix caching is off or the request skips it"),
}


def _causes(e: Explanation) -> list[str]:
    lines = []
    if (m := e.deciding_miss) is not None:
        lines.append(
            _(
                "  miss: block index {block_index} (hash {hash}) not cached in group "
                "{group} (event #{seq})"
            ).format(block_index=m.block_index, hash=m.hash, group=m.kv_cache_group_id, seq=m.seq)
        )
    if e.eagle_dropped_blocks:
        lines.append(
            _(
                "  EAGLE: dropped the last {n} matched block(s) (recomputed for the draft head)"
            ).format(n=e.eagle_dropped_blocks)
        )
    if (ev := e.eviction) is not None:
        stored = (
            _("; cached by request {request} at event #{seq}").format(
                request=shown(ev.stored_by), seq=ev.stored_seq
            )
            if ev.stored_seq is not None
            else ""
        )
        lines.append(
            _("  evicted at event #{seq} (step {step}, {kind}): {how}{stored}").format(
                seq=ev.seq, step=ev.step, kind=ev.kind, how=ev.how, stored=stored
            )
        )
    elif e.never_cached:
        lines.append(
            _(
                "  that block was never cached earlier in this trace (no request had "
                "computed this prefix as a full block)"
            )
        )
    if e.reason in _REASON_NOTES:
        lines.append(_(_REASON_NOTES[e.reason]))
    return lines


_VERDICTS = {
    "hit": N_("hit block {b}"),
    "stale_hit": N_(
        "hit block {b} through a stale hash_to_block_id entry (same tokens, another "
        "prefix: nano-vllm reuses KV computed for that prefix)"
    ),
    "no_entry": N_("miss: no hash_to_block_id entry"),
    "token_mismatch": N_("miss: hash_to_block_id names block {e}, whose token_ids differ"),
}

_NANO_REASON_NOTES = {
    "complete": N_("  every block hit (the prompt fills whole blocks)"),
    "partial_last_block": N_(
        "  every full block hit; the partial last block has no hash and is not looked up"
    ),
    "too_short": N_("  no lookup: the prompt is shorter than one block"),
}


@with_language
def render_nano_lines(e: NanoExplanation) -> list[str]:
    """A nano-vllm allocate explained: the hit, each probe, re-activations, why it stopped.

    Args:
        e: A NanoExplanation from ``kvlab.trace.explain_nano``.
    """
    c, bs = e.call, max(e.block_size, 1)
    lines = [
        _(
            "allocate for request {request} (event #{seq}, step {step}, nano-vllm "
            "BlockManager): hit {hit} of {num_tokens} tokens "
            "({hit_blocks} of {num_blocks} blocks of {block_size})"
        ).format(
            request=c.request,
            seq=c.begin,
            step=c.step,
            hit=e.num_cached_tokens,
            num_tokens=e.num_tokens,
            hit_blocks=e.num_cached_tokens // bs,
            num_blocks=e.num_blocks,
            block_size=e.block_size,
        ),
        _(
            "  lookups go block 0, 1, ... and stop at the first miss; every later block is taken "
            "fresh from the head of free_block_ids"
        ),
    ]
    for p in e.probes:
        text = _(_VERDICTS[p.verdict]).format(b=p.block_id, e=p.entry_block_id)
        lines.append(
            _("  probe block {block_index} (hash {hash}, event #{seq}): {verdict}").format(
                block_index=p.block_index, hash=p.hash, seq=p.seq, verdict=text
            )
        )
    for block_id, steps in e.reactivated:
        lines.append(
            _(
                "  re-activated freed cached block {block_id}: removed from free_block_ids after "
                "scanning {steps} position(s) (O(n); vLLM V1 unlinks in O(1))"
            ).format(block_id=block_id, steps=steps)
        )
    return lines + _nano_cause(e) + [_reason_line(e.reason)]


def _nano_cause(e: NanoExplanation) -> list[str]:
    m: NanoProbe | None = e.deciding_miss
    if m is None:
        return [_(_NANO_REASON_NOTES[e.reason])]
    if m.verdict == "no_entry":
        lines = [
            _("  stopped at block index {block_index}: first missing hash {hash}").format(
                block_index=m.block_index, hash=m.hash
            )
        ]
    else:
        kind = _("a stale entry") if m.entry_stale else _("a valid entry (an xxhash64 collision)")
        lines = [
            _(
                "  stopped at block index {block_index}: token-id mismatch: hash {hash} has "
                "{kind} naming block {block_id}, which holds other tokens now"
            ).format(block_index=m.block_index, hash=m.hash, kind=kind, block_id=m.entry_block_id)
        ]
    if (ev := e.eviction) is not None:
        stored = (
            _("; cached by request {request}").format(request=shown(ev.stored_by))
            if ev.stored_by is not None
            else ""
        )
        lines.append(
            _("  removed from the cache at event #{seq} (step {step}): {how}{stored}").format(
                seq=ev.seq, step=ev.step, how=ev.how, stored=stored
            )
        )
    elif m.verdict == "no_entry":
        lines.append(_("  no request had stored this hash earlier in this trace"))
    return lines
