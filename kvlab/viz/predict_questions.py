"""The window, fixed_point and preempt questions, built from plain values (no Trace, no numpy).

The popleft, evict and hit questions are in the sibling ``predict_cache_questions``.
Two trace forms ask these questions: ``kvlab.viz.predict_decisions`` reads a
``kvlab.trace.Trace`` (numpy columns, ``KVState`` replay), ``kvlab.playground.quiz_decisions``
the browser's list-based ``LiteTrace``. Each finds the decisions and reads their facts (the call's
arguments, the blocks a request holds, the free-queue length...) its own way; the rules, the
wrong answers, the shuffle and the catalogue messages are here, once, so both ask the same
points in every language (tests/playground/test_equivalence.py). The browser playground ships
this file verbatim.

Examples:
    >>> num_skipped({"sliding_window": 8}, 20)   # tokens 0-12 are out of every later window
    13
"""

from __future__ import annotations

from typing import Any

from kvlab.i18n import _, ngettext
from kvlab.viz.predict_common import QuizPoint, blocks_label, group_label, options, then

__all__ = [
    "fixed_point_question",
    "is_preemption",
    "num_computed",
    "num_skipped",
    "preempt_question",
    "window_group",
    "window_question",
]


# ---------------------------------------------------------------------- window
def window_group(config: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The first sliding-window or chunked-local group of a trace's config: (id, its entry)."""
    for group in config.get("groups") or []:
        if group.get("sliding_window") or group.get("attention_chunk_size"):
            return int(group["kv_cache_group_id"]), group
    return None


def num_computed(args: dict[str, Any]) -> int:
    """The tokens an allocate_slots call counts as computed (its ``args``, tokens)."""
    return (args["num_computed_tokens"] + args["num_new_computed_tokens"]
            + args["num_external_computed_tokens"])  # fmt: skip


def num_skipped(group: dict[str, Any], num_computed_tokens: int) -> int:
    """Tokens out of reach (tokens).

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SlidingWindowManager /
    ChunkedLocalAttentionManager.get_num_skipped_tokens.
    """
    if group.get("sliding_window"):
        return max(0, num_computed_tokens - group["sliding_window"] + 1)
    chunk = group["attention_chunk_size"]
    return num_computed_tokens // chunk * chunk


def _index_label(indexes: list[int]) -> str:
    if not indexes:
        return _("none")
    if len(indexes) == 1:
        return _("logical block {i}").format(i=indexes[0])
    return _("logical blocks {ids}").format(ids=", ".join(map(str, indexes)))


def window_question(
    ask: int,
    reveal: int,
    request: str,
    total: int,
    group: dict[str, Any],
    held: list[int],
    null_block_id: int | None,
    truth: list[int],
) -> QuizPoint | None:
    """The window question of one allocate_slots call.

    Args:
        ask, reveal: The point's events (see ``QuizPoint``).
        request: The call's request id.
        total: num_computed_tokens + num_new_computed_tokens + num_external_computed_tokens.
        group: The window group's config entry (``window_group``).
        held: The block ids the request holds in that group at ``ask``.
        null_block_id: The pool's null block.
        truth: The logical block indexes the call nulls, ascending (empty: none).

    Returns:
        The point, or None when no wrong answer differs from the truth.
    """
    bs, skipped = group["block_size"], num_skipped(group, total)
    real = [i for i, b in enumerate(held) if b != null_block_id]
    # Wrong answers: nothing, one block more or less, every real block before the last.
    more = truth + [truth[-1] + 1] if truth else real[:1]
    candidates = [truth, [], more, truth[:-1], real[:-1], real[:1]]
    picked = options(reveal, [(c, _index_label(c)) for c in candidates])
    if picked is None:
        return None
    if group.get("sliding_window"):
        name = _("sliding window {w}").format(w=group["sliding_window"])
        rule = _(
            "{skipped} = {n} - {w} + 1 = {s} tokens are out of every later token's window"
        ).format(skipped=f"get_num_skipped_tokens({total})", w=group["sliding_window"], n=total,
                 s=skipped)  # fmt: skip
    else:
        name = _("chunked local attention, chunks of {c}").format(c=group["attention_chunk_size"])
        rule = _("{skipped} = {s}, the tokens of the earlier chunks").format(
            skipped=f"get_num_skipped_tokens({total})", s=skipped)  # fmt: skip
    question = _(
        "allocate_slots for request {request}: {n} tokens computed, {bs} tokens per block, {name}. "
        "remove_skipped_blocks runs first: which logical blocks become null blocks in this call?"
    ).format(request=repr(request), n=total, bs=bs, name=name)
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
        out = _(
            "{only}, and each is a null block already: nothing new leaves the window."
        ).format(only=only)
    else:
        out = _("no block holds only skipped tokens yet: nothing leaves the window.")
    why = _("Window rule ({name}): {rule}; {out}").format(name=name, rule=rule, out=out)
    return QuizPoint("window", ask, reveal, question, *picked, why)


# ---------------------------------------------------------------------- fixed_point
def fixed_point_question(
    ask: int,
    reveal: int,
    request: str,
    config: dict[str, Any],
    iteration: int,
    kv_cache_group_ids: list[int] | tuple[int, ...],
    hit_length_in: int,
    hit_length_out: int,
    reused: bool,
) -> QuizPoint | None:
    """The question of one attention type's turn in a hybrid fixed-point iteration.

    Args:
        ask, reveal: The point's events (reveal: the FIXED_POINT_ITERATED event).
        request: The get_computed_blocks call's request id.
        config: The trace's config (its ``groups``).
        iteration, kv_cache_group_ids, hit_length_in, hit_length_out, reused: The turn's fields
            (``kvlab.viz.calls.FixedPointRow``; lengths in tokens).

    Returns:
        The point, or None when no wrong answer differs from the truth.
    """
    label = group_label(config, kv_cache_group_ids[0])
    if len(kv_cache_group_ids) > 1:
        label = _("{label} (groups {ids}, searched together)").format(
            label=label, ids=", ".join(map(str, kv_cache_group_ids)))  # fmt: skip
    sizes = [g["block_size"] for g in config.get("groups") or []]
    step = max(sizes) if sizes else 1
    own = next((g["block_size"] for g in config["groups"]
                if g["kv_cache_group_id"] == kv_cache_group_ids[0]), step)  # fmt: skip
    truth, hit_in = hit_length_out, hit_length_in
    others = [hit_in, truth - own, truth + own, 0, hit_in - own]
    picked = options(reveal, [(v, _("{n} tokens").format(n=v))
                              for v in [truth, *others] if 0 <= v <= hit_in])  # fmt: skip
    if picked is None:
        return None
    question = _(
        "get_computed_blocks for request {request}, fixed-point iteration {it}: {label} gets a "
        "candidate hit of {hit_in} tokens. How many tokens does it accept?"
    ).format(request=repr(request), it=iteration, label=label, hit_in=hit_in)
    if reused:
        why = _("Full attention is downward closed: its earlier hit is cut to {out} tokens "
                "(reused, no new lookup).").format(out=truth)  # fmt: skip
    elif truth < hit_in:
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
def is_preemption(name: str, args: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether a ``free`` right after the call ``name(args) -> result`` is a preemption.

    A running request's allocate_slots has computed tokens and no admission gate; a refused
    admission (the waiting loop) stops scheduling instead, so a ``free`` after it is a finished
    request's.
    """
    return (name == "allocate_slots" and not result.get("allocated", 1)
            and args["num_computed_tokens"] > 0 and not args["full_sequence_must_fit"])  # fmt: skip


def preempt_question(
    ask: int,
    reveal: int,
    refused: str,
    victim: str,
    held: dict[str, list[int]],
    need: int,
    free: int,
) -> QuizPoint | None:
    """The question of one preemption.

    Args:
        ask, reveal: The refused allocate_slots' CALL_END and the ``free``'s CALL_END.
        refused: The refused call's request id.
        victim: The freed (preempted) request id.
        held: Request id -> its block ids in group 0 at ``ask``, in req_to_blocks' order.
        need: The refused call's num_blocks_to_allocate (blocks).
        free: Blocks in the free queue at ``ask``.

    Returns:
        The point, or None when the victim holds no blocks or no wrong answer differs.
    """
    # NOTE: req_to_blocks keeps insertion order: the order requests got their first block, which
    # is the running order (a resumed request is re-inserted at the end).
    running = list(held)
    if victim not in running:
        return None
    most = max(running, key=lambda r: len(held[r]))
    picked = options(reveal, [(r, r) for r in [victim, refused, running[0], most, *running]])
    if picked is None:
        return None
    question = ngettext(
        "allocate_slots for running request {request} was refused: it needs {need} new block and "
        "{free} are free. The scheduler preempts a running request and tries again. Which one?",
        "allocate_slots for running request {request} was refused: it needs {need} new blocks and "
        "{free} are free. The scheduler preempts a running request and tries again. Which one?",
        need,
    ).format(request=repr(refused), need=need, free=free)
    why = _(
        "First come, first served: the scheduler pops running[-1], the most recently admitted "
        "request ({victim}), frees its blocks (tail first) and puts it back at the front of the "
        "waiting queue with num_computed_tokens = 0."
    ).format(victim=victim)
    if victim == refused:
        why = then(why, _("It is the refused request itself: it is not scheduled in this step."))
    return QuizPoint("preempt", ask, reveal, question, *picked, why)
