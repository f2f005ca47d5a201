"""Rich renderers of the block pool at one event: the BlockPool grid, the free queue, the block
table. Each takes a Trace and an event index and returns a rich renderable; print it with
``rich.print`` or turn it into plain text with ``to_text`` (what tests and the CLI compare).

Language: every renderer takes a keyword-only ``lang`` (``"en"``, ``"zh"``; None = the current
language of ``kvlab.i18n``: ``use_language``, else ``KVLAB_LANG`` / the locale). Labels, legends
and captions are translated; vLLM's identifiers (block_id, ref_cnt, free_block_queue ...) and
every number stay as they are.

Examples:
    >>> import rich
    >>> rich.print(render_pool_grid(trace, 40))       # doctest: +SKIP
    >>> print(to_text(render_free_queue(trace, 40)))   # doctest: +SKIP
    free_block_queue · 6 blocks · popleft takes from the left (least recently freed first)
    evicts first ◀ HEAD ⇄ 3 ⇄ 9 ⇄ 8 ⇄ 7 ⇄ 6 ⇄ 5 ⇄ TAIL ◀ free_blocks appends here
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from kvlab.i18n import _, with_language
from kvlab.trace.designs import design_of
from kvlab.viz.design_header import last_deque_scan
from kvlab.trace.untrusted import shown
from kvlab.viz.palette import (
    STATUS_GLYPHS,
    STATUS_LABELS,
    STATUS_NAMES,
    status_style,
    superscript,
)
from kvlab.viz.snapshot import (
    BlockCell,
    BlockStatus,
    block_cells,
    block_statuses,
    block_table_rows,
    free_queue_window,
    group_label,
    state_at,
)

__all__ = [
    "Flow",
    "Hanging",
    "render_block_table",
    "render_free_queue",
    "render_legend",
    "render_pool_grid",
    "to_html",
    "to_text",
]


def to_text(renderable: RenderableType, width: int = 100) -> str:
    """Render to plain text (no colours) at ``width`` columns."""
    console = Console(record=True, width=width, color_system=None, file=_Null())
    console.print(renderable)
    return console.export_text()


def to_html(renderable: RenderableType, width: int = 100) -> str:
    """Render to static HTML (a ``<pre>`` with inline styles, no script) at ``width`` columns.

    rich escapes the text (``&``, ``<``, ``>``), so strings from a learner's run are safe in it.
    """
    console = Console(record=True, width=width, file=_Null(), color_system="truecolor")
    console.print(renderable)
    return console.export_html(inline_styles=True, code_format="<pre>{code}</pre>")


class _Null:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def _cell_text(cell: BlockCell, width: int) -> Text:
    mark = (
        superscript(cell.ref_cnt)
        if cell.status is BlockStatus.IN_USE
        else STATUS_GLYPHS[cell.status]
    )
    return Text(
        f" {cell.block_id:>{width}}{mark:<2}", style=status_style(cell.status, cell.ref_cnt)
    )


class Flow:
    """Items laid out left to right and wrapped between items, never inside one.

    rich wraps a Text at any whitespace (non-breaking spaces included); a block cell, a queue
    link or a legend entry must stay whole, so lines are packed here instead.

    Args:
        items: The pieces, in order.
        sep: Put between two items on one line.
        indent: Prefix of every line after the first.
        empty: Shown when there are no items (None = "(none)" in the current language).
    """

    def __init__(
        self, items: list[Text], sep: str = " ", indent: str = "", empty: str | None = None
    ) -> None:
        empty = _("(none)") if empty is None else empty
        self.items, self.sep, self.indent, self.empty = items, sep, indent, empty

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.items:
            yield Text(self.empty, style="dim")
            return
        line, filled, width = Text(), False, options.max_width
        for item in self.items:
            if filled and line.cell_len + len(self.sep) + item.cell_len > width:
                yield line
                line, filled = Text(self.indent), False
            elif filled:
                line.append(self.sep)
            line.append_text(item)
            filled = True
        yield line


class Hanging:
    """A line of text wrapped to the width with a hanging indent: continuation lines start
    ``indent`` cells in, so a wrapped line does not read as the start of the next one.

    Args:
        text: One line (no newlines); its styles are kept on every wrapped piece.
        indent: Cells before each continuation line (at most half the width is used).
    """

    def __init__(self, text: Text, indent: int) -> None:
        self.text, self.indent = text, max(0, indent)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        indent = min(self.indent, width // 2)
        lines = self.text.wrap(console, width, overflow="fold")
        if len(lines) <= 1:
            yield from lines
            return
        cut = len(lines[0].plain)
        first = lines[0].copy()
        first.rstrip()
        yield first
        plain = self.text.plain
        while cut < len(plain) and plain[cut] == " ":
            cut += 1
        for line in self.text[cut:].wrap(console, width - indent, overflow="fold"):
            line.rstrip()
            yield Text(" " * indent) + line


@with_language
def render_legend(statuses: Iterable[BlockStatus] | None = None) -> Flow:
    """One line: a swatch and a label per block status (all statuses by default)."""
    samples = {
        BlockStatus.NULL: "0∅",
        BlockStatus.IN_USE: "7¹",
        BlockStatus.IN_TRANSIT: "7↔",
        BlockStatus.EVICTABLE: "7•",
        BlockStatus.FREE: "7",
    }
    items = []
    for status in statuses or list(BlockStatus):
        items.append((samples[status], _(STATUS_LABELS[status]), status_style(status)))
        if status is BlockStatus.IN_USE:
            items.append(("7²", _("shared (ref_cnt ≥ 2)"), status_style(status, 2)))
    return Flow(
        [Text(f" {s} ", style=style) + Text(f" {label}") for s, label, style in items], "   "
    )


def _counts_line(cells: list[BlockCell]) -> Text:
    counts = {s: 0 for s in BlockStatus}
    for c in cells:
        counts[c.status] += 1
    items = [
        _("{count} {status}").format(count=counts[s], status=_(STATUS_NAMES[s]))
        for s in BlockStatus
        if counts[s]
    ]
    return Text(
        _("{num_blocks} blocks: {counts}").format(
            num_blocks=len(cells), counts=_(", ").join(items)
        ),
        style="bold",
    )


@with_language
def render_pool_grid(
    trace: Any,
    index: int,
    by_group: bool | None = None,
    max_blocks: int = 1024,
    legend: bool = True,
) -> RenderableType:
    """The BlockPool at event ``index``: one coloured cell per block, in block_id order.

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        by_group: One section per KV-cache group (the blocks that group holds or has cached),
            then the unowned free blocks; None = when the trace has more than one group.
        max_blocks: Cells drawn at most (blocks); larger pools show their first blocks and
            the counts of all.
        legend: Add the colour legend.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        ValueError: If max_blocks < 1.
    """
    if max_blocks < 1:
        raise ValueError(f"max_blocks must be >= 1 (blocks), got {max_blocks}")
    cells = block_cells(trace, index)
    width = len(str(len(cells) - 1))
    num_groups = int(trace.config.get("num_groups") or 1)
    by_group = num_groups > 1 if by_group is None else by_group
    parts: list[RenderableType] = [_counts_line(cells)]
    shown = cells[:max_blocks]
    if by_group:
        owners = [c.kv_cache_group_id for c in shown]
        for g in range(num_groups):
            parts.append(Text(group_label(trace.config, g), style="bold underline"))
            parts.append(Flow([_cell_text(c, width) for c, o in zip(shown, owners) if o == g]))
        parts.append(Text(_("null block and unowned free blocks"), style="bold underline"))
        rest = [c for c, o in zip(shown, owners) if o is None]
        parts.append(Flow([_cell_text(c, width) for c in rest]))
    else:
        parts.append(Flow([_cell_text(c, width) for c in shown]))
    if len(cells) > max_blocks:
        parts.append(
            Text(
                _("… blocks {first}..{last} not drawn").format(
                    first=max_blocks, last=len(cells) - 1
                ),
                style="dim",
            )
        )
    if legend:
        parts.append(render_legend())
    return Group(*parts)


def _queue_chip(block_id: int, status: BlockStatus) -> Text:
    mark = STATUS_GLYPHS[status]
    return Text(f" {block_id}{mark} ", style=status_style(status))


@with_language
def render_free_queue(trace: Any, index: int, max_blocks: int = 32) -> RenderableType:
    """The free_block_queue at event ``index``, fake head to fake tail (LRU order).

    A nano-vllm trace is labelled as its deque (``free_block_ids``, O(n) remove) and, when the
    call at ``index`` re-activated a freed cached block, says how many positions that remove
    scanned; a KV-event trace is labelled as kvlab's slots.

    ``popleft`` takes from the head (left): the least recently freed block, evicted first when
    it is cached. ``free_blocks`` appends at the tail. Long queues keep their head end and a
    few tail blocks, with the number hidden in between.

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        max_blocks: Blocks shown at most (blocks), >= 2.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        ValueError: If max_blocks < 2.
    """
    state = state_at(trace, index)
    statuses = block_statuses(state)
    window = free_queue_window(state.free_queue_order(), max_blocks)
    title, tail_note = _queue_labels(trace, window.length)
    items = [Text(_("evicts first ◀"), style="bold #dc2626"), Text("HEAD", style="bold")]
    items += [Text("⇄ ") + _queue_chip(b, statuses[b]) for b in window.head]
    if window.num_hidden:
        items.append(
            Text(_("⇄ … {num_hidden} more …").format(num_hidden=window.num_hidden), style="italic")
        )
    items += [Text("⇄ ") + _queue_chip(b, statuses[b]) for b in window.tail]
    items += [Text("⇄ ") + Text("TAIL", style="bold"), Text(tail_note, style="dim")]
    parts: list[RenderableType] = [title, Flow(items, indent="    ")]
    scan = last_deque_scan(trace, index)
    if scan is not None:
        seq, block_id, steps = scan
        parts.append(
            Text(
                _(
                    "remove(block {block_id}) at event #{seq}: scanned {steps} position(s) of the "
                    "deque to find it (vLLM V1's FreeKVCacheBlockQueue unlinks in O(1))"
                ).format(block_id=block_id, seq=seq, steps=steps),
                style="italic",
            )
        )
    return Group(*parts)


def _queue_labels(trace: Any, length: int) -> tuple[Text, str]:
    """The free-queue title and tail note of the trace's cache design."""
    title, tail_note = design_of(trace).queue_labels(length)
    return Text(title, style="bold"), tail_note


@with_language
def render_block_table(trace: Any, index: int, max_columns: int = 16) -> RenderableType:
    """req_to_blocks at event ``index``: one row per (request, group), logical block -> block_id.

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        max_columns: Logical blocks shown per row (blocks); the rest is counted.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        ValueError: If max_columns < 1.
    """
    if max_columns < 1:
        raise ValueError(f"max_columns must be >= 1 (blocks), got {max_columns}")
    state = state_at(trace, index)
    rows = block_table_rows(state)
    if not rows:
        return Text(_("block table: no request holds blocks"), style="dim")
    statuses = block_statuses(state)
    widest = max(len(r.block_ids) for r in rows)
    ncols = max(1, min(widest, max_columns))  # NOTE: an empty block list still gets a cell
    hybrid = int(trace.config.get("num_groups") or 1) > 1
    title = _("block table (req_to_blocks)")
    table = Table(  # NOTE: wide enough that no word of the title (req_to_blocks) is split
        title=title, title_style="bold", show_lines=False,
        min_width=max(cell_len(w) for w in title.split()),
    )  # fmt: skip
    table.add_column(_("request"), style="bold")
    if hybrid:
        table.add_column(_("group"))
    for j in range(ncols):
        table.add_column(str(j), justify="right")
    if widest > max_columns:
        table.add_column("…")
    for r in rows:
        cells: list[Any] = [Text(shown(r.request_id))] + ([str(r.kv_cache_group_id)] if hybrid else [])
        for b in r.block_ids[:max_columns]:
            glyph = STATUS_GLYPHS[statuses[b]] if statuses[b] is BlockStatus.NULL else ""
            cells.append(Text(f"{b}{glyph}", style=status_style(statuses[b], state.ref_cnt[b])))
        if not r.block_ids:
            cells.append(Text(_("(empty)"), style="dim"))
        cells += [""] * (ncols - max(min(len(r.block_ids), max_columns), 1))
        if widest > max_columns:
            extra = len(r.block_ids) - max_columns
            cells.append(f"+{extra}" if extra > 0 else "")
        table.add_row(*cells)
    return table
