"""Why did this prefix-cache lookup stop where it did? ``explain(trace, call)`` answers.

For one ``get_computed_blocks`` call it reconstructs, from the recorded events alone:

* the cap: the hit may cover at most ``num_tokens - 1`` tokens (the last token is recomputed
  for its logits), so a fully cached prompt still recomputes its last block;
* every probe (LOOKED_UP) with its block index and group, grouped into turns (one turn per
  attention group per fixed-point iteration; a unitary coordinator has one turn);
* the deciding miss: the probe at block index == the turn's hit length (the block that would
  have extended the hit), its group and hash;
* for hybrid models, which attention group shortened the candidate length, in which iteration;
* the EAGLE drop (the last matched block recomputed for the draft head);
* what evicted the block that would have matched: the last BLOCK_REMOVED of that key (or an
  ALL_BLOCKS_CLEARED) before the lookup, the call and request that caused it, and its step.

Block indexes are inferred from the scan order: full attention probes block 0, 1, 2, ...;
sliding window probes from the last block of its candidate length backwards. A hash already
placed by a full-attention scan keeps that index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kvlab.i18n import _, language, with_language
from kvlab.trace.designs import design_of
from kvlab.trace.events import EventKind, unpack_fixed_point
from kvlab.trace.tables import key_code
from kvlab.trace.view import Call, short_hash
from kvlab.trace.untrusted import shown

if TYPE_CHECKING:
    from kvlab.trace.explain_nano import NanoExplanation

__all__ = ["EvictionCause", "Explanation", "Probe", "Turn", "explain"]

K = EventKind


@dataclass
class Probe:
    """One get_cached_block probe for one group (block_id -1 = miss)."""

    seq: int
    block_index: int | None
    kv_cache_group_id: int
    hash_index: int
    hash: str
    block_id: int

    @property
    def hit(self) -> bool:
        """Whether the probe found a cached block."""
        return self.block_id >= 0


@dataclass
class Turn:
    """One attention group's search (hybrid: one fixed-point turn; unitary: the whole lookup)."""

    iteration: int
    kv_cache_group_ids: list[int]
    spec: str
    hit_length_in: int | None
    hit_length_out: int | None
    reused: bool
    probes: list[Probe] = field(default_factory=list)

    @property
    def shortened(self) -> bool:
        """Whether this turn cut the candidate length (tokens)."""
        return (
            self.hit_length_in is not None
            and self.hit_length_out is not None
            and self.hit_length_out < self.hit_length_in
        )


@dataclass
class EvictionCause:
    """What removed a key from the prefix cache before the lookup."""

    seq: int
    kind: str
    block_id: int | None
    step: int
    call: Call | None
    stored_seq: int | None
    stored_by: str | None
    how: str


@dataclass
class Explanation:
    """Structured answer of explain(); ``str()`` renders it for a reader.

    Attributes:
        call: The get_computed_blocks call.
        num_tokens, num_block_hashes: Its args (tokens, hashes).
        max_cache_hit_length: ``num_tokens - 1`` (tokens), the cap.
        num_new_computed_tokens: The hit (tokens).
        reason: "miss" (a probe at the hit's end missed), "capped" (every block under the cap
            hit), "eagle" (the EAGLE drop alone shortened it), "hybrid" (another attention
            group's alignment shortened it), "complete" (every full block hit), "too_short"
            (no full block under the cap), "no_lookup" (caching off or skipped).
        capped: Whether the cap bound the hit.
        turns: The probes, per attention group turn.
        deciding_miss: The probe that would have extended the hit, or None.
        shortened_by: Turns that cut the candidate length (hybrid fixed point).
        eagle_dropped_blocks: Blocks dropped for EAGLE (unitary coordinators), else 0.
        eviction: What removed the deciding miss's key from the cache, or None.
        never_cached: True when that key was never cached before the lookup.
        block_size: Block size of group 0 (tokens).
        lang: The language of its text: the current one (kvlab.i18n) when explain() ran, or
            explain's ``lang``; ``eviction.how`` is written in it and ``str()`` renders in it.
    """

    call: Call
    num_tokens: int
    num_block_hashes: int
    max_cache_hit_length: int
    num_new_computed_tokens: int
    reason: str
    capped: bool
    turns: list[Turn]
    deciding_miss: Probe | None
    shortened_by: list[Turn]
    eagle_dropped_blocks: int
    eviction: EvictionCause | None
    never_cached: bool
    block_size: int
    lang: str = field(default="en", compare=False)

    def __str__(self) -> str:
        from kvlab.trace.explain_text import render_lines  # NOTE: text builds on these types

        return "\n".join(render_lines(self, lang=self.lang))


@with_language
def explain(trace: Any, call: int | Call) -> Explanation | NanoExplanation:
    """Explain one get_computed_blocks call of ``trace`` (or a nano-vllm ``allocate`` call).

    The text (``str()`` of the answer) is in ``lang`` (keyword-only: ``"en"``, ``"zh"``; None =
    the current language of kvlab.i18n); block ids, hashes and identifiers are the same in both.

    A trace of another cache design may explain its own calls (``design_of(trace).explain_call``):
    a NanoBlockManager trace (``config["cache"] == "nano-vllm"``) has no
    get_computed_blocks: its lookups sit inside ``allocate``, which is explained by
    ``kvlab.trace.explain_nano.explain_allocate`` (a NanoExplanation: first missing hash or
    token-id mismatch, re-activated blocks and their deque scans).

    Args:
        trace: A kvlab.trace.Trace.
        call: The call's CALL_BEGIN index (or any event inside it), or a Call.

    Returns:
        The Explanation (a NanoExplanation for a nano-vllm allocate).

    Raises:
        ValueError: If the call is not a finished get_computed_blocks call (or a finished
            allocate of a nano-vllm trace).
    """
    c = call if isinstance(call, Call) else trace.call(call)
    own = design_of(trace).explain_call(trace, c)
    if own is not None:
        return own
    if c.name != "get_computed_blocks" or c.end < 0:
        raise ValueError(
            f"explain() needs a finished get_computed_blocks call, got {c.name} "
            f"at event {c.begin} (end {c.end})"
        )
    num_tokens, num_hashes = c.args["num_tokens"], c.args["num_block_hashes"]
    result = c.result["num_new_computed_tokens"]
    groups = trace.config.get("groups") or [{}]
    turns = _turns(trace, c, groups, num_tokens - 1)
    bs = int(groups[0].get("block_size") or 1)
    deciding, capped = _deciding_miss(
        turns, num_tokens - 1, num_hashes, result, groups, trace.config
    )
    eagle = _eagle_drop(turns, result, trace.config, bs)
    eviction, never = (None, False)
    if deciding is not None:
        eviction, never = _find_eviction(trace, deciding)
    shortened = [t for t in turns if t.shortened]
    reason = _reason(turns, deciding, capped, eagle, shortened, (num_tokens - 1) // bs)
    return Explanation(
        c,
        num_tokens,
        num_hashes,
        num_tokens - 1,
        result,
        reason,
        capped,
        turns,
        deciding,
        shortened,
        eagle,
        eviction,
        never,
        bs,
        lang=language(),
    )


def _reason(turns: list[Turn], deciding: Probe | None, capped: bool, eagle: int,
            shortened: list[Turn], cap_blocks: int) -> str:  # fmt: skip
    if not any(t.probes for t in turns):
        return "too_short" if cap_blocks == 0 else "no_lookup"
    if deciding is not None:
        return "miss"
    if capped:
        return "capped"
    if eagle:
        return "eagle"
    return "hybrid" if len(turns) > 1 and shortened else "complete"


def _turns(trace: Any, c: Call, groups: list[dict], max_length: int) -> list[Turn]:
    cols = trace.cols
    rows = np.flatnonzero(
        np.isin(cols.kind[c.begin : c.end], [K.LOOKED_UP, K.FIXED_POINT_ITERATED])
    )
    turns: list[Turn] = []
    pending: list[Probe] = []
    for r in (rows + c.begin).tolist():
        if cols.kind[r] == K.LOOKED_UP:
            h = int(cols.a[r])
            pending.append(
                Probe(
                    r,
                    None,
                    int(cols.group[r]),
                    h,
                    short_hash(trace.tables.hash_bytes(h)),
                    int(cols.b[r]),
                )
            )
            continue
        hit_length_out, reused, gids, _ = unpack_fixed_point(trace.payload(r))
        turns.append(
            Turn(
                int(cols.a[r]),
                gids,
                _spec(groups, gids[0]),
                int(cols.b[r]),
                hit_length_out,
                reused,
                pending,
            )
        )
        pending = []
    if pending or not turns:  # a unitary coordinator: one turn, no fixed-point events
        first = pending[0].kv_cache_group_id if pending else 0
        turns.append(Turn(0, [first], _spec(groups, first), max_length, None, False, pending))
    _place(turns, groups, max_length)
    return turns


def _spec(groups: list[dict], gid: int) -> str:
    return str(groups[gid].get("spec", "?")) if 0 <= gid < len(groups) else "?"


def _place(turns: list[Turn], groups: list[dict], max_length: int) -> None:
    """Fill Probe.block_index from the scan order of each turn."""
    known: dict[int, int] = {}
    for turn in turns:
        first = turn.kv_cache_group_ids[0]
        bs = int(groups[first].get("block_size") or 1) if first < len(groups) else 1
        backwards = "SlidingWindow" in turn.spec
        length = turn.hit_length_in if turn.hit_length_in is not None else max_length
        k = -1
        for probe in turn.probes:
            if probe.kv_cache_group_id == first or k < 0:
                k += 1
            if not backwards:
                probe.block_index = k
                known.setdefault(probe.hash_index, k)
            else:
                probe.block_index = known.get(probe.hash_index, length // bs - 1 - k)


def _deciding_miss(
    turns: list[Turn],
    max_length: int,
    num_hashes: int,
    result: int,
    groups: list[dict],
    config: dict,
) -> tuple[Probe | None, bool]:
    """The miss at block index == hit blocks of the turn that set the final length; and the cap."""
    deciding = None
    for turn in turns:
        if turn.reused or not turn.probes:
            continue
        first = turn.kv_cache_group_ids[0]
        bs = int(groups[first].get("block_size") or 1) if first < len(groups) else 1
        out = turn.hit_length_out
        if out is not None:
            hit_blocks = out // bs
        else:  # unitary: no fixed-point event; the result is this turn's hit
            hit_blocks = result // bs if "SlidingWindow" in turn.spec else _leading_hits(turn)
        misses = [p for p in turn.probes if not p.hit and p.block_index == hit_blocks]
        if misses and (deciding is None or turn.shortened or out is None):
            deciding = misses[0]
    bs0 = int(groups[0].get("block_size") or 1)
    cap_blocks = max_length // bs0
    hash_blocks = num_hashes * int(config.get("hash_block_size") or bs0) // bs0
    capped = (
        deciding is None
        and hash_blocks > cap_blocks
        and all(p.hit for t in turns for p in t.probes if "SlidingWindow" not in t.spec)
    )
    return deciding, capped


def _leading_hits(turn: Turn) -> int:
    n = 0
    for p in turn.probes:
        if not p.hit:
            break
        if p.kv_cache_group_id == turn.kv_cache_group_ids[-1]:
            n += 1
    return n


def _eagle_drop(turns: list[Turn], result: int, config: dict, bs: int) -> int:
    if not config.get("use_eagle") or len(turns) != 1 or "SlidingWindow" in turns[0].spec:
        return 0
    return max(_leading_hits(turns[0]) - result // bs, 0)


def _find_eviction(trace: Any, miss: Probe) -> tuple[EvictionCause | None, bool]:
    cols = trace.cols
    before = miss.seq
    h, g = miss.hash_index, miss.kv_cache_group_id
    removed = np.flatnonzero(
        (cols.kind[:before] == K.BLOCK_REMOVED)
        & (cols.b[:before] == h)
        & (cols.group[:before] == g)
    )
    cleared = np.flatnonzero(cols.kind[:before] == K.ALL_BLOCKS_CLEARED)
    stored = _stored_events(trace, h, g, before)
    last = max(int(removed[-1]) if len(removed) else -1, int(cleared[-1]) if len(cleared) else -1)
    in_initial = key_code(h, g) in trace.initial_state.cached
    if last < 0 or (stored and stored[-1] > last):
        return None, not stored and not in_initial
    stored_before = [s for s in stored if s < last]
    stored_seq = stored_before[-1] if stored_before else None
    stored_by = (
        trace.tables.request_id(int(cols.request[stored_seq])) if stored_seq is not None else None
    )
    kind = K(int(cols.kind[last]))
    top = _top_call(trace, last)
    block_id = int(cols.a[last]) if kind == K.BLOCK_REMOVED else None
    return EvictionCause(
        last,
        kind.name,
        block_id,
        trace.step_of(last),
        top,
        stored_seq,
        stored_by,
        _how(trace, last, kind, top, block_id),
    ), False


def _stored_events(trace: Any, h: int, g: int, before: int) -> list[int]:
    cols = trace.cols
    end = int(cols.offsets[before])
    pos = np.flatnonzero(cols.payload[:end] == h)
    owner = np.searchsorted(cols.offsets, pos, side="right") - 1
    ok = (cols.kind[owner] == K.BLOCK_STORED) & (cols.group[owner] == g)
    half = (cols.offsets[owner + 1].astype(np.int64) - cols.offsets[owner]) // 2
    ok &= pos - cols.offsets[owner].astype(np.int64) >= half
    return sorted(set(owner[ok].tolist()))


def _top_call(trace: Any, i: int) -> Call | None:
    parent = trace.parent(i)
    if parent < 0:
        return None
    while trace.parent(parent) >= 0:
        parent = trace.parent(parent)
    return trace.call(parent)


def _how(trace: Any, i: int, kind: EventKind, top: Call | None, block_id: int | None) -> str:
    if kind == K.ALL_BLOCKS_CLEARED:
        return _("reset_prefix_cache cleared every cached hash")
    j = i
    while j > 0 and trace.cols.kind[j - 1] == K.BLOCK_REMOVED:
        j -= 1
    own = design_of(trace).how_evicted(trace, i, j, top, block_id)
    if own is not None:
        return own
    # vLLM's get_new_blocks pops its blocks (POPLEFT_N), then evicts and counts them one by
    # one: the removal follows the pop, after the counts of the blocks before it.
    k = j
    while k > 0 and trace.cols.kind[k - 1] in (K.GET_NEW_BLOCKS, K.BLOCK_REMOVED):
        k -= 1
    if k > 0 and trace.cols.kind[k - 1] == K.POPLEFT_N and block_id in trace.payload(k - 1):
        return _(
            "{who} needed new blocks: get_new_blocks popped block {block_id} from the "
            "free-queue head (least recently freed) and reused it"
        ).format(who=caller_text(top), block_id=block_id)
    if top is not None and top.name == "evict_blocks":
        return _("evict_blocks dropped block {block_id} from the prefix cache").format(
            block_id=block_id
        )
    return evicted_text(block_id, top)


def caller_text(top: Call | None) -> str:
    """``"<call> of request <id>"`` (or "a caller"), in the current language."""
    if top is None:
        return _("a caller")
    return _("{name} of request {request}").format(name=shown(top.name),
                                                    request=shown(top.request))  # fmt: skip


def evicted_text(block_id: int | None, top: Call | None) -> str:
    """``"block <id> was evicted [during <call>]"``, in the current language."""
    if top is None:
        return _("block {block_id} was evicted").format(block_id=block_id)
    return _("block {block_id} was evicted during {name}").format(block_id=block_id, name=top.name)
