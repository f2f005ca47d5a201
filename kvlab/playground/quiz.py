"""Predict-mode questions for a LiteTrace (no numpy): ``kvlab.viz.predict.quiz_points``' twin.

In the browser the player's predict mode asks before popleft_n, lazy eviction and lookup-hit
decisions (PREDICT_KINDS; kvlab.viz.predict's window, fixed_point and preempt kinds are asked in
JupyterLab and exported pages, not yet here); the questions are computed here, from the playground's list-based trace, with the same
rules, choices, shuffling and catalogue messages (``kvlab.i18n``) as ``kvlab.viz.predict``
(see that module for the rules). tests/playground/test_equivalence.py checks that both give
the same points, in English and Chinese. The free-queue order and block hashes at each
question come from a small replay of the queue and hash events (``_QueueState``).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable
from itertools import islice
from typing import Any

from kvlab.i18n import _, ngettext
from kvlab.playground.events import LiteTrace
from kvlab.trace.events import (
    CALL_SPECS,
    VERBATIM,
    WIDE,
    EventKind,
    unpack_fixed_point,
    unpack_wide,
)

__all__ = ["PREDICT_KINDS", "quiz_dicts"]

K = EventKind
PREDICT_KINDS = ("evict", "hit", "popleft")
_SHOWN = 12
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


class _QueueState:
    """The free queue (head first) and each block's key code (-1: no hash), replayed."""

    def __init__(self, trace: LiteTrace) -> None:
        self.free_queue = dict.fromkeys(trace.initial.free_queue)
        self.block_hash = list(trace.initial.block_hash)

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


def quiz_dicts(trace: LiteTrace, kinds: Iterable[str] = PREDICT_KINDS) -> list[dict[str, Any]]:
    """The predict mode's points of ``trace`` as the player reads them (``QuizPoint.to_dict``),
    ordered by ``reveal``, in the current language.

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
    state, at, points = _QueueState(trace), 0, []
    makers = {"popleft": _popleft, "evict": _evict, "hit": _hit}
    for ask, reveal, kind in sorted(found):
        for j in range(at, ask + 1):
            state.apply(trace, j)
        at = max(at, ask + 1)
        point = makers[kind](trace, calls, state, ask, reveal)
        if point is not None:
            points.append(point)
    # As quiz_points: a point whose [ask, reveal] window overlaps an earlier one is dropped.
    kept: list[dict[str, Any]] = []
    for point in sorted(points, key=lambda p: (p["ask"], p["reveal"])):
        if not kept or point["ask"] >= kept[-1]["reveal"]:
            kept.append(point)
    return sorted(kept, key=lambda p: p["reveal"])


def _point(
    kind: str, ask: int, reveal: int, question: str, options: tuple, explanation: str
) -> dict[str, Any]:
    choices, values, answer = options
    return {
        "kind": kind,
        "ask": ask,
        "reveal": reveal,
        "question": question,
        "choices": list(choices),
        "values": list(values),
        "answer": answer,
        "explanation": explanation,
    }


def _blocks_label(block_ids: list[int]) -> str:
    if len(block_ids) == 1:
        return _("block {b}").format(b=block_ids[0])
    if len(block_ids) <= _SHOWN:
        return _("blocks {ids}").format(ids=", ".join(map(str, block_ids)))
    head, tail = ", ".join(map(str, block_ids[:4])), ", ".join(map(str, block_ids[-2:]))
    return _("blocks {head}, …, {tail} ({n})").format(head=head, tail=tail, n=len(block_ids))


def _then(first: str, second: str) -> str:
    return _("{first} {second}").format(first=first, second=second)


def _popleft(
    t: LiteTrace, calls: _Calls, state: _QueueState, ask: int, reveal: int
) -> dict[str, Any] | None:
    single = t.kind[reveal] == K.POPLEFT
    taken = [t.a[reveal]] if single else t.payload_of(reveal)
    n, queue = len(taken), state.free_queue
    head = list(islice(queue, n + 1))
    tail = list(islice(reversed(queue), n))
    lowest = heapq.nsmallest(n, queue)
    uncached = list(islice((b for b in queue if state.block_hash[b] < 0), n))
    candidates = [taken, tail, lowest, uncached, head[1:], tail[::-1]]
    options = _options(reveal, [(c, _blocks_label(c)) for c in candidates if len(c) == n])
    if options is None:
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
    ).format(how=how, blocks=_blocks_label(taken))
    if cached:
        evicted = ngettext(
            "{blocks} still holds a block_hash and is evicted from the prefix cache now.",
            "{blocks} still hold a block_hash and are evicted from the prefix cache now.",
            len(cached),
        ).format(blocks=_blocks_label(cached).capitalize())
        explanation = _then(explanation, evicted)
    return _point("popleft", ask, reveal, question, options, explanation)


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
    t: LiteTrace, calls: _Calls, state: _QueueState, ask: int, reveal: int
) -> dict[str, Any] | None:
    popped = t.payload_of(ask)  # the POPLEFT_N
    truth = t.a[reveal]
    hashed = [b for b in popped if state.block_hash[b] >= 0]
    still_free = list(islice((b for b in state.free_queue if state.block_hash[b] >= 0), 1))
    candidates = [truth, popped[0], *still_free, *hashed[-1:], popped[-1], *popped]
    options = _options(reveal, [(b, _("block {b}").format(b=b)) for b in candidates])
    if options is None:
        return None
    question = _(
        "get_new_blocks just took {blocks} with popleft_n. Which block loses its block_hash "
        "first (evicted from cached_block_hash_to_block)?"
    ).format(blocks=_blocks_label(popped))
    skipped = popped[: popped.index(truth)]
    later = _later_evictions(t, reveal)
    then = _(" ({blocks} next)").format(blocks=_blocks_label(later)) if later else ""
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
        ).format(skipped=_blocks_label(skipped), **facts)
    else:
        explanation = _(
            "Eviction is lazy: get_new_blocks evicts each popped block that still holds a "
            "block_hash (_maybe_evict_cached_block), in popleft order; block {b} (hash {hash}) "
            "is first{then}. Cached blocks still in the free queue keep their hash."
        ).format(**facts)
    return _point("evict", ask, reveal, question, options, explanation)


def _block_size(t: LiteTrace) -> int:
    groups = t.config.get("groups") or [{}]
    return int(groups[0].get("block_size") or t.config.get("hash_block_size") or 16)


def _group_label(config: dict[str, Any], g: int) -> str:
    """``kvlab.viz.snapshot.group_label``."""
    groups = config.get("groups") or []
    if not 0 <= g < len(groups):
        return _("group {kv_cache_group_id}").format(kv_cache_group_id=g)
    entry = groups[g]
    spec = str(entry.get("spec", "?")).removesuffix("Spec")
    extra = (
        _(" (window {sliding_window})").format(sliding_window=entry["sliding_window"])
        if entry.get("sliding_window")
        else ""
    )
    return _("group {kv_cache_group_id} · {spec}{extra}").format(
        kv_cache_group_id=g, spec=spec, extra=extra
    )


def _hit(
    t: LiteTrace, calls: _Calls, state: _QueueState, ask: int, reveal: int
) -> dict[str, Any] | None:
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
    options = (labels, tuple(picked), picked.index(truth))
    return _point("hit", ask, reveal, question, options, _hit_reason(t, call, truth, bs))


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
                iteration=it, group=_group_label(t.config, gids[0]), hit_in=hit_in, hit_out=hit_out
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
        out = _then(out, _("Then {cut}: {truth} tokens.").format(cut=cut, truth=truth))
    return out


def _options(seed: int, candidates: list[tuple[Any, str]]) -> tuple | None:
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
