"""What the terminal views add for the trace's cache design: the line naming it, its counters,
per-event notes and its O(n) free-list scans — all asked of the design's adapter
(``kvlab.trace.designs.design_of``), so no view tests ``config["cache"]`` itself.

``trace.config["cache"]`` names the design: absent (kvlab.core, vLLM V1), ``"nano-vllm"``
(a recorded ``kvlab.nanovllm.NanoBlockManager``) or ``"vllm-kv-events"`` (a trace rebuilt from
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

from kvlab.i18n import _
from kvlab.trace.designs import design_of
from kvlab.trace.designs.nano_vllm import nano_summary
from kvlab.viz.calls import find_call

__all__ = [
    "cache_design",
    "event_notes",
    "last_deque_scan",
    "nano_summary",
    "render_cache_header",
]


def cache_design(config: dict[str, Any]) -> str:
    """The line naming the cache design a trace config names, in the current language (an
    unknown value as given)."""
    return _(design_of(config).title)


def render_cache_header(trace: Any, index: int) -> RenderableType:
    """The design line (every trace) and the design's counters up to event ``index``.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    if not -1 <= index < len(trace):
        raise IndexError(f"event index {index} is outside [-1, {len(trace)})")
    design = design_of(trace)
    line = Text(_("cache design: {title}").format(title=_(design.title)), style="bold")
    extra = design.header_lines(trace, index)
    return Group(line, *(Text(x) for x in extra)) if extra else line


def last_deque_scan(trace: Any, index: int) -> tuple[int, int, int] | None:
    """The last O(n) free-list removal of the call at ``index`` so far: (event, block_id, positions).

    None when the design unlinks in O(1) (vLLM V1), or that call removed no block up to ``index``.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    call = find_call(trace, index)
    if call is None or (0 <= call.end < index):
        return None
    scans = design_of(trace).free_list_scans(trace, index)
    scans = [s for s in scans.items() if call.begin < s[0] <= index]
    if not scans:
        return None
    seq, steps = scans[-1]
    return seq, int(trace.cols.a[seq]), steps


def event_notes(trace: Any, first: int, last: int) -> dict[int, str]:
    """Event index -> a note on how the trace's design differs from vLLM V1 there, for events
    ``first..last`` (empty for vLLM V1's own traces)."""
    return design_of(trace).event_notes(trace, first, last)
