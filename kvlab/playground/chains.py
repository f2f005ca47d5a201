"""The requests' hash chains of a LiteTrace, merged into one tree (no numpy).

The list-based twin of ``kvlab.viz.hash_tree.build_hash_tree`` for the playground's traces
(vLLM V1's design): block positions come from BLOCK_STORED events (whose counts show no null
block was skipped) and from the LOOKED_UP probes of ``get_computed_blocks`` for groups that
scan forward (full attention), a fixed-point turn restarting its groups at block 0. Only
groups whose block_size equals ``hash_block_size`` are read. tests/playground check that both
give the same tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvlab.playground.events import LiteTrace
from kvlab.trace.events import EventKind, unpack_fixed_point

__all__ = ["Chains", "build_chains"]

K = EventKind
_FORWARD_MANAGERS = frozenset({"FullAttentionManager", "SinkFullAttentionManager"})
_LOOKUP_CALLS = ("get_computed_blocks",)


@dataclass
class Chains:
    """Request hash chains merged by hash index (``kvlab.viz.hash_tree.HashTree``'s fields).

    Attributes:
        chains: request_id -> hash indexes of blocks 0, 1, ... (the known prefix only).
        parent: hash index -> parent hash index (-1: block 0).
        position: hash index -> block index.
    """

    chains: dict[str, list[int]] = field(default_factory=dict)
    parent: dict[int, int] = field(default_factory=dict)
    position: dict[int, int] = field(default_factory=dict)


def _groups(config: dict[str, Any]) -> tuple[set[int] | None, set[int] | None]:
    groups = config.get("groups") or []
    if not groups:
        return None, None
    hbs = config.get("hash_block_size")
    exact = {i for i, g in enumerate(groups) if hbs is None or int(g.get("block_size", hbs)) == hbs}
    forward = {i for i in exact if groups[i].get("manager") in _FORWARD_MANAGERS}
    return exact, forward


def build_chains(trace: LiteTrace) -> Chains:
    """Recover every request's hash chain from ``trace`` and merge them into a tree."""
    exact, forward = _groups(trace.config)
    known: dict[int, dict[int, int]] = {}
    kinds = trace.kind
    for i, kind in enumerate(kinds):
        if kind != K.BLOCK_STORED:
            continue
        g, r = trace.group[i], trace.request[i]
        if (exact is not None and g not in exact) or r < 0:
            continue
        first, end = trace.a[i], trace.b[i]
        payload = trace.payload_of(i)
        n = len(payload) // 2
        if n != end - first:
            continue  # NOTE: null blocks were skipped; positions are not recoverable
        slots = known.setdefault(r, {})
        for k, h in enumerate(payload[n:]):
            slots.setdefault(first + k, h)
    call_ids = {trace.call_names.index(n) for n in _LOOKUP_CALLS if n in trace.call_names}
    owner, counters = -1, {}
    for i, kind in enumerate(kinds):
        if kind == K.CALL_BEGIN and trace.group[i] in call_ids:
            owner, counters = i, {}
            continue
        if owner < 0 or kind not in (K.LOOKED_UP, K.FIXED_POINT_ITERATED):
            continue
        if kind == K.FIXED_POINT_ITERATED:
            for gid in unpack_fixed_point(trace.payload_of(i))[2]:
                counters[gid] = 0  # NOTE: the next turn of these groups starts at block 0
            continue
        g = trace.group[i]
        if forward is not None and g not in forward:
            continue
        pos = counters.get(g, 0)
        counters[g] = pos + 1
        r = trace.request[owner]
        if r >= 0:
            known.setdefault(r, {}).setdefault(pos, trace.a[i])
    tree = Chains()
    for r in sorted(known):
        slots, chain = known[r], []
        while len(chain) in slots:
            h = slots[len(chain)]
            if tree.position.get(h, len(chain)) != len(chain):
                break  # NOTE: cannot happen for a real hash chain; keeps the tree a tree
            tree.parent.setdefault(h, chain[-1] if chain else -1)
            tree.position[h] = len(chain)
            chain.append(h)
        if chain:
            tree.chains[trace.requests[r]] = chain
    return tree
