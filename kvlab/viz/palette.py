"""One colour scheme for every kvlab view (terminal, DOT, widget), chosen to survive a projector.

Saturated, well-separated hues with different lightness (blue / purple / amber / grey / teal),
text colour picked for contrast on each, and a glyph per status so no meaning rests on colour
alone (``∅`` null, superscript ref_cnt for blocks in use, ``•`` evictable, ``↔`` in transit).
The widget's CSS (``kvlab/viz/static/player.css``) uses the same hex values.
"""

from __future__ import annotations

from kvlab.i18n import N_
from kvlab.viz.snapshot import BlockStatus

__all__ = [
    "GROUP_COLOURS",
    "HIT",
    "MISS",
    "SEGMENT_COLOURS",
    "SEGMENT_SYMBOLS",
    "SHARED",
    "STATUS_COLOURS",
    "STATUS_GLYPHS",
    "STATUS_LABELS",
    "STATUS_NAMES",
    "status_style",
    "superscript",
]

STATUS_COLOURS: dict[BlockStatus, tuple[str, str]] = {
    BlockStatus.NULL: ("#3a3a3a", "#ffffff"),
    BlockStatus.IN_USE: ("#1d4ed8", "#ffffff"),
    BlockStatus.IN_TRANSIT: ("#0f766e", "#ffffff"),
    BlockStatus.EVICTABLE: ("#f59e0b", "#000000"),
    BlockStatus.FREE: ("#d4d4d4", "#000000"),
}
"""status -> (background, foreground) hex."""

SHARED = ("#7e22ce", "#ffffff")
"""(background, foreground) of a block in use by more than one holder (ref_cnt >= 2)."""

HIT = "#15803d"
"""A hash that is cached (a lookup would hit)."""
MISS = "#dc2626"
"""A hash that is not cached (a lookup would miss)."""

STATUS_GLYPHS: dict[BlockStatus, str] = {
    BlockStatus.NULL: "∅",
    BlockStatus.IN_USE: "",
    BlockStatus.IN_TRANSIT: "↔",
    BlockStatus.EVICTABLE: "•",
    BlockStatus.FREE: "",
}
"""Mark after the block id (in-use blocks show their ref_cnt as a superscript instead)."""

STATUS_LABELS: dict[BlockStatus, str] = {
    BlockStatus.NULL: "null_block",
    BlockStatus.IN_USE: N_("in use (superscript = ref_cnt)"),
    BlockStatus.IN_TRANSIT: N_("in transit (mid-operation)"),
    BlockStatus.EVICTABLE: N_("free, cached: evictable"),
    BlockStatus.FREE: N_("free, empty"),
}
"""status -> legend label, in English (marked for translation: show it through
``kvlab.i18n._``; ``null_block`` is vLLM's identifier and stays as it is)."""

STATUS_NAMES: dict[BlockStatus, str] = {
    BlockStatus.NULL: N_("null"),
    BlockStatus.IN_USE: N_("in_use"),
    BlockStatus.IN_TRANSIT: N_("in_transit"),
    BlockStatus.EVICTABLE: N_("evictable"),
    BlockStatus.FREE: N_("free"),
}
"""status -> the word the pool counts use (English = ``BlockStatus.value``; translate with ``_``)."""

SEGMENT_COLOURS: dict[str, str] = {
    "comp": "#475569",
    "new_comp": HIT,
    "ext_comp": "#0e7490",
    "new": "#1d4ed8",
    "lookahead": "#a855f7",
}
"""allocate_slots segment -> colour (text on them is white)."""

SEGMENT_SYMBOLS: dict[str, str] = {
    "comp": "=",
    "new_comp": "+",
    "ext_comp": "~",
    "new": "#",
    "lookahead": ".",
}
"""allocate_slots segment -> the character that fills its bar (its meaning without colour)."""

GROUP_COLOURS = ("#1d4ed8", "#ea580c", "#059669", "#db2777", "#7c3aed", "#65a30d")
"""Colour of kv_cache_group_id i is ``GROUP_COLOURS[i % len(GROUP_COLOURS)]``."""

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(n: int) -> str:
    """``n`` in superscript digits (``12`` -> ``¹²``); ``⁺`` for n > 99."""
    return "⁺" if n > 99 else str(n).translate(_SUPERSCRIPT)


def status_style(status: BlockStatus, ref_cnt: int = 0) -> str:
    """A rich style string for a block cell (shared blocks get their own colour)."""
    bg, fg = SHARED if status is BlockStatus.IN_USE and ref_cnt >= 2 else STATUS_COLOURS[status]
    return f"bold {fg} on {bg}"
