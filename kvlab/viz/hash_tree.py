"""The hash chains of a trace's requests, merged into one tree (shared prefixes share nodes).

A request's block i has ``block_hash = hash(parent_block_hash, tokens of block i, extras)``
with ``NONE_HASH`` as the parent of block 0, so two requests that agree on their first k blocks
have the same first k hashes: their chains are one path that forks where they differ. A trace
stores hashes as indexes into its hash table; this module recovers which index sits at which
block position of which request, from the events alone:

* ``BLOCK_STORED``: the hashes of blocks ``num_cached_blocks .. num_full_blocks - 1`` in order
  (used when no null block was skipped, i.e. the counts agree);
* ``LOOKED_UP`` inside ``get_computed_blocks`` for groups that scan forward (full attention):
  probe k of a turn is block k. A nano-vllm trace (``config["cache"] == "nano-vllm"``) probes
  inside ``allocate`` instead, block 0, 1, ... up to its first miss: the same rule applies, so
  a request whose prefix hit (and therefore stored nothing) still gets its chain.

Only groups whose block_size equals ``hash_block_size`` are read (a larger block's hash is not
one link of the hash_block_size chain). Positions a trace never names stay unknown, and a
chain stops at its first unknown position.

Examples:
    >>> tree = build_hash_tree(trace)                # doctest: +SKIP
    >>> tree.chains["a"]                             # doctest: +SKIP
    [0, 1]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvlab.trace import EventKind, KVState
from kvlab.trace.designs import design_of
from kvlab.trace.events import unpack_fixed_point
from kvlab.trace.tables import key_code
from kvlab.trace.view import short_hash

__all__ = [
    "FORWARD_MANAGERS",
    "HashTree",
    "build_hash_tree",
    "cached_blocks_of",
    "lookup_call_names",
]

K = EventKind

FORWARD_MANAGERS = frozenset({"FullAttentionManager", "SinkFullAttentionManager"})
"""Managers whose get_cached_block probes go block 0, 1, 2, ... (positions are known)."""


@dataclass
class HashTree:
    """Request hash chains merged by hash index.

    Attributes:
        chains: request_id -> hash indexes of blocks 0, 1, ... (the known prefix only).
        parent: hash index -> parent hash index (-1: block 0, whose parent is NONE_HASH).
        position: hash index -> block index (position in every chain holding it).
        hashes: hash index -> short hex, for every hash in a chain.
    """

    chains: dict[str, list[int]] = field(default_factory=dict)
    parent: dict[int, int] = field(default_factory=dict)
    position: dict[int, int] = field(default_factory=dict)
    hashes: dict[int, str] = field(default_factory=dict)

    def children(self, requests: list[str] | None = None) -> dict[int, list[int]]:
        """parent hash index -> child hash indexes (-1 is NONE_HASH), first appearance order.

        Args:
            requests: Restrict to these requests' chains (None = all).

        Raises:
            KeyError: If a request has no chain in this tree.
        """
        out: dict[int, list[int]] = {}
        for r in self._select(requests):
            for h in self.chains[r]:
                kids = out.setdefault(self.parent[h], [])
                if h not in kids:
                    kids.append(h)
        return out

    def preorder(self, requests: list[str] | None = None) -> list[int]:
        """Hash indexes depth-first from NONE_HASH (children in first-appearance order).

        Raises:
            KeyError: If a request has no chain in this tree.
        """
        children, order = self.children(requests), []
        stack = list(reversed(children.get(-1, [])))
        while stack:
            h = stack.pop()
            order.append(h)
            stack.extend(reversed(children.get(h, [])))
        return order

    def chain_ends(self, requests: list[str] | None = None) -> dict[int, list[str]]:
        """Last known hash index of each request's chain -> the requests ending there.

        Raises:
            KeyError: If a request has no chain in this tree.
        """
        ends: dict[int, list[str]] = {}
        for r in self._select(requests):
            ends.setdefault(self.chains[r][-1], []).append(r)
        return ends

    def requests_of(self, hash_index: int, requests: list[str] | None = None) -> list[str]:
        """The requests whose chain contains ``hash_index`` (in chain insertion order)."""
        return [r for r in self._select(requests) if hash_index in self.chains[r]]

    def _select(self, requests: list[str] | None) -> list[str]:
        if requests is None:
            return list(self.chains)
        missing = [r for r in requests if r not in self.chains]
        if missing:
            raise KeyError(
                f"no hash chain for request(s) {missing}; known: {sorted(self.chains)[:20]}"
            )
        return list(requests)


def _chain_groups(config: dict[str, Any]) -> tuple[set[int] | None, set[int] | None]:
    """(groups whose stores are read, groups whose lookups are read); None = every group."""
    groups = config.get("groups") or []
    if not groups:
        return None, None
    hbs = config.get("hash_block_size")
    exact = {i for i, g in enumerate(groups) if hbs is None or int(g.get("block_size", hbs)) == hbs}
    if design_of(config).lookups_scan_forward:
        return exact, exact
    forward = {i for i in exact if groups[i].get("manager") in FORWARD_MANAGERS}
    return exact, forward


def lookup_call_names(config: dict[str, Any]) -> tuple[str, ...]:
    """Names of the calls whose LOOKED_UP events are prefix-cache lookups for ``config``'s
    design: ``get_computed_blocks`` (vLLM V1), plus ``allocate`` for nano-vllm."""
    return design_of(config).lookup_call_names


def _stored_positions(trace: Any, exact: set[int] | None, known: dict[int, dict[int, int]]) -> None:
    c = trace.cols
    for i in np.flatnonzero(c.kind == K.BLOCK_STORED).tolist():
        g, r = int(c.group[i]), int(c.request[i])
        if (exact is not None and g not in exact) or r < 0:
            continue
        first, end = int(c.a[i]), int(c.b[i])
        payload = trace.payload(i)
        n = len(payload) // 2
        if n != end - first:
            continue  # NOTE: null blocks were skipped; positions are not recoverable
        slots = known.setdefault(r, {})
        for k, h in enumerate(payload[n:]):
            slots.setdefault(first + k, h)


def _lookup_positions(
    trace: Any, forward: set[int] | None, known: dict[int, dict[int, int]]
) -> None:
    c = trace.cols
    names = [n for n in lookup_call_names(trace.config) if n in trace.call_names]
    if not names:
        return
    call_ids = [trace.call_names.index(n) for n in names]
    begins = np.flatnonzero((c.kind == K.CALL_BEGIN) & np.isin(c.group, call_ids))
    rows = np.flatnonzero((c.kind == K.LOOKED_UP) | (c.kind == K.FIXED_POINT_ITERATED))
    owners = np.searchsorted(begins, rows, side="right") - 1
    counters: dict[int, int] = {}
    current = -1
    for i, o in zip(rows.tolist(), owners.tolist()):
        if o < 0:
            continue
        if o != current:
            current, counters = o, {}
        g = int(c.group[i])
        if c.kind[i] == K.FIXED_POINT_ITERATED:
            for gid in unpack_fixed_point(trace.payload(i))[2]:
                counters[gid] = 0  # NOTE: the next turn of these groups starts at block 0
            continue
        if forward is not None and g not in forward:
            continue
        pos = counters.get(g, 0)
        counters[g] = pos + 1
        r = int(c.request[int(begins[o])])
        if r >= 0:
            known.setdefault(r, {}).setdefault(pos, int(c.a[i]))


def build_hash_tree(trace: Any) -> HashTree:
    """Recover every request's hash chain from ``trace`` and merge them into a tree.

    Args:
        trace: A kvlab.trace.Trace.

    Returns:
        A HashTree; requests appear in order of their request index (first appearance).
    """
    exact, forward = _chain_groups(trace.config)
    known: dict[int, dict[int, int]] = {}
    _stored_positions(trace, exact, known)
    _lookup_positions(trace, forward, known)
    tree = HashTree()
    for r in sorted(known):
        slots = known[r]
        chain: list[int] = []
        while len(chain) in slots:
            h = slots[len(chain)]
            if tree.position.get(h, len(chain)) != len(chain):
                break  # NOTE: cannot happen for a real hash chain; keeps the tree a tree
            tree.parent.setdefault(h, chain[-1] if chain else -1)
            tree.position[h] = len(chain)
            chain.append(h)
        if chain:
            tree.chains[trace.tables.request_id(r)] = chain
    for h in tree.position:
        tree.hashes[h] = short_hash(trace.tables.hash_bytes(h))
    return tree


def cached_blocks_of(state: KVState, hash_index: int) -> dict[int, tuple[int, ...]]:
    """kv_cache_group_id -> the block ids cached under (hash_index, group) in ``state``.

    Groups where the hash is not cached are left out (an empty dict: a lookup would miss).
    """
    out = {}
    for g in range(max(state.num_groups, 1)):
        held = state.cached.get(key_code(hash_index, g))
        if held:
            out[g] = held
    return out
