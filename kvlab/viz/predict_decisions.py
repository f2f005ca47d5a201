"""Predict-mode kinds for the decisions of notebooks 6-8: the window, the fixed point, preemption.

Each finder returns ``(ask, reveal)`` pairs for one kind; each maker turns the state replayed to
``ask`` into a :class:`~kvlab.viz.predict_common.QuizPoint` (or None when nothing could be
wrong). The truth always comes from the trace.

===========  =====================================  ========================  ======================
kind         decision (revealed by the event)       ask (cursor shown)        truth
===========  =====================================  ========================  ======================
window       which logical blocks of a sliding-     before the                the REQ_BLOCKS_NULLED
             window / chunked-local group become    allocate_slots call       indices (none: the
             null blocks (remove_skipped_blocks)                              call's CALL_END)
fixed_point  the hit length one attention type      the previous turn (or     the FIXED_POINT_
             accepts in a fixed-point iteration     the call's CALL_BEGIN)    ITERATED's hit_length_
                                                                              out
preempt      the request the scheduler preempts     the refused allocate_     the request of the
             after a refused allocate_slots         slots' CALL_END           ``free`` right after
===========  =====================================  ========================  ======================

A window question is asked for every allocate_slots of a request that already has tokens out of
the window (``get_num_skipped_tokens > 0``), so "none" is a possible answer.
"""

from __future__ import annotations

from typing import Any

from kvlab.i18n import _, ngettext
from kvlab.trace import EventKind, KVState
from kvlab.viz.calls import fixed_point_rows
from kvlab.viz.predict_common import QuizPoint, blocks_label, options, then
from kvlab.viz.snapshot import group_label

__all__ = ["FINDERS", "MAKERS"]

K = EventKind


def _call_args(trace: Any, begin: int) -> dict:
    return trace[begin].fields


# ---------------------------------------------------------------------- window
def _window_group(trace: Any) -> tuple[int, dict] | None:
    """The first sliding-window or chunked-local group: (id, its config entry)."""
    for group in trace.config.get("groups") or []:
        if group.get("sliding_window") or group.get("attention_chunk_size"):
            return int(group["kv_cache_group_id"]), group
    return None


def _num_skipped(group: dict, num_computed_tokens: int) -> int:
    """Tokens out of reach. Mirrors the managers' get_num_skipped_tokens (SWA / chunked local)."""
    if group.get("sliding_window"):
        return max(0, num_computed_tokens - group["sliding_window"] + 1)
    chunk = group["attention_chunk_size"]
    return num_computed_tokens // chunk * chunk


def _find_window(trace: Any) -> list[tuple[int, int]]:
    found = _window_group(trace)
    if found is None:
        return []
    gid, group = found
    pairs = []
    for call in trace.calls("allocate_slots"):
        args = call.args
        total = args["num_computed_tokens"] + args["num_new_computed_tokens"] + args["num_external_computed_tokens"]
        if _num_skipped(group, total) == 0 or call.end < 0:
            continue
        nulled = [int(i) for i in trace.filter(K.REQ_BLOCKS_NULLED, start=call.begin, stop=call.end).tolist()
                  if int(trace.cols.group[i]) == gid]  # fmt: skip
        pairs.append((call.begin - 1, nulled[0] if nulled else call.end))
    return pairs


def _index_label(indexes: list[int]) -> str:
    if not indexes:
        return _("none")
    if len(indexes) == 1:
        return _("logical block {i}").format(i=indexes[0])
    return _("logical blocks {ids}").format(ids=", ".join(map(str, indexes)))


def _window(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    gid, group = _window_group(trace)
    call = trace.call(reveal)
    args = call.args
    total = args["num_computed_tokens"] + args["num_new_computed_tokens"] + args["num_external_computed_tokens"]
    request = trace.cols.request[call.begin]
    held = state.req_to_blocks[gid].get(int(request), [])
    null = state.null_block_id
    # NOTE: remove_skipped_blocks walks back from the last skipped block: indices come reversed.
    truth = sorted(trace[reveal].fields["indices"]) if trace.cols.kind[reveal] == K.REQ_BLOCKS_NULLED else []
    bs, skipped = group["block_size"], _num_skipped(group, total)
    real = [i for i, b in enumerate(held) if b != null]
    # Wrong answers: nothing, one block more or less, every real block before the last.
    candidates = [truth, [], truth + [truth[-1] + 1] if truth else real[:1], truth[:-1], real[:-1], real[:1]]
    picked = options(reveal, [(c, _index_label(c)) for c in candidates])
    if picked is None:
        return None
    if group.get("sliding_window"):
        name = _("sliding window {w}").format(w=group["sliding_window"])
        rule = _("{skipped} = {n} - {w} + 1 = {s} tokens are out of every later token's window").format(
            skipped=f"get_num_skipped_tokens({total})", w=group["sliding_window"], n=total, s=skipped)  # fmt: skip
    else:
        name = _("chunked local attention, chunks of {c}").format(c=group["attention_chunk_size"])
        rule = _("{skipped} = {s}, the tokens of the earlier chunks").format(
            skipped=f"get_num_skipped_tokens({total})", s=skipped)  # fmt: skip
    question = _(
        "allocate_slots for request {request}: {n} tokens computed, {bs} tokens per block, {name}. "
        "remove_skipped_blocks runs first: which logical blocks become null blocks in this call?"
    ).format(request=repr(call.request), n=total, bs=bs, name=name)
    whole = skipped // bs
    span = (_("logical block 0") if whole == 1
            else _("logical blocks 0-{last}").format(last=whole - 1))  # fmt: skip
    only = ngettext("{span} holds only skipped tokens", "{span} hold only skipped tokens",
                    whole).format(span=span)  # fmt: skip
    if truth:
        freed = [held[i] for i in truth if i < len(held)]
        out = ngettext(
            "{only}; {ids} still held a real block: it is freed ({blocks} back to the free queue) "
            "and replaced by null_block.",
            "{only}; {ids} still held real blocks: they are freed ({blocks} back to the free "
            "queue) and replaced by null_block.",
            len(truth),
        ).format(only=only, ids=_index_label(truth), blocks=blocks_label(freed))
    elif whole:
        out = _("{only}, and each is a null block already: nothing new leaves the window.").format(only=only)
    else:
        out = _("no block holds only skipped tokens yet: nothing leaves the window.")
    return QuizPoint("window", ask, reveal, question, *picked,
                     _("Window rule ({name}): {rule}; {out}").format(name=name, rule=rule, out=out))  # fmt: skip


# ---------------------------------------------------------------------- fixed_point
def _find_fixed_point(trace: Any) -> list[tuple[int, int]]:
    pairs = []
    for call in trace.calls("get_computed_blocks"):
        previous = call.begin
        for row in fixed_point_rows(trace, call):
            pairs.append((previous, row.seq))
            previous = row.seq
    return pairs


def _fixed_point(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    call = trace.call(reveal)
    row = next(r for r in fixed_point_rows(trace, call) if r.seq == reveal)
    label = group_label(trace.config, row.kv_cache_group_ids[0])
    if len(row.kv_cache_group_ids) > 1:
        label = _("{label} (groups {ids}, searched together)").format(
            label=label, ids=", ".join(map(str, row.kv_cache_group_ids)))  # fmt: skip
    sizes = [g["block_size"] for g in trace.config.get("groups") or []]
    step = max(sizes) if sizes else 1
    own = next((g["block_size"] for g in trace.config["groups"]
                if g["kv_cache_group_id"] == row.kv_cache_group_ids[0]), step)  # fmt: skip
    truth, hit_in = row.hit_length_out, row.hit_length_in
    others = [hit_in, truth - own, truth + own, 0, hit_in - own]
    picked = options(reveal, [(v, _("{n} tokens").format(n=v))
                              for v in [truth, *others] if 0 <= v <= hit_in])  # fmt: skip
    if picked is None:
        return None
    question = _(
        "get_computed_blocks for request {request}, fixed-point iteration {it}: {label} gets a "
        "candidate hit of {hit_in} tokens. How many tokens does it accept?"
    ).format(request=repr(call.request), it=row.iteration, label=label, hit_in=hit_in)
    if row.reused:
        why = _("Full attention is downward closed: its earlier hit is cut to {out} tokens "
                "(reused, no new lookup).").format(out=truth)  # fmt: skip
    elif row.shortened:
        why = _("{label} can vouch for {out} tokens only: find_longest_cache_hit, capped at "
                "{hit_in}, finds no longer run of the cached blocks it needs.").format(
            label=label, out=truth, hit_in=hit_in)  # fmt: skip
    else:
        why = _("{label} has every block it needs for {out} tokens: it accepts the "
                "candidate.").format(label=label, out=truth)  # fmt: skip
    tail = _("Any shortening starts another iteration; the hit is final when a whole iteration "
             "changes nothing.")
    return QuizPoint("fixed_point", ask, reveal, question, *picked, then(why, tail))


# ---------------------------------------------------------------------- preempt
def _find_preempt(trace: Any) -> list[tuple[int, int]]:
    """A ``free`` right after a running request's refused allocate_slots: a preemption.

    A running request's call has computed tokens and no admission gate; a refused admission
    (waiting loop) stops scheduling instead, so a ``free`` after it is a finished request's.
    """
    pairs = []
    for call in trace.calls("free"):
        before = call.begin - 1
        if before < 0 or trace.cols.kind[before] != K.CALL_END or call.end < 0:
            continue
        refused = trace.call(before)
        if (refused.name == "allocate_slots" and not refused.result.get("allocated", 1)
                and refused.args["num_computed_tokens"] > 0
                and not refused.args["full_sequence_must_fit"]):  # fmt: skip
            pairs.append((before, call.end))
    return pairs


def _preempt(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    refused, victim = trace.call(ask), trace.call(reveal).request
    codes = list(state.req_to_blocks[0]) if state.req_to_blocks else []
    # NOTE: req_to_blocks keeps insertion order: the order requests got their first block, which
    # is the running order (a resumed request is re-inserted at the end).
    held = {trace.tables.request_id(c): state.req_to_blocks[0][c] for c in codes}
    running = [r for r in held if r is not None]
    if victim not in running:
        return None
    most = max(running, key=lambda r: len(held[r]))
    picked = options(reveal, [(r, r) for r in [victim, refused.request, running[0], most, *running]])
    if picked is None:
        return None
    need = int(refused.result.get("num_blocks_to_allocate", 0))
    question = ngettext(
        "allocate_slots for running request {request} was refused: it needs {need} new block and "
        "{free} are free. The scheduler preempts a running request and tries again. Which one?",
        "allocate_slots for running request {request} was refused: it needs {need} new blocks and "
        "{free} are free. The scheduler preempts a running request and tries again. Which one?",
        need,
    ).format(request=repr(refused.request), need=need, free=len(state.free_queue))
    why = _("First come, first served: the scheduler pops running[-1], the most recently admitted "
            "request ({victim}), frees its blocks (tail first) and puts it back at the front of the "
            "waiting queue with num_computed_tokens = 0.").format(victim=victim)  # fmt: skip
    if victim == refused.request:
        why = then(why, _("It is the refused request itself: it is not scheduled in this step."))
    return QuizPoint("preempt", ask, reveal, question, *picked, why)


FINDERS = {"window": _find_window, "fixed_point": _find_fixed_point, "preempt": _find_preempt}
"""kind -> finder(trace) -> [(ask, reveal)]."""
MAKERS = {"window": _window, "fixed_point": _fixed_point, "preempt": _preempt}
"""kind -> maker(trace, state at ask, ask, reveal) -> QuizPoint | None."""
