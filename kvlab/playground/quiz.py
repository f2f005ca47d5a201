"""Predict-mode questions for a LiteTrace (no numpy): ``kvlab.viz.predict.quiz_points``' twin.

In the browser the player's predict mode asks before the same six kinds of decision as in
JupyterLab and exported pages (PREDICT_KINDS, ``kvlab.viz.predict_common``): popleft_n, lazy
eviction and lookup hits (here), the sliding window's null blocks, each turn of the hybrid fixed
point and preemption (``kvlab.playground.quiz_decisions``). The questions are computed from the
playground's list-based trace with the same rules, choices, shuffling and catalogue messages
(``kvlab.i18n``) as ``kvlab.viz.predict`` (see that module for the rules; the choices, labels and
the window / fixed_point / preempt questions are built by the same numpy-free code,
``kvlab.viz.predict_common`` and ``kvlab.viz.predict_questions``, which the browser ships).
tests/playground/test_equivalence.py checks that both give the same points, in English and
Chinese. The state at each question (free-queue order, block hashes, each request's blocks)
comes from a small replay of the events that change them (``_State``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import islice
from typing import Any

from kvlab.i18n import _, ngettext
from kvlab.playground.events import LiteTrace
from kvlab.playground.quiz_decisions import FINDERS, MAKERS
from kvlab.trace.events import (
    CALL_SPECS,
    VERBATIM,
    WIDE,
    EventKind,
    unpack_fixed_point,
    unpack_wide,
)
from kvlab.viz.predict_common import (
    PREDICT_KINDS,
    QuizPoint,
    blocks_label,
    group_label,
    options,
    then,
)

__all__ = ["PREDICT_KINDS", "quiz_dicts"]

K = EventKind
_GROUP_BITS = 16


class _Calls:
    """Parents and call spans of a LiteTrace (``Trace.parent`` / ``Trace.call``)."""

    def __init__(self, trace: LiteTrace) -> None:
        n = len(trace)
        self.parent, self.end = [-1] * n, {}
        stack: list[int] = []
        for i, kind in enumerate(trace.kind):
            if kind == K.CALL_END:
                b = stack.pop() if stack else -1
                self.parent[i] = b
                if b >= 0:
                    self.end[b] = i
            else:
                self.parent[i] = stack[-1] if stack else -1
                if kind == K.CALL_BEGIN:
                    stack.append(i)
        self.trace = trace

    def calls(self, name: str) -> list[dict[str, Any]]:
        """Every call named ``name``, in order (``Trace.calls``)."""
        t = self.trace
        return [self.call_of(i) for i, k in enumerate(t.kind)
                if k == K.CALL_BEGIN and 0 <= t.group[i] < len(t.call_names)
                and t.call_names[t.group[i]] == name]  # fmt: skip

    def call_of(self, i: int) -> dict[str, Any] | None:
        """The call whose CALL_BEGIN is ``i``, else the innermost call holding event ``i``."""
        t = self.trace
        begin = i if t.kind[i] == K.CALL_BEGIN else self.parent[i]
        if begin < 0:
            return None
        end = self.end.get(begin, -1)
        cid = t.group[begin]
        name = t.call_names[cid] if 0 <= cid < len(t.call_names) else f"call#{cid}"
        request = t.request[begin]
        return {
            "begin": begin,
            "end": end,
            "name": name,
            "request": None if request < 0 else t.requests[request],
            "args": _decode(name, t, begin, False),
            "result": {} if end < 0 else _decode(name, t, end, True),
        }


def _decode(name: str, t: LiteTrace, i: int, is_end: bool) -> dict[str, Any]:
    """``kvlab.trace.view.decode_call`` for the event at ``i``."""
    a, b, payload = t.a[i], t.b[i], t.payload_of(i)
    spec = CALL_SPECS.get(name)
    if a in (VERBATIM, WIDE) or spec is None:
        values = (
            list(payload)
            if a == VERBATIM
            else list(unpack_wide(payload))
            if a == WIDE
            else [a, b, *payload]
        )
        names = None if spec is None else (spec.result if is_end else spec.args)
        if names and len(names) == len(values):
            return dict(zip(names, values, strict=True))
        return {("result" if is_end else "args"): values} if values else {}
    if is_end:
        return dict(zip(spec.result, spec.unpack_result(a, b, payload), strict=True))
    return dict(zip(spec.args, spec.unpack_args(a, b, payload), strict=True))


class _State:
    """The free queue (head first), each block's key code (-1: no hash) and each request's
    blocks per group (request index -> block ids), replayed (``KVState``'s fields the questions
    read)."""

    def __init__(self, trace: LiteTrace) -> None:
        initial = trace.initial
        self.free_queue = dict.fromkeys(initial.free_queue)
        self.block_hash = list(initial.block_hash)
        self.null_block_id = initial.null_block_id
        self.req_to_blocks = [{r: list(b) for r, b in g.items()} for g in initial.req_to_blocks]

    def apply(self, t: LiteTrace, i: int) -> None:
        kind = t.kind[i]
        if kind == K.POPLEFT or kind == K.REMOVE:
            del self.free_queue[t.a[i]]
        elif kind == K.POPLEFT_N:
            for x in t.payload_of(i):
                del self.free_queue[x]
        elif kind == K.APPEND:
            self.free_queue[t.a[i]] = None
        elif kind == K.APPEND_N:
            for x in t.payload_of(i):
                self.free_queue[x] = None
        elif kind == K.BLOCK_STORED:
            p = t.payload_of(i)
            n = len(p) // 2
            for bid, h in zip(p[:n], p[n:], strict=True):
                self.block_hash[bid] = (h << _GROUP_BITS) | t.group[i]
        elif kind == K.BLOCK_REMOVED:
            self.block_hash[t.a[i]] = -1
        elif kind == K.ALL_BLOCKS_CLEARED:
            self.block_hash = [-1] * len(self.block_hash)
        elif kind == K.REQ_BLOCKS_ADDED:
            self.req_to_blocks[t.group[i]].setdefault(t.request[i], []).extend(t.payload_of(i))
        elif kind == K.REQ_BLOCKS_NULLED:
            blocks = self.req_to_blocks[t.group[i]][t.request[i]]
            for x in t.payload_of(i):
                blocks[x] = self.null_block_id
        elif kind == K.REQ_FREED:
            self.req_to_blocks[t.group[i]].pop(t.request[i], None)


def quiz_dicts(trace: LiteTrace, kinds: Iterable[str] = PREDICT_KINDS) -> list[dict[str, Any]]:
    """The predict mode's points of ``trace`` as the player reads them (``QuizPoint.to_dict``),
    ordered by ``reveal``, in the current language: ``quiz_points(trace, kinds)``'s.

    Args:
        trace: The playground's recorded trace.
        kinds: Kinds from PREDICT_KINDS (evict, fixed_point, hit, popleft, preempt, window).

    Raises:
        ValueError: If a kind is not one of PREDICT_KINDS.
    """
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in PREDICT_KINDS]
    if bad:
        raise ValueError(f"predict must hold kinds from {PREDICT_KINDS}, got {list(kinds)}")
    wanted = {
        K.POPLEFT: "popleft",
        K.POPLEFT_N: "popleft",
        K.BLOCK_REMOVED: "evict",
        K.CALL_END: "hit",
    }
    calls = _Calls(trace)
    gcb = {i for i, n in enumerate(trace.call_names) if n == "get_computed_blocks"}
    found: list[tuple[int, int, str]] = []
    for i, k in enumerate(trace.kind):
        kind = wanted.get(k)
        if kind is None or kind not in kinds:
            continue
        if kind == "hit":
            if trace.group[i] in gcb:
                found.append((calls.parent[i] - 1, i, kind))
        elif kind == "popleft":
            found.append((i - 1, i, kind))
        else:
            pop = _eviction_pop(trace, i)
            if pop is not None:
                found.append((pop, i, kind))
    for kind in (k for k in kinds if k in FINDERS):
        found += [(ask, reveal, kind) for ask, reveal in FINDERS[kind](trace, calls)]
    if "fixed_point" in kinds and "hit" in kinds:  # a hybrid lookup is asked turn by turn
        turned = {calls.end.get(calls.parent[r], -1) for a, r, k in found if k == "fixed_point"}
        found = [f for f in found if not (f[2] == "hit" and f[1] in turned)]
    state, at, points = _State(trace), 0, []
    makers = {"popleft": _popleft, "evict": _evict, "hit": _hit, **MAKERS}
    for ask, reveal, kind in sorted(found):
        for j in range(at, ask + 1):
            state.apply(trace, j)
        at = max(at, ask + 1)
        point = makers[kind](trace, calls, state, ask, reveal)
        if point is not None:
            points.append(point)
    # As quiz_points: a point whose [ask, reveal] window overlaps an earlier one is dropped.
    kept: list[QuizPoint] = []
    for point in sorted(points, key=lambda p: (p.ask, p.reveal)):
        if not kept or point.ask >= kept[-1].reveal:
            kept.append(point)
    return [p.to_dict() for p in sorted(kept, key=lambda p: p.reveal)]


def _popleft(
    t: LiteTrace, calls: _Calls, state: _State, ask: int, reveal: int
) -> QuizPoint | None:
    single = t.kind[reveal] == K.POPLEFT
    taken = [t.a[reveal]] if single else t.payload_of(reveal)
    n, queue = len(taken), state.free_queue
    head = list(islice(queue, n + 1))
    tail = list(islice(reversed(queue), n))
    lowest = heapq.nsmallest(n, queue)
    uncached = list(islice((b for b in queue if state.block_hash[b] < 0), n))
    candidates = [taken, tail, lowest, uncached, head[1:], tail[::-1]]
    picked = options(reveal, [(c, blocks_label(c)) for c in candidates if len(c) == n])
    if picked is None:
        return None
    call = calls.call_of(reveal) if calls.parent[reveal] >= 0 else None
    if call and call["request"]:
        who = _("{call} for request {request}").format(
            call=call["name"], request=repr(call["request"])
        )
    else:
        who = _("the pool")
    how = "popleft()" if single else f"popleft_n({n})"
    many = 2 if n > 1 else 1
    if n > 1:
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


def _eviction_pop(t: LiteTrace, reveal: int) -> int | None:
    """The POPLEFT_N of the get_new_blocks whose first eviction is BLOCK_REMOVED ``reveal``
    (only GET_NEW_BLOCKS counts lie between them); None for a later eviction of that loop or
    one of evict_blocks."""
    j = reveal - 1
    while j >= 0 and t.kind[j] == K.GET_NEW_BLOCKS:
        j -= 1
    if j < 0 or t.kind[j] != K.POPLEFT_N or t.a[reveal] not in t.payload_of(j):
        return None
    return j


def _later_evictions(t: LiteTrace, reveal: int) -> list[int]:
    later = []
    for j in range(reveal + 1, len(t)):
        if t.kind[j] == K.BLOCK_REMOVED:
            later.append(t.a[j])
        elif t.kind[j] != K.GET_NEW_BLOCKS:
            break
    return later


def _evict(
    t: LiteTrace, calls: _Calls, state: _State, ask: int, reveal: int
) -> QuizPoint | None:
    popped = t.payload_of(ask)  # the POPLEFT_N
    truth = t.a[reveal]
    hashed = [b for b in popped if state.block_hash[b] >= 0]
    still_free = list(islice((b for b in state.free_queue if state.block_hash[b] >= 0), 1))
    candidates = [truth, popped[0], *still_free, *hashed[-1:], popped[-1], *popped]
    picked = options(reveal, [(b, _("block {b}").format(b=b)) for b in candidates])
    if picked is None:
        return None
    question = _(
        "get_new_blocks just took {blocks} with popleft_n. Which block loses its block_hash "
        "first (evicted from cached_block_hash_to_block)?"
    ).format(blocks=blocks_label(popped))
    skipped = popped[: popped.index(truth)]
    later = _later_evictions(t, reveal)
    then = _(" ({blocks} next)").format(blocks=blocks_label(later)) if later else ""
    facts = {"b": truth, "hash": t.hashes[t.b[reveal]][:4].hex(), "then": then}
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


def _block_size(t: LiteTrace) -> int:
    groups = t.config.get("groups") or [{}]
    return int(groups[0].get("block_size") or t.config.get("hash_block_size") or 16)


def _hit(
    t: LiteTrace, calls: _Calls, state: _State, ask: int, reveal: int
) -> QuizPoint | None:
    call = calls.call_of(reveal)
    truth = int(call["result"]["num_new_computed_tokens"])
    num_tokens, num_hashes = int(call["args"]["num_tokens"]), int(call["args"]["num_block_hashes"])
    bs = _block_size(t)
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
    ).format(request=repr(call["request"]), tokens=num_tokens, n=num_hashes, size=bs)
    labels = tuple((_("{n} token") if v == 1 else _("{n} tokens")).format(n=v) for v in picked)
    return QuizPoint("hit", ask, reveal, question, labels, tuple(picked), picked.index(truth),
                     _hit_reason(t, call, truth, bs))  # fmt: skip


def _hit_reason(t: LiteTrace, call: dict[str, Any], truth: int, bs: int) -> str:
    num_tokens, num_hashes = int(call["args"]["num_tokens"]), int(call["args"]["num_block_hashes"])
    begin, end = call["begin"], call["end"]
    stop = end if end >= 0 else len(t) - 1
    rows = []
    for i in range(begin, stop + 1):
        if t.kind[i] == K.FIXED_POINT_ITERATED:
            out, _reused, group_ids, _blocks = unpack_fixed_point(t.payload_of(i))
            rows.append((t.a[i], group_ids, t.b[i], out))
    if rows:
        turns = _("; ").join(
            _("iteration {iteration}, {group}: {hit_in} -> {hit_out}").format(
                iteration=it, group=group_label(t.config, gids[0]), hit_in=hit_in, hit_out=hit_out
            )
            for it, gids, hit_in, hit_out in rows
        )
        return _(
            "The hybrid fixed point (HybridKVCacheCoordinator) settles at {truth} tokens ({turns})."
        ).format(truth=truth, turns=turns)
    probes = [t.b[i] >= 0 for i in range(begin, end) if t.kind[i] == K.LOOKED_UP]
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
    manager = (t.config.get("groups") or [{}])[0].get("manager")
    if manager != "FullAttentionManager":
        found = _("{manager}.find_longest_cache_hit finds {truth} tokens ({lookups} lookups).")
        return found.format(manager=manager, truth=truth, lookups=len(probes))
    hits = probes.index(False) if False in probes else len(probes)
    if False in probes:
        rule = _(
            "block {hits}'s block_hash is not in cached_block_hash_to_block, and the "
            "chained hashes stop the scan there: {hits} full blocks hit"
        )
        rule = rule.format(hits=hits)
    elif hits == cap_blocks < num_hashes:
        rule = _(
            "every probed block hits, and the cap binds: at most num_tokens - 1 = {cap} "
            "tokens may hit (one token is left to compute logits), {cap_blocks} full "
            "blocks"
        ).format(cap=num_tokens - 1, cap_blocks=cap_blocks)
    else:
        rule = _(
            "all {hits} full blocks hit; the last {rest} tokens (the partial block) are recomputed"
        ).format(hits=hits, rest=num_tokens - hits * bs)
    out = _(
        "find_longest_cache_hit scans the block hashes left to right: {rule} = {tokens} tokens."
    ).format(rule=rule, tokens=hits * bs)
    if truth != hits * bs:
        eagle = t.config.get("use_eagle")
        cut = _("EAGLE drops the last matched block") if eagle else _("alignment")
        out = then(out, _("Then {cut}: {truth} tokens.").format(cut=cut, truth=truth))
    return out

