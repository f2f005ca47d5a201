"""What a nano-vllm trace shows that vLLM V1 has no word for, and why its ``allocate`` stopped.

A NanoBlockManager (``kvlab.nanovllm``) records the same events as kvlab.core, bracketed by the
calls ``allocate`` / ``may_append`` / ``deallocate``, with ``config["cache"] == "nano-vllm"``.
Its design differs from vLLM V1 in ways the events still reveal when they are replayed against
nano-vllm's own structures instead of vLLM's:

* ``hash_to_block_id`` never loses an entry. Every entry was made by a store (a BLOCK_STORED of
  that hash), so the map is "the last block each hash was stored to"; an entry whose key is not
  in the valid cached map any more is *stale* (its block was reset or re-hashed).
* a lookup miss whose hash has an entry was rejected by the token-id check
  (``blocks[entry].token_ids != token_ids``): a stale entry whose block now holds other tokens,
  or (entry still valid) a true xxhash64 collision. A miss without an entry is a first missing
  hash. A hit through a stale entry (the block holds the same tokens under another prefix) is a
  *stale hit*: nano-vllm reuses KV computed for another prefix.
* ``free_block_ids`` is a deque: a REMOVE (the hit re-activates a freed cached block) scans it
  from the left, so its cost is the block's position; vLLM V1 unlinks in O(1).

NOTE: entries already stale when recording began are not events; ``nano_config`` lists them as
``config["stale_entries_at_start"]`` (16-hex-digit hash -> block id), so a trace recorded from a
used manager is read exactly too. A trace without that key is read as if there were none.

Examples:
    >>> facts = nano_facts(trace)                       # doctest: +SKIP
    >>> facts.num_token_mismatches, facts.num_reactivated_blocks   # doctest: +SKIP
    (1, 2)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvlab.i18n import language
from kvlab.trace.events import EventKind
from kvlab.trace.tables import split_key_code
from kvlab.trace.view import Call, short_hash

__all__ = ["NANO_CACHE", "NanoExplanation", "NanoFacts", "NanoProbe", "explain_allocate",
           "is_nano", "nano_facts"]  # fmt: skip

K = EventKind

NANO_CACHE = "nano-vllm"
"""``trace.config["cache"]`` of a recorded NanoBlockManager."""

_READ = [K.CALL_BEGIN, K.LOOKED_UP, K.BLOCK_STORED, K.BLOCK_REMOVED, K.ALL_BLOCKS_CLEARED,
         K.REMOVE, K.POPLEFT, K.APPEND]  # fmt: skip


def is_nano(trace: Any) -> bool:
    """Whether ``trace`` was recorded from a NanoBlockManager."""
    return trace.config.get("cache") == NANO_CACHE


@dataclass
class NanoProbe:
    """One nano-vllm lookup (LOOKED_UP) as its map decided it.

    Attributes:
        seq: Event index of the LOOKED_UP.
        block_index: Position of the probed block in the request (blocks).
        hash_index: Index of the hash in the trace's hash table.
        hash: Short hex of the hash.
        block_id: The block hit, -1 on a miss.
        verdict: "hit", "stale_hit" (hit through a stale entry), "no_entry" (the hash is not
            in hash_to_block_id) or "token_mismatch" (an entry existed; the token-id check
            rejected its block).
        entry_block_id: The block hash_to_block_id named for the hash, -1 when none.
        entry_stale: Whether that entry was stale (its block no longer has this hash).
    """

    seq: int
    block_index: int
    hash_index: int
    hash: str
    block_id: int
    verdict: str
    entry_block_id: int
    entry_stale: bool
    kv_cache_group_id: int = 0

    @property
    def hit(self) -> bool:
        """Whether the probe found a block."""
        return self.block_id >= 0


@dataclass
class NanoFacts:
    """nano-vllm's counters and per-event findings, rebuilt from a trace prefix.

    The counters mean what ``kvlab.nanovllm.NanoStats`` counts live (same names).

    Attributes:
        probes: LOOKED_UP event index -> its NanoProbe.
        scans: REMOVE event index -> deque positions scanned to find the block.
        stale_entries: hash index -> block id of every stale map entry at the end.
    """

    num_lookups: int = 0
    num_hits: int = 0
    num_token_mismatches: int = 0
    num_stale_hits: int = 0
    num_reactivated_blocks: int = 0
    num_deque_scan_steps: int = 0
    num_evicted_blocks: int = 0
    probes: dict[int, NanoProbe] = field(default_factory=dict)
    scans: dict[int, int] = field(default_factory=dict)
    stale_entries: dict[int, int] = field(default_factory=dict)


def _initial_maps(trace: Any) -> tuple[dict[int, int], dict[int, int]]:
    """(hash_to_block_id, valid entries) at the start, keyed by hash index (group 0)."""
    valid = {}
    for code, held in trace.initial_state.cached.items():
        h, g = split_key_code(code)
        if g == 0 and held:
            valid[h] = held[0]
    entries = dict(valid)
    for hex_hash, block_id in (trace.config.get("stale_entries_at_start") or {}).items():
        h = trace.tables.find_hash(bytes.fromhex(hex_hash))
        if h >= 0:
            entries[h] = int(block_id)
    return entries, valid


def nano_facts(trace: Any, end: int | None = None) -> NanoFacts:
    """Replay nano-vllm's hash_to_block_id and deque over events ``0..end``.

    Args:
        trace: A trace of a NanoBlockManager (``is_nano(trace)``).
        end: Last event index read (None = the whole trace; -1 = none).

    Returns:
        The NanoFacts after event ``end``.

    Raises:
        ValueError: If the trace is not a nano-vllm trace.
        IndexError: If ``end`` is not in [-1, len(trace)).
    """
    if not is_nano(trace):
        raise ValueError(f"not a nano-vllm trace: config['cache'] is {trace.config.get('cache')!r}")
    end = len(trace) - 1 if end is None else end
    if not -1 <= end < len(trace):
        raise IndexError(f"event index {end} out of range [-1, {len(trace)})")
    c, facts = trace.cols, NanoFacts()
    entries, valid = _initial_maps(trace)
    queue = deque(trace.initial_state.free_queue_order())
    rows = np.flatnonzero(np.isin(c.kind[: end + 1], _READ)).tolist()
    position = 0
    for i in rows:
        kind, a = int(c.kind[i]), int(c.a[i])
        if kind == K.CALL_BEGIN:
            position = 0
        elif kind == K.LOOKED_UP:
            facts.probes[i] = _probe(trace, i, position, entries, valid, facts)
            position += 1
        elif kind == K.BLOCK_STORED and int(c.group[i]) == 0:
            payload = trace.payload(i)
            n = len(payload) // 2
            for b, h in zip(payload[:n], payload[n:]):
                entries[h] = valid[h] = b
        elif kind == K.BLOCK_REMOVED:
            facts.num_evicted_blocks += 1
            if valid.get(int(c.b[i])) == a:
                del valid[int(c.b[i])]
        elif kind == K.ALL_BLOCKS_CLEARED:
            valid.clear()
        elif kind == K.REMOVE:
            steps = queue.index(a)
            del queue[steps]
            facts.scans[i] = steps
            facts.num_reactivated_blocks += 1
            facts.num_deque_scan_steps += steps
        elif kind == K.POPLEFT:
            queue.popleft()
        else:
            queue.append(a)
    facts.stale_entries = {h: b for h, b in entries.items() if valid.get(h) != b}
    return facts


def _probe(
    trace: Any, i: int, position: int, entries: dict, valid: dict, facts: NanoFacts
) -> NanoProbe:
    h, block_id = int(trace.cols.a[i]), int(trace.cols.b[i])
    entry = entries.get(h, -1)
    stale = entry >= 0 and valid.get(h) != entry
    if block_id >= 0:
        verdict = "stale_hit" if stale else "hit"
    else:
        verdict = "token_mismatch" if entry >= 0 else "no_entry"
    facts.num_lookups += 1
    facts.num_hits += block_id >= 0
    facts.num_stale_hits += verdict == "stale_hit"
    facts.num_token_mismatches += verdict == "token_mismatch"
    return NanoProbe(i, position, h, short_hash(trace.tables.hash_bytes(h)), block_id, verdict,
                     entry, stale)  # fmt: skip


@dataclass
class NanoExplanation:
    """Why one NanoBlockManager ``allocate`` hit what it hit; ``str()`` renders it.

    Attributes:
        call: The allocate call.
        num_tokens, num_blocks: Its args (tokens, blocks).
        num_cached_tokens: The hit (tokens).
        block_size: Tokens per block.
        probes: Its lookups, block 0 up to the first miss.
        reactivated: (block_id, deque positions scanned) of each freed cached block it hit.
        deciding_miss: The first miss, or None.
        reason: "no_entry" (first missing hash), "token_mismatch" (an entry existed; the
            token-id check rejected it), "partial_last_block" (every full block hit; the
            partial last block is never looked up), "complete" (every block hit) or
            "too_short" (no full block: nothing looked up).
        eviction: For a miss, what last removed that hash from the cache (an
            ``EvictionCause``), or None.
        lang: The language of its text (the current one of kvlab.i18n when it was explained);
            ``str()`` renders in it.
    """

    call: Call
    num_tokens: int
    num_blocks: int
    num_cached_tokens: int
    block_size: int
    probes: list[NanoProbe]
    reactivated: list[tuple[int, int]]
    deciding_miss: NanoProbe | None
    reason: str
    eviction: Any
    lang: str = field(default="en", compare=False)

    def __str__(self) -> str:
        from kvlab.trace.explain_text import render_nano_lines  # NOTE: text builds on these

        return "\n".join(render_nano_lines(self, lang=self.lang))


def explain_allocate(trace: Any, call: Call) -> NanoExplanation:
    """Explain one NanoBlockManager ``allocate`` call (``explain`` dispatches here).

    Args:
        trace: A nano-vllm trace.
        call: A finished ``allocate`` call of it.

    Returns:
        The NanoExplanation.

    Raises:
        ValueError: If the trace is not a nano-vllm trace or the call is not a finished
            allocate.
    """
    if not is_nano(trace) or call.name != "allocate" or call.end < 0:
        raise ValueError(
            f"explain_allocate() needs a finished allocate call of a nano-vllm trace, got "
            f"{call.name} at event {call.begin} (end {call.end}, cache "
            f"{trace.config.get('cache')!r})"
        )
    from kvlab.trace.explain import _find_eviction  # NOTE: explain imports this module lazily

    facts = nano_facts(trace, call.end)
    probes = [p for s, p in facts.probes.items() if call.begin < s < call.end]
    reactivated = [
        (int(trace.cols.a[s]), n) for s, n in facts.scans.items() if call.begin < s < call.end
    ]
    bs = int((trace.config.get("groups") or [{}])[0].get("block_size") or 1)
    num_tokens, num_blocks = _allocate_args(call)
    deciding = next((p for p in probes if not p.hit), None)
    if deciding is not None:
        reason = deciding.verdict
    elif not probes:
        reason = "too_short"
    else:
        reason = "partial_last_block" if num_tokens % bs else "complete"
    eviction = _find_eviction(trace, deciding)[0] if deciding is not None else None
    result = call.result.get("result") or [0]
    return NanoExplanation(call, num_tokens, num_blocks, int(result[0]), bs, probes,
                           reactivated, deciding, reason, eviction, lang=language())  # fmt: skip


def _allocate_args(call: Call) -> tuple[int, int]:
    values = call.args.get("args") or [0, 0]
    return int(values[0]), int(values[1])
