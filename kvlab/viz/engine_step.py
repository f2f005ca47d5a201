"""The engine step map: one request followed through one step, from a recorded trace.

Scheduler → KVCacheManager → worker (BlockTable row, slot_mapping) → attention kernel. The
scheduler's decision and the manager's work come from the trace (the request's calls in that
step and the block events inside them); the worker's row and slot mapping are passed in, as
the worker computed them (kvlab.viz does not import kvlab.worker), and the kernel's reads
follow from them: every block of the row up to the last position computed, its writes are the
slot mapping. ``render_engine_step`` draws it for a terminal or notebook, ``engine_step_dot``
as a Graphviz figure (``kvlab figures`` writes ``engine_step.svg``).

Examples:
    >>> step = engine_step(trace, step=3, request_id="r", block_table_row=[1, 2, 5],
    ...                    positions=[8], slot_mapping=[20])          # doctest: +SKIP
    >>> rich.print(render_engine_step(step))                          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table

from kvlab.i18n import _, ngettext, with_language
from kvlab.trace import EventKind

__all__ = ["EngineStep", "engine_step", "engine_step_dot", "render_engine_step"]

K = EventKind


@dataclass(frozen=True)
class EngineStep:
    """One request's share of one engine step, stage by stage.

    Attributes:
        step: The scheduler step.
        request_id: The request followed.
        num_computed_tokens: Tokens computed before the step, prefix hit included (tokens).
        num_new_tokens: Tokens the scheduler gave it this step (tokens).
        num_hit_tokens: Its prefix-cache hit this step (tokens; 0 unless admitted now).
        calls: ``(call name, one-line summary)`` of its KVCacheManager calls in the step.
        new_block_ids: Blocks popped from the free queue for it (get_new_blocks), in order.
        cached_block_ids: Blocks cached (BLOCK_STORED) for it in the step.
        block_table_row: The worker's BlockTable row after the step's update (block ids).
        positions: Token positions computed this step.
        slot_mapping: The slot of each position (block_id * block_size + offset).
        block_size: Tokens per block.
    """

    step: int
    request_id: str
    num_computed_tokens: int
    num_new_tokens: int
    num_hit_tokens: int
    calls: tuple[tuple[str, str], ...]
    new_block_ids: tuple[int, ...]
    cached_block_ids: tuple[int, ...]
    block_table_row: tuple[int, ...]
    positions: tuple[int, ...]
    slot_mapping: tuple[int, ...]
    block_size: int

    @property
    def blocks_read(self) -> tuple[int, ...]:
        """The row's blocks the kernel reads for the step's last position (full attention)."""
        last = self.positions[-1] if self.positions else -1
        return self.block_table_row[: last // self.block_size + 1]


def engine_step(trace: Any, step: int, request_id: str, block_table_row: list[int],
                positions: list[int], slot_mapping: list[int]) -> EngineStep:  # fmt: skip
    """Follow ``request_id`` through scheduler step ``step`` of ``trace``.

    Args:
        trace: A kvlab.trace.Trace recorded with the scheduler's recorder (steps marked).
        step: The step (``SchedulerOutput.step``).
        request_id: A request scheduled in that step.
        block_table_row: Its worker BlockTable row after the step (block ids, first group).
        positions: The positions it computes in the step (tokens).
        slot_mapping: Their slots (as ``BlockTable.compute_slot_mapping`` gave them).

    Raises:
        ValueError: The request has no allocate_slots call in that step, or the positions and
            slots differ in length.
    """
    if len(positions) != len(slot_mapping):
        raise ValueError(f"{len(positions)} positions but {len(slot_mapping)} slots")
    calls = [c for c in trace.calls(request=request_id) if c.step == step]
    alloc = [c for c in calls if c.name == "allocate_slots" and c.result.get("allocated")]
    if not alloc:
        raise ValueError(f"request {request_id!r} was not allocated in step {step}; "
                         "pick a step in which it was scheduled")  # fmt: skip
    args = alloc[-1].args
    hit = sum(c.result.get("num_new_computed_tokens", 0) for c in calls if c.name == "get_computed_blocks"
              and c.end >= 0 and alloc[-1].begin > c.end)  # fmt: skip
    popped, cached = [], []
    for c in calls:
        for i in range(c.begin, c.end + 1):
            event = trace[i]
            if event.kind == K.POPLEFT_N and c.name == "allocate_slots":
                popped += event.fields["block_ids"]
            elif event.kind == K.BLOCK_STORED:
                cached += event.fields["block_ids"]
    summary = tuple((c.name, ", ".join(f"{k}={v}" for k, v in c.args.items() if v)) for c in calls)
    bs = int((trace.config.get("groups") or [{}])[0].get("block_size", 1))
    return EngineStep(step, request_id, int(args["num_computed_tokens"]) + int(args["num_new_computed_tokens"]),
                      int(args["num_new_tokens"]), hit, summary, tuple(popped), tuple(cached),
                      tuple(block_table_row), tuple(positions), tuple(slot_mapping), bs)  # fmt: skip


def _stages(s: EngineStep) -> list[tuple[str, list[str]]]:
    return [
        (_("Scheduler.schedule (step {step})").format(step=s.step), [
            ngettext("request {request}: {n} new token", "request {request}: {n} new tokens",
                     s.num_new_tokens).format(request=s.request_id, n=s.num_new_tokens),
            _("computed before: {n} tokens (hit {hit})").format(n=s.num_computed_tokens, hit=s.num_hit_tokens),
        ]),
        ("KVCacheManager", [f"{name}({summary})" for name, summary in s.calls] + [
            _("new blocks (popleft_n): {ids}").format(ids=list(s.new_block_ids)),
            _("cached (BLOCK_STORED): {ids}").format(ids=list(s.cached_block_ids)),
        ]),
        (_("worker: BlockTable, slot_mapping"), [
            _("row: {ids}").format(ids=list(s.block_table_row)),
            _("positions {pos} -> slots {slots}").format(pos=list(s.positions), slots=list(s.slot_mapping)),
        ]),
        (_("attention kernel"), [
            _("writes K/V at slots {slots}").format(slots=list(s.slot_mapping)),
            _("reads blocks {ids} through the row").format(ids=list(s.blocks_read)),
        ]),
    ]  # fmt: skip


@with_language
def render_engine_step(step: EngineStep) -> Table:
    """A rich table: one row per stage, what it decided or computed (in ``lang``, keyword-only)."""
    table = Table(title=_("one engine step · request {request}").format(request=step.request_id),
                  show_lines=True)  # fmt: skip
    table.add_column(_("stage"), style="bold")
    table.add_column(_("what happens"))
    for name, lines in _stages(step):
        table.add_row(name, "\n".join(lines))
    return table


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@with_language
def engine_step_dot(step: EngineStep) -> str:
    """Graphviz DOT of the four stages, left to right (in ``lang``, keyword-only)."""
    fills = ("#dbeafe", "#dcfce7", "#fef3c7", "#fae8ff")
    nodes, edges = [], []
    for k, ((name, lines), fill) in enumerate(zip(_stages(step), fills)):
        rows = "".join(f'<TR><TD ALIGN="LEFT">{_html(line)}</TD></TR>' for line in lines)
        label = f'<<TABLE BORDER="0" CELLSPACING="2"><TR><TD><B>{_html(name)}</B></TD></TR>{rows}</TABLE>>'
        nodes.append(f'  s{k} [label={label}, fillcolor="{fill}"];')
        if k:
            edges.append(f"  s{k - 1} -> s{k};")
    return "\n".join([
        "digraph engine_step {",
        '  graph [rankdir=LR, fontname="Helvetica", fontsize=16, labelloc=t, bgcolor="#ffffff", label="'
        + _html(_("one engine step · request {request}").format(request=step.request_id)) + '"];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=12, penwidth=0];',
        '  edge [penwidth=1.5];',
        *nodes, *edges, "}",
    ])  # fmt: skip
