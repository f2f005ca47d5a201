"""The CacheDesign adapter: what the views and explanations ask of a cache design."""

from __future__ import annotations

from typing import Any

from kvlab.i18n import _

__all__ = ["CacheDesign", "UnknownDesign"]


class CacheDesign:
    """How a trace of one cache design is labelled and explained.

    The defaults describe vLLM V1 (kvlab.core), which every trace format field is defined for;
    a design overrides what differs. Every method is read-only on the trace.

    Attributes:
        names: The ``config["cache"]`` values of this design's traces (None = key absent).
        title: The line naming the design in views ("cache design: ..."), in English, marked
            with ``N_`` (views show it through ``kvlab.i18n._``).
        lookup_call_names: Calls whose LOOKED_UP events are prefix-cache lookups.
        lookups_scan_forward: True when every lookup walks the hashes left to right (no
            sliding-window / Mamba backward scan), whatever the group's manager.
    """

    names: tuple[str | None, ...] = ()
    title: str = ""
    lookup_call_names: tuple[str, ...] = ("get_computed_blocks",)
    lookups_scan_forward: bool = False

    def queue_labels(self, length: int) -> tuple[str, str]:
        """(title, tail note) of the free list drawn with ``length`` blocks (blocks)."""
        return (
            _("free_block_queue · {length} blocks · popleft takes from the left "
              "(least recently freed first)").format(length=length),
            _("◀ free_blocks appends here"),
        )

    def explain_call(self, trace: Any, call: Any) -> Any | None:
        """An explanation of ``call`` when this design explains it its own way, else None
        (kvlab.trace.explain then explains a get_computed_blocks call as vLLM V1's)."""
        return None

    def how_evicted(self, trace: Any, i: int, j: int, top: Any, block_id: int | None) -> str | None:
        """How the BLOCK_REMOVED at event ``i`` (its run of removals starts at ``j``) happened,
        in words, when this design has its own reasons; None for vLLM V1's wording."""
        return None

    def header_lines(self, trace: Any, index: int) -> list[str]:
        """Extra lines under the design line: the design's counters up to event ``index``."""
        return []

    def event_notes(self, trace: Any, first: int, last: int) -> dict[int, str]:
        """Event index -> a note on how this design differs there, for events ``first..last``."""
        return {}

    def free_list_scans(self, trace: Any, index: int) -> dict[int, int]:
        """Event -> free-list positions scanned, for each O(n) removal from the free list up to
        event ``index``; empty for designs whose free list unlinks in O(1) (vLLM V1)."""
        return {}


class UnknownDesign(CacheDesign):
    """A ``config["cache"]`` that no registered design claims: shown as given, read as vLLM V1."""

    def __init__(self, name: str) -> None:
        self.names = (name,)
        self.title = name
