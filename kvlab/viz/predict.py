"""Predict, then reveal: quiz points the trace player asks before a decision is shown.

For each decision of a chosen kind, ``quiz_points`` derives from the trace (and the state
replayed up to that moment) a question, 2-4 choices (the truth and plausible wrong answers
drawn from the same state), the index of the right one and a one-line explanation in vLLM's
terms. The player's JavaScript (``static/predict.js``) stops a forward step at ``ask``, shows
the question, and moves to ``reveal`` once answered: no kernel needed, so the mode works in
JupyterLab, in an ``export_html`` page and on the static site alike.

==========  =====================================  =========================  ====================
kind        decision (revealed by the event)       ask (cursor shown)         truth
==========  =====================================  =========================  ====================
popleft     blocks taken from the free queue       the event before           the event's
            (POPLEFT / POPLEFT_N)                                             block_ids
evict       first cached block to lose its         the event before           the event's
            block_hash in get_new_blocks (the      (the POPLEFT_N)            block_id
            BLOCK_REMOVED right after POPLEFT_N)
hit         get_computed_blocks' hit length        the event before the       the CALL_END's
            (its CALL_END)                         call's CALL_BEGIN          num_new_computed_
                                                                              tokens
==========  =====================================  =========================  ====================

Evictions made by ``evict_blocks`` (the scheduler invalidating blocks, not the free queue's LRU
order) are not asked: their block ids are the call's arguments.

Examples:
    >>> points = quiz_points(trace, ("popleft",))          # doctest: +SKIP
    >>> p = points[0]; p.question, p.choices, p.choices[p.answer]   # doctest: +SKIP
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from itertools import islice
from typing import Any

from kvlab.trace import Call, EventKind, KVState
from kvlab.trace.replay import replay_into
from kvlab.viz.calls import block_size_of, fixed_point_rows
from kvlab.viz.snapshot import group_label

__all__ = ["PREDICT_KINDS", "QuizPoint", "check_predict_kinds", "quiz_points"]

K = EventKind

PREDICT_KINDS = ("evict", "hit", "popleft")
"""Decision kinds the player can ask about (see the module docstring)."""

_SHOWN = 12  # block ids listed in full in a choice label; longer lists are shortened


@dataclass(frozen=True)
class QuizPoint:
    """One question of the predict mode.

    Attributes:
        kind: ``popleft`` | ``evict`` | ``hit``.
        ask: Cursor (event index, -1 = before event 0) at which the question is shown: the
            state right before the decision.
        reveal: The event that shows the answer; the cursor moves there once answered.
        question: The question (plain text).
        choices: Labels of the choices (2-4, distinct).
        values: The value behind each label: block-id lists (popleft), a block_id (evict) or a
            hit length in tokens (hit).
        answer: Index of the right choice in ``choices``.
        explanation: Why the answer is right, in vLLM's terms (one line).
    """

    kind: str
    ask: int
    reveal: int
    question: str
    choices: tuple[str, ...]
    values: tuple[Any, ...]
    answer: int
    explanation: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (the player's ``quiz`` state)."""
        data = asdict(self)
        data["choices"], data["values"] = list(self.choices), list(self.values)
        return data


def check_predict_kinds(kinds: Iterable[str] | str | None) -> tuple[str, ...]:
    """Validate the kinds asked for (None or () = none).

    Raises:
        TypeError: If ``kinds`` is a bare string (a list of kinds is needed).
        ValueError: If ``kinds`` holds an unknown or repeated kind.
    """
    if kinds is None:
        return ()
    if isinstance(kinds, str):
        raise TypeError(f"predict must be a list of kinds from {PREDICT_KINDS}, got {kinds!r}")
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in PREDICT_KINDS]
    if bad or len(set(kinds)) != len(kinds):
        raise ValueError(
            f"predict must hold distinct kinds from {PREDICT_KINDS}, got {list(kinds)}"
        )
    return kinds


def quiz_points(trace: Any, kinds: Iterable[str] = PREDICT_KINDS) -> list[QuizPoint]:
    """The quiz points of ``trace`` for the decision ``kinds``, ordered by ``reveal``.

    A decision with only one possible answer (popleft_n taking the whole one-block queue, an
    eviction with one candidate) is not asked.

    Args:
        trace: A kvlab.trace.Trace.
        kinds: Kinds from ``PREDICT_KINDS``.

    Raises:
        TypeError: If ``kinds`` is a bare string.
        ValueError: If a kind is unknown or repeated.
    """
    kinds = check_predict_kinds(kinds)
    wanted = {K.POPLEFT: "popleft", K.POPLEFT_N: "popleft", K.BLOCK_REMOVED: "evict",
              K.CALL_END: "hit"}  # fmt: skip
    kinds_col = trace.cols.kind
    gcb = {i for i, n in enumerate(trace.call_names) if n == "get_computed_blocks"}
    found: list[tuple[int, int, str]] = []  # (ask, reveal, kind)
    for i in trace.filter([k for k, name in wanted.items() if name in kinds]).tolist():
        kind = wanted[K(int(kinds_col[i]))]
        if kind == "hit":
            if int(trace.cols.group[i]) not in gcb:
                continue
            found.append((trace.call(i).begin - 1, i, kind))
        elif kind == "popleft" or _popped_before(trace, i) is not None:
            found.append((i - 1, i, kind))
    state, at, points = trace.initial_state.copy(), 0, []
    for ask, reveal, kind in sorted(found):  # replay forward once
        replay_into(state, trace.cols, at, ask + 1)
        at = ask + 1
        point = _MAKERS[kind](trace, state, ask, reveal)
        if point is not None:
            points.append(point)
    return sorted(points, key=lambda p: p.reveal)


# ---------------------------------------------------------------------- popleft
def _blocks_label(block_ids: list[int]) -> str:
    if len(block_ids) == 1:
        return f"block {block_ids[0]}"
    if len(block_ids) <= _SHOWN:
        return "blocks " + ", ".join(map(str, block_ids))
    head, tail = ", ".join(map(str, block_ids[:4])), ", ".join(map(str, block_ids[-2:]))
    return f"blocks {head}, …, {tail} ({len(block_ids)})"


def _popleft(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    single = trace.cols.kind[reveal] == K.POPLEFT
    taken = [int(trace.cols.a[reveal])] if single else trace.payload(reveal)
    n, queue = len(taken), state.free_queue
    head = list(islice(queue, n + 1))
    tail = list(islice(reversed(queue), n))  # most recently freed first
    lowest = heapq.nsmallest(n, queue)
    uncached = list(islice((b for b in queue if state.block_hash[b] < 0), n))
    candidates = [taken, tail, lowest, uncached, head[1:], tail[::-1]]
    options = _options(reveal, [(c, _blocks_label(c)) for c in candidates if len(c) == n])
    if options is None:
        return None
    call = trace.call(reveal) if trace.parent(reveal) >= 0 else None
    who = f"{call.name} for request {call.request!r}" if call and call.request else "the pool"
    how = "popleft()" if single else f"popleft_n({n})"
    which = "blocks does it take, in order" if n > 1 else "block does it take"
    question = (
        f"{who} needs {n} new block{'s' if n > 1 else ''}: get_new_blocks calls {how} on the "
        f"free queue ({len(queue)} free). Which {which}?"
    )
    cached = [b for b in taken if state.block_hash[b] >= 0]
    explanation = (
        f"{how} takes the head of the free_block_queue: the least recently freed "
        f"block{'s' if n > 1 else ''} (LRU), {_blocks_label(taken)}; the tail holds the most "
        f"recently freed, taken last."
    )
    if cached:
        one = len(cached) == 1
        explanation += (
            f" {_blocks_label(cached).capitalize()} still hold{'s' if one else ''} a block_hash "
            f"and {'is' if one else 'are'} evicted from the prefix cache now."
        )
    return QuizPoint("popleft", ask, reveal, question, *options, explanation)


# ---------------------------------------------------------------------- evict
def _popped_before(trace: Any, reveal: int) -> list[int] | None:
    """The block_ids of the POPLEFT_N right before ``reveal`` (None: another event)."""
    if reveal < 1 or trace.cols.kind[reveal - 1] != K.POPLEFT_N:
        return None
    return trace.payload(reveal - 1)


def _evict(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    popped = _popped_before(trace, reveal) or []
    truth = int(trace.cols.a[reveal])
    hashed = [b for b in popped if state.block_hash[b] >= 0]
    still_free = list(islice((b for b in state.free_queue if state.block_hash[b] >= 0), 1))
    # Wrong answers: the first block popped, the oldest cached block left in the queue, the
    # last cached block popped (reverse order), any other popped block.
    candidates = [truth, popped[0], *still_free, *hashed[-1:], popped[-1], *popped]
    options = _options(reveal, [(b, f"block {b}") for b in candidates])
    if options is None:
        return None
    question = (
        f"get_new_blocks just took {_blocks_label(popped)} with popleft_n. Which block loses "
        f"its block_hash first (evicted from cached_block_hash_to_block)?"
    )
    skipped = popped[: popped.index(truth)]
    why = (
        f"{_blocks_label(skipped)} hold{'s' if len(skipped) == 1 else ''} no hash, so "
        if skipped
        else ""
    )
    later = []
    for j in range(reveal + 1, len(trace)):
        if trace.cols.kind[j] != K.BLOCK_REMOVED:
            break
        later.append(int(trace.cols.a[j]))
    then = f" ({_blocks_label(later)} next)" if later else ""
    explanation = (
        f"Eviction is lazy: get_new_blocks evicts each popped block that still holds a "
        f"block_hash (_maybe_evict_cached_block), in popleft order; {why}block {truth} "
        f"(hash {trace[reveal]['hash']}) is first{then}. Cached blocks still in the free queue "
        f"keep their hash."
    )
    return QuizPoint("evict", ask, reveal, question, *options, explanation)


# ---------------------------------------------------------------------- hit
def _hit(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    call = trace.call(reveal)
    truth = int(call.result["num_new_computed_tokens"])
    num_tokens, num_hashes = int(call.args["num_tokens"]), int(call.args["num_block_hashes"])
    bs = block_size_of(trace)
    # Wrong answers learners give: nothing hits, every hashed block hits, the cap, the whole
    # prompt, one block off.
    others = [0, num_hashes * bs, num_tokens - 1, num_tokens, truth - bs, truth + bs]
    others = [v for v in dict.fromkeys(others) if 0 <= v <= num_tokens and v != truth]
    picked = sorted([truth, *others[:3]])
    if len(picked) < 2:
        return None
    question = (
        f"get_computed_blocks for request {call.request!r}: {num_tokens} tokens, {num_hashes} "
        f"full block{'s' if num_hashes != 1 else ''} hashed ({bs} tokens per block). How many "
        f"tokens hit the prefix cache (num_new_computed_tokens)?"
    )
    labels = tuple(f"{v} token{'s' if v != 1 else ''}" for v in picked)
    return QuizPoint("hit", ask, reveal, question, labels, tuple(picked), picked.index(truth),
                     _hit_reason(trace, call, truth, bs))  # fmt: skip


def _hit_reason(trace: Any, call: Call, truth: int, bs: int) -> str:
    num_tokens, num_hashes = int(call.args["num_tokens"]), int(call.args["num_block_hashes"])
    rows = fixed_point_rows(trace, call)
    if rows:
        turns = "; ".join(
            f"iteration {r.iteration}, {group_label(trace.config, r.kv_cache_group_ids[0])}: "
            f"{r.hit_length_in} -> {r.hit_length_out}"
            for r in rows
        )
        return (
            f"The hybrid fixed point (HybridKVCacheCoordinator) settles at {truth} tokens "
            f"({turns})."
        )
    looked_up = trace.filter(K.LOOKED_UP, start=call.begin, stop=call.end)
    probes = (trace.cols.b[looked_up] >= 0).tolist()  # block_id -1 = a miss
    cap_blocks = (num_tokens - 1) // bs
    if not probes:
        if min(cap_blocks, num_hashes) == 0:
            return (
                f"No full block can hit: the cap num_tokens - 1 = {num_tokens - 1} tokens holds "
                f"{cap_blocks} full blocks of {bs}, and {num_hashes} are hashed."
            )
        return (
            "No block is looked up: prefix caching is off (enable_caching=False) or the "
            "request skips reading the prefix cache (skip_reading_prefix_cache)."
        )
    manager = (trace.config.get("groups") or [{}])[0].get("manager")
    if manager != "FullAttentionManager":
        return f"{manager}.find_longest_cache_hit finds {truth} tokens ({len(probes)} lookups)."
    hits = probes.index(False) if False in probes else len(probes)
    if False in probes:
        rule = (f"block {hits}'s block_hash is not in cached_block_hash_to_block, and the "
                f"chained hashes stop the scan there: {hits} full blocks hit")  # fmt: skip
    elif hits == cap_blocks < num_hashes:
        rule = (f"every probed block hits, and the cap binds: at most num_tokens - 1 = "
                f"{num_tokens - 1} tokens may hit (one token is left to compute logits), "
                f"{cap_blocks} full blocks")  # fmt: skip
    else:
        rule = (f"all {hits} full blocks hit; the last {num_tokens - hits * bs} tokens "
                f"(the partial block) are recomputed")  # fmt: skip
    out = (
        f"find_longest_cache_hit scans the block hashes left to right: {rule} = {hits * bs} tokens."
    )
    if truth != hits * bs:
        cut = "EAGLE drops the last matched block" if trace.config.get("use_eagle") else "alignment"
        out += f" Then {cut}: {truth} tokens."
    return out


# ---------------------------------------------------------------------- choices
def _options(
    seed: int, candidates: list[tuple[Any, str]]
) -> tuple[tuple[str, ...], tuple[Any, ...], int] | None:
    """The truth (first candidate) and up to 3 distinct others, shuffled by ``seed``."""
    truth = candidates[0]
    picked, labels = [truth], {truth[1]}
    for value, label in candidates[1:]:
        if len(picked) == 4:
            break
        if label not in labels and value != truth[0]:
            picked.append((value, label))
            labels.add(label)
    if len(picked) < 2:
        return None
    random.Random(seed).shuffle(picked)
    return tuple(p[1] for p in picked), tuple(p[0] for p in picked), picked.index(truth)


_MAKERS = {"popleft": _popleft, "evict": _evict, "hit": _hit}
