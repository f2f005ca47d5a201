"""The allocate_slots flow as a diagram, with the branches one recorded call took.

``allocate_slots_flow(trace, call)`` reads one ``allocate_slots`` call of a trace and says which
stages of vLLM's ``KVCacheManager.allocate_slots`` it went through and what each did (the blocks
it touched, popped, evicted, cached, or freed from a sliding window); ``allocate_slots_dot``
draws the conceptual flow chart with that path highlighted::

    allocate_slots ─► full_sequence_must_fit? ─yes─► whole request fits? ─no─► None
                              │ no                        │ yes
                              ▼                           ▼
                     remove_skipped_blocks ─► enough free blocks? ─no─► return None
                                                          │ yes
                     [hits: allocate_new_computed_blocks (touch)] ─► allocate_new_blocks
                     (popleft_n, lazy eviction) ─► [cache_blocks] ─► return KVCacheBlocks

Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots (its stages, in order,
as ``kvlab.core.kv_cache_manager.KVCacheManager.allocate_slots`` runs them).

Examples:
    >>> flow = allocate_slots_flow(trace, trace.calls("allocate_slots")[-1])  # doctest: +SKIP
    >>> flow.steps                                                            # doctest: +SKIP
    ('remove_skipped_blocks', 'fits', 'allocate_new_computed_blocks', 'allocate_new_blocks', ...)
    >>> svg = render_svg(allocate_slots_dot(trace, flow.call))                # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvlab.i18n import N_, _, with_language
from kvlab.trace.events import EventKind as K
from kvlab.viz.calls import find_call

__all__ = ["AllocateSlotsFlow", "allocate_slots_dot", "allocate_slots_flow"]

STEPS = (
    "full_sequence_must_fit", "remove_skipped_blocks", "fits", "allocate_new_computed_blocks",
    "allocate_new_blocks", "cache_blocks", "return_blocks", "return_none",
)  # fmt: skip
"""Every node of the flow that a call can pass, in drawing order."""

# Which stage each block-changing event belongs to (the stages run in this order).
_PHASE = {
    K.REQ_BLOCKS_NULLED: "remove_skipped_blocks", K.FREE_BLOCKS: "remove_skipped_blocks",
    K.APPEND: "remove_skipped_blocks", K.APPEND_N: "remove_skipped_blocks",
    K.TOUCH: "allocate_new_computed_blocks", K.REMOVE: "allocate_new_computed_blocks",
    K.POPLEFT: "allocate_new_blocks", K.POPLEFT_N: "allocate_new_blocks",
    K.GET_NEW_BLOCKS: "allocate_new_blocks", K.BLOCK_REMOVED: "allocate_new_blocks",
    K.BLOCK_STORED: "cache_blocks",
}  # fmt: skip


@dataclass(frozen=True)
class AllocateSlotsFlow:
    """The path one ``allocate_slots`` call took through vLLM's stages.

    Attributes:
        call: The kvlab.trace Call.
        steps: The nodes of :data:`STEPS` the call passed, in order (ends with
            ``return_blocks`` or ``return_none``).
        refused_by: None when blocks were allocated, else ``"full_sequence_must_fit"`` (the
            admission gate) or ``"fits"`` (too few free blocks for this step).
        num_blocks_to_allocate: What the deciding check asked for (blocks).
        num_free_blocks: Free blocks when the call began (blocks).
        freed_by_window: Block ids freed by remove_skipped_blocks (in free order).
        touched: Hit blocks whose ref_cnt was raised (all groups, in order).
        removed_from_queue: Touched blocks that had to leave the free queue (ref_cnt was 0).
        popped: New blocks taken from the free queue's head (in order).
        evicted: Popped blocks that lost their block_hash (lazy eviction).
        stored: Blocks cached by cache_full_blocks (BlockStored).
    """

    call: Any
    steps: tuple[str, ...]
    refused_by: str | None
    num_blocks_to_allocate: int
    num_free_blocks: int
    freed_by_window: tuple[int, ...]
    touched: tuple[int, ...]
    removed_from_queue: tuple[int, ...]
    popped: tuple[int, ...]
    evicted: tuple[int, ...]
    stored: tuple[int, ...]


def _block_ids(event: Any) -> list[int]:
    fields = event.fields
    if "block_ids" in fields:
        return list(fields["block_ids"])
    return [fields["block_id"]] if "block_id" in fields else []


def allocate_slots_flow(trace: Any, call: Any) -> AllocateSlotsFlow:
    """Read the stages one recorded ``allocate_slots`` call went through.

    Args:
        trace: A kvlab.trace.Trace.
        call: One of its ``allocate_slots`` calls (a Call, or an event index inside the call).

    Returns:
        The call's path and what each stage did.

    Raises:
        ValueError: If ``call`` is not a finished ``allocate_slots`` call of ``trace``.
        IndexError: If an event index is outside the trace.
    """
    if isinstance(call, int):
        call = find_call(trace, call, "allocate_slots")
    if call is None or getattr(call, "name", None) != "allocate_slots" or call.end < 0:
        raise ValueError(
            f"expected a finished allocate_slots call of this trace, got {call!r} "
            "(allowed: a Call from trace.calls('allocate_slots') or an event index inside one)"
        )
    found: dict[str, list[int]] = {k: [] for k in
                                   ("freed", "touched", "removed", "popped", "evicted", "stored")}
    kinds = {"freed": (K.FREE_BLOCKS,), "touched": (K.TOUCH,), "removed": (K.REMOVE,),
             "popped": (K.POPLEFT, K.POPLEFT_N), "evicted": (K.BLOCK_REMOVED,),
             "stored": (K.BLOCK_STORED,)}  # fmt: skip
    phases = set()
    for i in range(call.begin + 1, call.end):
        event = trace[i]
        phases.add(_PHASE.get(event.kind))
        for key, wanted in kinds.items():
            if event.kind in wanted:
                found[key] += _block_ids(event)
    allocated = bool(call.result.get("allocated", 0))
    gate = bool(call.args.get("full_sequence_must_fit", 0))
    refused_by = None
    if not allocated:
        # The gate refuses before remove_skipped_blocks runs: a refusal with no event is the
        # gate's when it was asked for (the step itself would then need fewer blocks).
        refused_by = "full_sequence_must_fit" if gate and not phases - {None} else "fits"
    steps = ["full_sequence_must_fit"] if gate else []
    if refused_by != "full_sequence_must_fit":
        steps += ["remove_skipped_blocks", "fits"]
    if allocated:
        # vLLM calls allocate_new_computed_blocks only for hits or external KV, and
        # cache_blocks only with prefix caching on and delay_cache_blocks off.
        args = call.args
        if args.get("num_new_computed_tokens", 0) or args.get("num_external_computed_tokens", 0):
            steps.append("allocate_new_computed_blocks")
        steps.append("allocate_new_blocks")
        if trace.config.get("enable_caching", True) and not call.args.get("delay_cache_blocks", 0):
            steps.append("cache_blocks")
    steps.append("return_blocks" if allocated else "return_none")
    return AllocateSlotsFlow(
        call=call, steps=tuple(steps), refused_by=refused_by,
        num_blocks_to_allocate=int(call.result.get("num_blocks_to_allocate", 0)),
        num_free_blocks=len(trace.state_at(call.begin).free_queue_order()),
        freed_by_window=tuple(found["freed"]), touched=tuple(found["touched"]),
        removed_from_queue=tuple(found["removed"]), popped=tuple(found["popped"]),
        evicted=tuple(found["evicted"]), stored=tuple(found["stored"]),
    )  # fmt: skip


_ON = 'fillcolor="#dbeafe", color="#1d4ed8", fontcolor="#0b1f4d", penwidth=2'
_OFF = (
    'fillcolor="#ffffff", color="#a3a3a3", fontcolor="#737373", penwidth=1, '
    'style="rounded,filled,dashed"'
)
_EDGE_ON = 'color="#1d4ed8", penwidth=2.5, fontcolor="#1d4ed8"'
_EDGE_OFF = 'color="#a3a3a3", style=dashed, fontcolor="#737373"'


def _ids(ids: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, ids)) + "]" if ids else _("none")


def _labels(flow: AllocateSlotsFlow) -> dict[str, str]:
    a = flow.call.args
    need = _("needs {n} blocks, {free} free").format(
        n=flow.num_blocks_to_allocate, free=flow.num_free_blocks
    )
    gate_need = need if flow.refused_by == "full_sequence_must_fit" else _("(the admission gate)")
    step_need = need if flow.refused_by != "full_sequence_must_fit" else ""
    call = (
        _("allocate_slots(request {request})").format(request=flow.call.request) + "\\n"
        f"num_computed_tokens={a.get('num_computed_tokens')}  "
        f"num_new_computed_tokens={a.get('num_new_computed_tokens')}\\n"
        f"num_new_tokens={a.get('num_new_tokens')}  "
        f"num_lookahead_tokens={a.get('num_lookahead_tokens')}"
    )
    return {
        "call": call,
        "full_sequence_must_fit": "full_sequence_must_fit?",
        "gate_fits": _("whole request fits?") + f"\\n{gate_need}",
        "remove_skipped_blocks": (
            "remove_skipped_blocks\\n" + _("null + free blocks outside the window") + "\\n"
            + _("freed {ids}").format(ids=_ids(flow.freed_by_window))
        ),
        "fits": _("enough free blocks?") + f"\\nget_num_blocks_to_allocate\\n{step_need}",
        "allocate_new_computed_blocks": (
            "allocate_new_computed_blocks\\n" + _("touch the hits: ref_cnt + 1") + "\\n"
            + _("touched {touched}, out of the queue {removed}").format(
                touched=_ids(flow.touched), removed=_ids(flow.removed_from_queue))
        ),
        "allocate_new_blocks": ("allocate_new_blocks\\nget_new_blocks: popleft_n\\n"
                                + _("popped {popped}, evicted {evicted}").format(
                                    popped=_ids(flow.popped), evicted=_ids(flow.evicted))),
        "cache_blocks": (
            "cache_blocks\\ncache_full_blocks: BlockStored\\n"
            + _("stored {ids}").format(ids=_ids(flow.stored))
        ),
        "return_blocks": "return KVCacheBlocks\\n" + _("(the new blocks)"),
        "return_none": "return None\\n" + _("nothing changed"),
    }  # fmt: skip


_EDGES = (
    ("call", "full_sequence_must_fit", ""), ("full_sequence_must_fit", "gate_fits", N_("yes")),
    ("full_sequence_must_fit", "remove_skipped_blocks", N_("no")),
    ("gate_fits", "remove_skipped_blocks", N_("yes")),
    ("gate_fits", "return_none", N_("no")), ("remove_skipped_blocks", "fits", ""),
    ("fits", "return_none", N_("no")),
    ("fits", "allocate_new_computed_blocks", N_("yes, with hits")),
    ("fits", "allocate_new_blocks", N_("yes, no hit")),
    ("allocate_new_computed_blocks", "allocate_new_blocks", ""),
    ("allocate_new_blocks", "cache_blocks", N_("caching on")),
    ("cache_blocks", "return_blocks", ""),
    ("allocate_new_blocks", "return_blocks", N_("delay_cache_blocks or caching off")),
)  # fmt: skip


def _path_nodes(flow: AllocateSlotsFlow) -> list[str]:
    """The nodes passed: the call, the gate's decision (always evaluated), then the steps."""
    nodes = ["call", "full_sequence_must_fit"]
    nodes += ["gate_fits" if step == "full_sequence_must_fit" else step for step in flow.steps]
    return nodes


@with_language
def allocate_slots_dot(trace: Any, call: Any) -> str:
    """DOT text of the allocate_slots flow chart, the path of ``call`` highlighted.

    Stages the call passed are filled blue and labelled with what they did; the others are
    dashed grey. Deterministic for a given trace and call (tests compare it exactly). Labels
    are in ``lang`` (keyword-only; None = the current language of kvlab.i18n); vLLM's function
    names stay as they are.

    Args:
        trace: A kvlab.trace.Trace.
        call: One of its ``allocate_slots`` calls (a Call, or an event index inside it).

    Returns:
        A ``digraph allocate_slots`` for :func:`kvlab.viz.render_svg`.

    Raises:
        ValueError, IndexError: As :func:`allocate_slots_flow`.
    """
    flow = allocate_slots_flow(trace, call)
    labels, path = _labels(flow), _path_nodes(flow)
    taken = set(path)
    taken_edges = {(a, b) for a, b in zip(path, path[1:])}
    title = _("allocate_slots, call #{seq} (step {step}): the path it took").format(
        seq=flow.call.begin, step=flow.call.step
    )
    lines = [
        "digraph allocate_slots {",
        '  graph [rankdir=TB, nodesep=0.35, ranksep=0.35, fontname="Helvetica", fontsize=16, '
        f'labelloc=t, bgcolor="#ffffff", label="{title}"];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=12];',
        '  edge [fontname="Helvetica", fontsize=11, arrowsize=0.7];',
    ]
    for node, label in labels.items():
        shape = ", shape=diamond" if node in ("full_sequence_must_fit", "gate_fits", "fits") else ""
        style = _ON if node in taken else _OFF
        lines.append(f'  {node} [label="{label}"{shape}, {style}];')
    lines.append("  { rank=same; fits; return_none; }")
    for a, b, label in _EDGES:
        style = _EDGE_ON if (a, b) in taken_edges else _EDGE_OFF
        # NOTE: a DOT line break inside the one two-line edge label (vLLM's flag, then the rest)
        label = _(label).replace("delay_cache_blocks ", "delay_cache_blocks\\n") if label else ""
        text = f'label="{label}", ' if label else ""
        lines.append(f"  {a} -> {b} [{text}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
