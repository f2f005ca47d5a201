"""The popleft, evict and hit questions, built from a trace's columns and plain values (no numpy).

``predict_questions``' sibling for the kinds of notebooks 3-4 (the free queue's LRU order, lazy
eviction, prefix-cache hits; the table of the kinds is in ``kvlab.viz.predict``). Two trace forms
ask them: ``kvlab.viz.predict`` reads a ``kvlab.trace.Trace`` (numpy columns, ``KVState``
replay), ``kvlab.playground.quiz`` the browser's list-based ``LiteTrace``. Each hands over its
columns (``Events``: numpy arrays or lists, indexed alike) and reads the facts that need its
own structures (the state replayed to ``ask``, the call of an event, a hash's hex); which events
are decisions, the rules, the wrong answers, the shuffle and the catalogue messages are here,
once, so both ask the same points in every language (tests/playground/test_equivalence.py). The
browser playground ships this file verbatim.

Examples:
    >>> events = Events([K.STEP, K.POPLEFT_N], [0, 0], [0, 0], [0, 0], lambda i: [3, 4])
    >>> find_cache_decisions(events, range(2), ("popleft",), [], lambda i: -1)
    [(0, 1, 'popleft')]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import islice
from typing import Any, NamedTuple

from kvlab.i18n import _, ngettext
from kvlab.trace.events import EventKind
from kvlab.trace.metadata import block_size_of_config
from kvlab.viz.predict_common import QuizPoint, blocks_label, group_label, options, then

__all__ = [
    "EVENT_KINDS",
    "Events",
    "evict_question",
    "find_cache_decisions",
    "hit_question",
    "popleft_question",
]

K = EventKind

EVENT_KINDS = {K.POPLEFT: "popleft", K.POPLEFT_N: "popleft", K.BLOCK_REMOVED: "evict",
               K.CALL_END: "hit"}  # fmt: skip
"""The event that reveals each kind's decision."""


class Events(NamedTuple):
    """A trace's columns, indexed by event (numpy arrays or lists: read with ``int()``)."""

    kind: Sequence[int]
    group: Sequence[int]
    a: Sequence[int]
    b: Sequence[int]
    payload: Callable[[int], list[int]]
    """Event index -> its payload ints."""


def find_cache_decisions(
    events: Events,
    candidates: Iterable[int],
    kinds: tuple[str, ...],
    call_names: Sequence[str],
    call_begin: Callable[[int], int],
) -> list[tuple[int, int, str]]:
    """``(ask, reveal, kind)`` of the popleft, evict and hit decisions asked.

    Args:
        events: The trace's columns.
        candidates: Event indexes to look at, ascending: at least those of the ``EVENT_KINDS``
            kinds (others are skipped).
        kinds: The kinds asked (others are left out).
        call_names: The trace's call names (a call event's ``group`` indexes them).
        call_begin: A CALL_END's index -> its CALL_BEGIN's.
    """
    get_computed_blocks = {i for i, n in enumerate(call_names) if n == "get_computed_blocks"}
    found = []
    for i in candidates:
        kind = EVENT_KINDS.get(int(events.kind[i]))
        if kind is None or kind not in kinds:
            continue
        if kind == "hit":
            if int(events.group[i]) in get_computed_blocks:
                found.append((call_begin(i) - 1, i, kind))
        elif kind == "popleft":
            found.append((i - 1, i, kind))
        else:
            pop = _eviction_pop(events, i)
            if pop is not None:
                found.append((pop, i, kind))
    return found


# ---------------------------------------------------------------------- popleft
def popleft_question(
    events: Events,
    ask: int,
    reveal: int,
    free_queue: Collection[int],
    block_hash: Sequence[int],
    call: tuple[str, str | None] | None,
) -> QuizPoint | None:
    """The question of one POPLEFT / POPLEFT_N (``reveal``).

    Args:
        events: The trace's columns.
        ask, reveal: The point's events (see ``QuizPoint``).
        free_queue: The free queue at ``ask``, head first (ordered, reversible).
        block_hash: Each block's key code at ``ask`` (-1: no block_hash).
        call: The name and request id of the call that pops (None: outside every call).

    Returns:
        The point, or None when no wrong answer differs from the truth.
    """
    single = events.kind[reveal] == K.POPLEFT
    taken = [int(events.a[reveal])] if single else events.payload(reveal)
    n, queue = len(taken), free_queue
    head = list(islice(queue, n + 1))
    tail = list(islice(reversed(queue), n))  # most recently freed first
    lowest = heapq.nsmallest(n, queue)
    uncached = list(islice((b for b in queue if block_hash[b] < 0), n))
    candidates = [taken, tail, lowest, uncached, head[1:], tail[::-1]]
    picked = options(reveal, [(c, blocks_label(c)) for c in candidates if len(c) == n])
    if picked is None:
        return None
    if call and call[1]:
        who = _("{call} for request {request}").format(call=call[0], request=repr(call[1]))
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
    cached = [b for b in taken if block_hash[b] >= 0]
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
def _eviction_pop(events: Events, reveal: int) -> int | None:
    """The POPLEFT_N of the get_new_blocks whose first eviction is BLOCK_REMOVED ``reveal``.

    Between them lie only the counts (GET_NEW_BLOCKS) of the popped blocks that held no hash.
    None: ``reveal`` is a later eviction of that loop, or not get_new_blocks' (evict_blocks).
    """
    kinds = events.kind
    j = reveal - 1
    while j >= 0 and kinds[j] == K.GET_NEW_BLOCKS:
        j -= 1
    if j < 0 or kinds[j] != K.POPLEFT_N or int(events.a[reveal]) not in events.payload(j):
        return None
    return j


def _later_evictions(events: Events, reveal: int) -> list[int]:
    """Blocks the same get_new_blocks loop evicts after ``reveal`` (its BLOCK_REMOVED events,
    between the counts of the blocks popped with them)."""
    later = []
    for j in range(reveal + 1, len(events.kind)):
        kind = events.kind[j]
        if kind == K.BLOCK_REMOVED:
            later.append(int(events.a[j]))
        elif kind != K.GET_NEW_BLOCKS:
            break
    return later


def evict_question(
    events: Events,
    ask: int,
    reveal: int,
    free_queue: Collection[int],
    block_hash: Sequence[int],
    hash_hex: str,
) -> QuizPoint | None:
    """The question of get_new_blocks' first eviction (BLOCK_REMOVED ``reveal``).

    Args:
        events: The trace's columns.
        ask, reveal: The POPLEFT_N and the BLOCK_REMOVED (``find_cache_decisions``).
        free_queue: The free queue at ``ask``, head first.
        block_hash: Each block's key code at ``ask`` (-1: no block_hash).
        hash_hex: The evicted block_hash's first 4 bytes as hex.

    Returns:
        The point, or None when no wrong answer differs from the truth.
    """
    popped = events.payload(ask)  # the POPLEFT_N
    truth = int(events.a[reveal])
    hashed = [b for b in popped if block_hash[b] >= 0]
    still_free = list(islice((b for b in free_queue if block_hash[b] >= 0), 1))
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
    later = _later_evictions(events, reveal)
    after = _(" ({blocks} next)").format(blocks=blocks_label(later)) if later else ""
    facts = {"b": truth, "hash": hash_hex, "then": after}
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
def hit_question(
    events: Events,
    ask: int,
    reveal: int,
    request: str | None,
    args: dict[str, Any],
    result: dict[str, Any],
    config: dict[str, Any],
    turns: list[tuple[int, Sequence[int], int, int]],
) -> QuizPoint | None:
    """The question of one get_computed_blocks call (its CALL_END ``reveal``).

    Args:
        events: The trace's columns.
        ask, reveal: The event before the call's CALL_BEGIN and its CALL_END.
        request: The call's request id.
        args, result: The call's decoded arguments and result (num_tokens, num_block_hashes;
            num_new_computed_tokens).
        config: The trace's config.
        turns: The call's fixed-point turns (hybrid models): ``(iteration, kv_cache_group_ids,
            hit_length_in, hit_length_out)``, lengths in tokens; empty for one attention type.

    Returns:
        The point, or None when no wrong answer differs from the truth.
    """
    truth = int(result["num_new_computed_tokens"])
    num_tokens, num_hashes = int(args["num_tokens"]), int(args["num_block_hashes"])
    bs = block_size_of_config(config)
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
    ).format(request=repr(request), tokens=num_tokens, n=num_hashes, size=bs)
    # NOTE: the player's own labels (player_strings.py), so both forms are plain messages.
    labels = tuple((_("{n} token") if v == 1 else _("{n} tokens")).format(n=v) for v in picked)
    # Whether each lookup of the call found a block (LOOKED_UP's block_id -1: a miss).
    probes = [int(events.b[i]) >= 0 for i in range(ask + 1, reveal)
              if events.kind[i] == K.LOOKED_UP]  # fmt: skip
    why = _hit_reason(num_tokens, num_hashes, truth, bs, config, turns, probes)
    return QuizPoint("hit", ask, reveal, question, labels, tuple(picked), picked.index(truth), why)


def _hit_reason(
    num_tokens: int,
    num_hashes: int,
    truth: int,
    bs: int,
    config: dict[str, Any],
    turns: list[tuple[int, Sequence[int], int, int]],
    probes: list[bool],
) -> str:
    if turns:
        steps = _("; ").join(
            _("iteration {iteration}, {group}: {hit_in} -> {hit_out}").format(
                iteration=it, group=group_label(config, gids[0]), hit_in=hit_in, hit_out=hit_out)
            for it, gids, hit_in, hit_out in turns
        )  # fmt: skip
        return _(
            "The hybrid fixed point (HybridKVCacheCoordinator) settles at {truth} tokens ({turns})."
        ).format(truth=truth, turns=steps)
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
    manager = (config.get("groups") or [{}])[0].get("manager")
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
        cut = _("EAGLE drops the last matched block") if config.get("use_eagle") else _("alignment")
        out = then(out, _("Then {cut}: {truth} tokens.").format(cut=cut, truth=truth))
    return out
