"""Predict, then reveal: quiz points the trace player asks before a decision is shown.

For each decision of a chosen kind, ``quiz_points`` derives from the trace (and the state
replayed up to that moment) a question, 2-4 choices (the truth and plausible wrong answers
drawn from the same state), the index of the right one and a one-line explanation in vLLM's
terms, in the current language (``kvlab.i18n``: the player computes them inside
``use_language(lang)``; identifiers stay vLLM's). The player's JavaScript
(``static/predict.js``) stops a forward step at ``ask``, shows the question, and moves to
``reveal`` once answered: no kernel needed, so the mode works in JupyterLab, in an
``export_html`` page and on the static site alike.

==========  =====================================  =========================  ====================
kind        decision (revealed by the event)       ask (cursor shown)         truth
==========  =====================================  =========================  ====================
popleft     blocks taken from the free queue       the event before           the event's
            (POPLEFT / POPLEFT_N)                                             block_ids
evict       first cached block to lose its         get_new_blocks'            the event's
            block_hash in get_new_blocks (its      POPLEFT_N                  block_id
            first BLOCK_REMOVED after POPLEFT_N)
hit         get_computed_blocks' hit length        the event before the       the CALL_END's
            (its CALL_END)                         call's CALL_BEGIN          num_new_computed_
                                                                              tokens
==========  =====================================  =========================  ====================

vLLM's get_new_blocks pops its blocks first (POPLEFT_N), then walks them in popleft order:
each one that still holds a block_hash is evicted (BLOCK_REMOVED) before its ref_cnt is raised
(GET_NEW_BLOCKS, merged for consecutive blocks). So an evict question may span a GET_NEW_BLOCKS
(the blocks before the first cached one); the answer skips it. Evictions made by
``evict_blocks`` (the scheduler invalidating blocks, not the free queue's LRU order) are not
asked: their block ids are the call's arguments.

``window``, ``fixed_point`` and ``preempt`` (the sliding window's null blocks, one turn of the
hybrid fixed point, the request the scheduler preempts) are in ``predict_decisions.py``. When
both ``hit`` and ``fixed_point`` are asked, a hybrid lookup is asked turn by turn (fixed_point),
not as a whole (hit); any other point whose [ask, reveal] window overlaps an earlier one is
dropped, so the player never has two questions open.

Examples:
    >>> points = quiz_points(trace, ("popleft",))          # doctest: +SKIP
    >>> p = points[0]; p.question, p.choices, p.choices[p.answer]   # doctest: +SKIP
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import islice
from typing import Any

from kvlab.i18n import _, ngettext
from kvlab.trace import Call, EventKind, KVState
from kvlab.trace.replay import replay_into
from kvlab.viz.calls import block_size_of, fixed_point_rows
from kvlab.viz.predict_common import (
    PREDICT_KINDS,
    QuizPoint,
    blocks_label,
    group_label,
    options,
    then,
)
from kvlab.viz.predict_decisions import FINDERS, MAKERS

__all__ = ["PREDICT_KINDS", "QuizPoint", "check_predict_kinds", "quiz_points"]

K = EventKind

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
        elif kind == "popleft":
            found.append((i - 1, i, kind))
        else:
            pop = _eviction_pop(trace, i)
            if pop is not None:
                found.append((pop, i, kind))
    for kind in (k for k in kinds if k in FINDERS):
        found += [(ask, reveal, kind) for ask, reveal in FINDERS[kind](trace)]
    if "fixed_point" in kinds and "hit" in kinds:
        turned = {reveal for ask, reveal, kind in found if kind == "fixed_point"}
        turned = {trace.call(r).end for r in turned}
        found = [f for f in found if not (f[2] == "hit" and f[1] in turned)]
    state, at, points = trace.initial_state.copy(), 0, []
    for ask, reveal, kind in sorted(found):  # replay forward once
        replay_into(state, trace.cols, at, ask + 1)
        at = ask + 1
        point = _MAKERS[kind](trace, state, ask, reveal)
        if point is not None:
            points.append(point)
    kept: list[QuizPoint] = []
    for point in sorted(points, key=lambda p: (p.ask, p.reveal)):
        if not kept or point.ask >= kept[-1].reveal:
            kept.append(point)
    return sorted(kept, key=lambda p: p.reveal)


# ---------------------------------------------------------------------- popleft
def _popleft(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    single = trace.cols.kind[reveal] == K.POPLEFT
    taken = [int(trace.cols.a[reveal])] if single else trace.payload(reveal)
    n, queue = len(taken), state.free_queue
    head = list(islice(queue, n + 1))
    tail = list(islice(reversed(queue), n))  # most recently freed first
    lowest = heapq.nsmallest(n, queue)
    uncached = list(islice((b for b in queue if state.block_hash[b] < 0), n))
    candidates = [taken, tail, lowest, uncached, head[1:], tail[::-1]]
    picked = options(reveal, [(c, blocks_label(c)) for c in candidates if len(c) == n])
    if picked is None:
        return None
    call = trace.call(reveal) if trace.parent(reveal) >= 0 else None
    if call and call.request:
        who = _("{call} for request {request}").format(call=call.name, request=repr(call.request))
    else:
        who = _("the pool")
    how = "popleft()" if single else f"popleft_n({n})"
    many = 2 if n > 1 else 1  # ngettext's count: the plural for more than one block
    if n > 1:  # two questions, not two forms: only the plural asks for an order
        question = _(
            "{who} needs {n} new blocks: get_new_blocks calls {how} on the free queue ({free} "
            "free). Which blocks does it take, in order?"
        )
    else:
        question = _(
            "{who} needs {n} new block: get_new_blocks calls {how} on the free queue ({free} "
            "free). Which block does it take?"
        )
    question = question.format(who=who, n=n, how=how, free=len(queue))
    cached = [b for b in taken if state.block_hash[b] >= 0]
    explanation = ngettext(
        "{how} takes the head of the free_block_queue: the least recently freed block (LRU), "
        "{blocks}; the tail holds the most recently freed, taken last.",
        "{how} takes the head of the free_block_queue: the least recently freed blocks (LRU), "
        "{blocks}; the tail holds the most recently freed, taken last.",
        many,
    ).format(how=how, blocks=blocks_label(taken))
    if cached:
        evicted = ngettext(
            "{blocks} still holds a block_hash and is evicted from the prefix cache now.",
            "{blocks} still hold a block_hash and are evicted from the prefix cache now.",
            len(cached),
        ).format(blocks=blocks_label(cached).capitalize())
        explanation = then(explanation, evicted)
    return QuizPoint("popleft", ask, reveal, question, *picked, explanation)


# ---------------------------------------------------------------------- evict
def _eviction_pop(trace: Any, reveal: int) -> int | None:
    """The POPLEFT_N of the get_new_blocks whose first eviction is BLOCK_REMOVED ``reveal``.

    Between them lie only the counts (GET_NEW_BLOCKS) of the popped blocks that held no hash.
    None: ``reveal`` is a later eviction of that loop, or not get_new_blocks' (evict_blocks).
    """
    kinds = trace.cols.kind
    j = reveal - 1
    while j >= 0 and kinds[j] == K.GET_NEW_BLOCKS:
        j -= 1
    if j < 0 or kinds[j] != K.POPLEFT_N or int(trace.cols.a[reveal]) not in trace.payload(j):
        return None
    return j


def _later_evictions(trace: Any, reveal: int) -> list[int]:
    """Blocks the same get_new_blocks loop evicts after ``reveal`` (its BLOCK_REMOVED events,
    between the counts of the blocks popped with them)."""
    later = []
    for j in range(reveal + 1, len(trace)):
        kind = trace.cols.kind[j]
        if kind == K.BLOCK_REMOVED:
            later.append(int(trace.cols.a[j]))
        elif kind != K.GET_NEW_BLOCKS:
            break
    return later


def _evict(trace: Any, state: KVState, ask: int, reveal: int) -> QuizPoint | None:
    popped = trace.payload(ask)  # the POPLEFT_N
    truth = int(trace.cols.a[reveal])
    hashed = [b for b in popped if state.block_hash[b] >= 0]
    still_free = list(islice((b for b in state.free_queue if state.block_hash[b] >= 0), 1))
    # Wrong answers: the first block popped, the oldest cached block left in the queue, the
    # last cached block popped (reverse order), any other popped block.
    candidates = [truth, popped[0], *still_free, *hashed[-1:], popped[-1], *popped]
    picked = options(reveal, [(b, _("block {b}").format(b=b)) for b in candidates])
    if picked is None:
        return None
    question = _(
        "get_new_blocks just took {blocks} with popleft_n. Which block loses its block_hash "
        "first (evicted from cached_block_hash_to_block)?"
    ).format(blocks=blocks_label(popped))
    skipped = popped[: popped.index(truth)]
    later = _later_evictions(trace, reveal)
    after = _(" ({blocks} next)").format(blocks=blocks_label(later)) if later else ""
    facts = {"b": truth, "hash": trace[reveal]["hash"], "then": after}
    if skipped:
        explanation = ngettext(
            "Eviction is lazy: get_new_blocks evicts each popped block that still holds a "
            "block_hash (_maybe_evict_cached_block), in popleft order; {skipped} holds no hash, "
            "so block {b} (hash {hash}) is first{then}. Cached blocks still in the free queue "
            "keep their hash.",
            "Eviction is lazy: get_new_blocks evicts each popped block that still holds a "
            "block_hash (_maybe_evict_cached_block), in popleft order; {skipped} hold no hash, "
            "so block {b} (hash {hash}) is first{then}. Cached blocks still in the free queue "
            "keep their hash.",
            len(skipped),
        ).format(skipped=blocks_label(skipped), **facts)
    else:
        explanation = _(
            "Eviction is lazy: get_new_blocks evicts each popped block that still holds a "
            "block_hash (_maybe_evict_cached_block), in popleft order; block {b} (hash {hash}) "
            "is first{then}. Cached blocks still in the free queue keep their hash."
        ).format(**facts)
    return QuizPoint("evict", ask, reveal, question, *picked, explanation)


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
    question = ngettext(
        "get_computed_blocks for request {request}: {tokens} tokens, {n} full block hashed "
        "({size} tokens per block). How many tokens hit the prefix cache "
        "(num_new_computed_tokens)?",
        "get_computed_blocks for request {request}: {tokens} tokens, {n} full blocks hashed "
        "({size} tokens per block). How many tokens hit the prefix cache "
        "(num_new_computed_tokens)?",
        num_hashes,
    ).format(request=repr(call.request), tokens=num_tokens, n=num_hashes, size=bs)
    # NOTE: the player's own labels (player_strings.py), so both forms are plain messages.
    labels = tuple((_("{n} token") if v == 1 else _("{n} tokens")).format(n=v) for v in picked)
    return QuizPoint("hit", ask, reveal, question, labels, tuple(picked), picked.index(truth),
                     _hit_reason(trace, call, truth, bs))  # fmt: skip


def _hit_reason(trace: Any, call: Call, truth: int, bs: int) -> str:
    num_tokens, num_hashes = int(call.args["num_tokens"]), int(call.args["num_block_hashes"])
    rows = fixed_point_rows(trace, call)
    if rows:
        turns = _("; ").join(
            _("iteration {iteration}, {group}: {hit_in} -> {hit_out}").format(
                iteration=r.iteration, group=group_label(trace.config, r.kv_cache_group_ids[0]),
                hit_in=r.hit_length_in, hit_out=r.hit_length_out)
            for r in rows
        )  # fmt: skip
        return _(
            "The hybrid fixed point (HybridKVCacheCoordinator) settles at {truth} tokens ({turns})."
        ).format(truth=truth, turns=turns)
    looked_up = trace.filter(K.LOOKED_UP, start=call.begin, stop=call.end)
    probes = (trace.cols.b[looked_up] >= 0).tolist()  # block_id -1 = a miss
    cap_blocks = (num_tokens - 1) // bs
    if not probes:
        if min(cap_blocks, num_hashes) == 0:
            return _(
                "No full block can hit: the cap num_tokens - 1 = {cap} tokens holds {cap_blocks} "
                "full blocks of {size}, and {hashes} are hashed."
            ).format(cap=num_tokens - 1, cap_blocks=cap_blocks, size=bs, hashes=num_hashes)
        return _(
            "No block is looked up: prefix caching is off (enable_caching=False) or the "
            "request skips reading the prefix cache (skip_reading_prefix_cache)."
        )
    manager = (trace.config.get("groups") or [{}])[0].get("manager")
    if manager != "FullAttentionManager":
        found = _("{manager}.find_longest_cache_hit finds {truth} tokens ({lookups} lookups).")
        return found.format(manager=manager, truth=truth, lookups=len(probes))
    hits = probes.index(False) if False in probes else len(probes)
    if False in probes:
        rule = _("block {hits}'s block_hash is not in cached_block_hash_to_block, and the "
                 "chained hashes stop the scan there: {hits} full blocks hit")  # fmt: skip
        rule = rule.format(hits=hits)
    elif hits == cap_blocks < num_hashes:
        rule = _("every probed block hits, and the cap binds: at most num_tokens - 1 = {cap} "
                 "tokens may hit (one token is left to compute logits), {cap_blocks} full "
                 "blocks").format(cap=num_tokens - 1, cap_blocks=cap_blocks)  # fmt: skip
    else:
        rule = _("all {hits} full blocks hit; the last {rest} tokens (the partial block) are "
                 "recomputed").format(hits=hits, rest=num_tokens - hits * bs)  # fmt: skip
    out = _(
        "find_longest_cache_hit scans the block hashes left to right: {rule} = {tokens} tokens."
    ).format(rule=rule, tokens=hits * bs)
    if truth != hits * bs:
        eagle = trace.config.get("use_eagle")
        cut = _("EAGLE drops the last matched block") if eagle else _("alignment")
        out = then(out, _("Then {cut}: {truth} tokens.").format(cut=cut, truth=truth))
    return out


_MAKERS = {"popleft": _popleft, "evict": _evict, "hit": _hit, **MAKERS}
