"""What the terminal views add for a trace that is not vLLM V1's own: which cache design it
comes from, and where nano-vllm's BlockManager differs from vLLM V1.

``trace.config["cache"]`` names the design: absent (kvlab.core, vLLM V1), ``"nano-vllm"``
(a recorded ``kvlab.compare.NanoBlockManager``) or ``"vllm-kv-events"`` (a trace rebuilt from
a real vLLM's KV-event stream). For nano-vllm the views show, from
``kvlab.trace.explain_nano.nano_facts``:

* its free list is a deque (``free_block_ids``): popleft / append, and a hit on a free block
  (a *re-activation*) removes it by an O(n) scan, with the positions scanned;
* lookup misses rejected by the token-id check (an entry existed), hits through stale entries,
  and the stale ``hash_to_block_id`` entries nano-vllm never deletes.

Examples:
    >>> print(to_text(render_cache_header(trace, 40)))    # doctest: +SKIP
    cache design: nano-vllm BlockManager (hash_to_block_id + deque free_block_ids)
    nano-vllm so far: lookups 3, hits 2, token-id mismatch misses 1, stale-entry hits 0, ...
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from kvlab.trace import EventKind
from kvlab.trace.explain_nano import NanoFacts, is_nano, nano_facts
from kvlab.viz.calls import find_call

__all__ = [
    "CACHE_DESIGNS",
    "cache_design",
    "event_notes",
    "last_deque_scan",
    "nano_summary",
    "render_cache_header",
]

K = EventKind

CACHE_DESIGNS = {
    None: "vLLM V1 (BlockPool + FreeKVCacheBlockQueue, kvlab.core)",
    "vllm-v1": "vLLM V1 (BlockPool + FreeKVCacheBlockQueue, kvlab.core)",
    "nano-vllm": "nano-vllm BlockManager (hash_to_block_id + deque free_block_ids)",
    "vllm-kv-events": "vLLM KV events (BlockStored / BlockRemoved stream; slots are kvlab's)",
}
"""``config["cache"]`` -> the line naming the design (None = key absent)."""


def cache_design(config: dict[str, Any]) -> str:
    """The cache design a trace config names (an unknown value is shown as given)."""
    value = config.get("cache")
    return CACHE_DESIGNS.get(value, str(value))


def nano_summary(facts: NanoFacts) -> str:
    """One line of nano-vllm's counters (lookups, mismatches, stale entries, deque scans)."""
    return (
        f"nano-vllm so far: lookups {facts.num_lookups}, hits {facts.num_hits}, "
        f"token-id mismatch misses {facts.num_token_mismatches}, "
        f"stale-entry hits {facts.num_stale_hits}, "
        f"re-activated blocks {facts.num_reactivated_blocks} "
        f"({facts.num_deque_scan_steps} deque positions scanned), "
        f"stale map entries {len(facts.stale_entries)}"
    )


def render_cache_header(trace: Any, index: int) -> RenderableType:
    """The design line (every trace) and, for nano-vllm, its counters up to event ``index``.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    if not -1 <= index < len(trace):
        raise IndexError(f"event index {index} is outside [-1, {len(trace)})")
    line = Text(f"cache design: {cache_design(trace.config)}", style="bold")
    if not is_nano(trace):
        return line
    return Group(line, Text(nano_summary(nano_facts(trace, index))))


def last_deque_scan(trace: Any, index: int) -> tuple[int, int, int] | None:
    """The last re-activation of the call at ``index`` so far: (event, block_id, positions).

    None when the trace is not nano-vllm's, or that call removed no block up to ``index``.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    call = find_call(trace, index)
    if not is_nano(trace) or call is None or (0 <= call.end < index):
        return None
    scans = [s for s in nano_facts(trace, index).scans.items() if call.begin < s[0] <= index]
    if not scans:
        return None
    seq, steps = scans[-1]
    return seq, int(trace.cols.a[seq]), steps


def event_notes(trace: Any, first: int, last: int) -> dict[int, str]:
    """Event index -> a note on how nano-vllm differs there, for events ``first..last``.

    A REMOVE is a re-activation (with its O(n) scan); a LOOKED_UP miss whose hash had an entry
    is a token-id mismatch; a hit through a stale entry is flagged. Empty for other designs.
    """
    if not is_nano(trace) or last < 0:
        return {}
    facts, notes = nano_facts(trace, last), {}
    for seq, steps in facts.scans.items():
        if seq >= first:
            notes[seq] = (
                f"re-activates freed cached block {int(trace.cols.a[seq])} "
                f"(O(n) deque scan: {steps} positions)"
            )
    for seq, p in facts.probes.items():
        if seq < first:
            continue
        if p.verdict == "token_mismatch":
            stale = "stale " if p.entry_stale else ""
            notes[seq] = f"token-id mismatch: {stale}entry names block {p.entry_block_id}"
        elif p.verdict == "stale_hit":
            notes[seq] = f"hit through a stale entry: block {p.block_id}, another prefix"
    return notes
