"""Every terminal view keeps its meaning with colour off (NO_COLOR / piped) at 80 columns."""

from __future__ import annotations

import io

from rich.console import Console

from kvlab.trace import EventKind, Trace
from kvlab.viz import (
    render_allocate_slots,
    render_block_table,
    render_events,
    render_fixed_point,
    render_free_queue,
    render_hash_chain,
    render_pool_grid,
    render_state,
)
from kvlab.viz.palette import SEGMENT_SYMBOLS


def _piped(renderable: object, width: int = 80) -> str:
    """What a pipe gets under NO_COLOR: no escape codes, ``width`` columns."""
    out = io.StringIO()
    Console(file=out, width=width, no_color=True, color_system=None, force_terminal=False).print(
        renderable
    )
    return out.getvalue()


def _touched(hybrid: Trace) -> int:
    """The hybrid trace's TOUCH of block 3 (inside b's allocate_slots, after its lookup)."""
    i = hybrid.find(EventKind.TOUCH, block_id=3)
    assert i is not None
    return i


def test_no_view_writes_escape_codes_or_passes_80_columns(hybrid: Trace, shared: Trace) -> None:
    i = _touched(hybrid)
    first_decode = hybrid.calls("allocate_slots", request="b")[1]
    views = [
        render_pool_grid(hybrid, i),
        render_free_queue(hybrid, i),
        render_block_table(hybrid, first_decode.end),
        render_allocate_slots(hybrid, i),
        render_fixed_point(hybrid, i),
        render_hash_chain(hybrid, i),
        render_events(shared, shared.find(EventKind.TOUCH, step=4)),
        render_state(hybrid, i),
    ]
    for view in views:
        text = _piped(view)
        assert "\x1b[" not in text
        assert max(len(line) for line in text.splitlines()) <= 80


def test_allocate_slots_ruler_shows_each_segment_by_its_symbol(hybrid: Trace) -> None:
    lines = _piped(render_allocate_slots(hybrid, _touched(hybrid))).splitlines()
    # b's call: 12 new_comp tokens (3 blocks) then 8 new tokens (2 blocks), block_size 4
    bar = lines[1].rstrip()
    blocks = bar.split("▏")[1:]
    assert len(blocks) == 5 and len({len(b) for b in blocks}) == 1
    assert [set(b) for b in blocks] == [{"+"}] * 3 + [{"#"}] * 2
    legend = "\n".join(lines[3:])
    for name, symbol in SEGMENT_SYMBOLS.items():
        assert f" {symbol * 2} {name} " in legend, name  # the key says which symbol is which
    assert len(set(SEGMENT_SYMBOLS.values())) == len(SEGMENT_SYMBOLS)
    assert "new_comp  12 tokens:" in legend and "new  8 tokens:" in legend


def test_hash_chain_legend_names_hit_only_when_something_hits(
    hybrid: Trace, shared: Trace
) -> None:
    cold = _piped(render_hash_chain(shared, -1))  # nothing is cached before event 0
    assert "cached: hit" not in cold and "✗ not cached: miss" in cold and "✓" not in cold
    warm = _piped(render_hash_chain(hybrid, _touched(hybrid)))
    assert "✓ cached: hit" in warm and "✓1/5" in warm  # block 1 (group 0) / 5 (group 1)


def test_titles_survive_80_columns(hybrid: Trace) -> None:
    flat = " ".join(_piped(render_state(hybrid, _touched(hybrid))).split())
    lookup, alloc = hybrid.calls(request="b")[:2]
    for title in (
        "free_block_queue · 28 blocks · popleft takes from the left (least recently freed first)",
        f"hybrid fixed point · get_computed_blocks [b] at event #{lookup.begin}",
        f"allocate_slots [b] at event #{alloc.begin} · allocated, num_blocks_to_allocate = 9",
        "hash chains (block_hash, short hex) ·",
    ):
        assert title in flat, title
