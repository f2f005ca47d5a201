"""The whole LRU curve in one pass: stack distances over vLLM's freeing order.

On the sequence clock vLLM's free queue is an LRU stack (``kvlab.traffic.lru``): each request
moves its hit blocks to the top, puts its missing blocks there too (the pool's least recently
freed blocks make room) and frees them last block first, so block 0 ends on top. A pool of N
blocks holds exactly the N most recently freed *items* (a block content: a key, or a partial
last block that caches nothing), whatever N is (Mattson et al.'s inclusion property). So one
pass over the trace that knows, for each looked-up block, its depth in the stack (how many
items were freed since it) answers every capacity at once::

    hit of a request at N blocks = its leading blocks whose depth (running max) is < N

Depths come from a Fenwick tree over freeing times that counts the items moved since (a run of
blocks freed together and still together costs one query and one range update, so a request
costs O(runs * log T) rather than O(blocks * log T)).

What breaks inclusion, and what is done about it (exactly: never an approximation):

* a request larger than a pool (more blocks than N) is refused at N and changes nothing there,
  while larger pools serve it;
* a block-aligned prompt whose last block is cached: vLLM never looks that block up (the
  ``num_tokens - 1`` cap), allocates it again and caches a second block with the same hash; from
  then on which copy a lookup touches (the first inserted) depends on N.

At such a request, each capacity it affects leaves the pass: its state (the N most recent items
of the stack) is handed to ``LRUPrefixCache`` (``lru.py``), which replays the rest of the trace
for that capacity alone. Both Mooncake traces at block size 512 have no second copy; the
biggest request (126,195 conversation tokens) only moves capacities below it to replay.
nano-vllm (``cap_hit=False``) never makes second copies.

Examples:
    >>> from kvlab.traffic.mooncake import read_mooncake_lines
    >>> from kvlab.traffic.blocks import prepare_blocks
    >>> b = prepare_blocks(read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    ...     '{"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": [3, 4]}',
    ...     '{"timestamp": 2, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 5]}']),
    ...     512)
    >>> [c.per_request_hit_tokens for c in lru_curve(b, [3 * 512, 5 * 512, 8 * 512])]
    [[0, 0, 512], [0, 0, 1024], [0, 0, 1024]]
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from kvlab.traffic.blocks import BlockedTraffic
from kvlab.traffic.lru import LRUPrefixCache

__all__ = ["CurvePoint", "lru_curve"]


@dataclass
class CurvePoint:
    """One capacity of the curve.

    Attributes:
        num_blocks: Pool size (blocks).
        per_request_hit_tokens: Hit of each request (tokens); 0 for a refused one.
        rejected: Requests refused (larger than the pool).
        evicted_blocks: Cached blocks evicted (blocks).
        replayed_from: Index of the request from which this capacity was replayed on its own
            (``LRUPrefixCache``), or None if the one pass answered it to the end.
    """

    num_blocks: int
    per_request_hit_tokens: list[int] = field(default_factory=list, repr=False)
    rejected: int = 0
    evicted_blocks: int = 0
    replayed_from: int | None = None


class _Fenwick:
    """Prefix sums of 'moved' marks over freeing times, with range add (two trees)."""

    def __init__(self, size: int) -> None:
        self.n = size + 1
        self.t1 = [0] * (self.n + 1)
        self.t2 = [0] * (self.n + 1)

    def _add(self, i: int, v1: int, v2: int) -> None:
        t1, t2, n = self.t1, self.t2, self.n
        while i <= n:
            t1[i] += v1
            t2[i] += v2
            i += i & -i

    def add_range(self, lo: int, hi: int) -> None:
        """Mark every time in [lo, hi] (0-based) once."""
        self._add(lo + 1, 1, lo)
        self._add(hi + 2, -1, -(hi + 1))

    def prefix(self, x: int) -> int:
        """Marks at times [0, x] (0-based)."""
        i, s1, s2 = x + 1, 0, 0
        t1, t2 = self.t1, self.t2
        while i > 0:
            s1 += t1[i]
            s2 += t2[i]
            i -= i & -i
        return s1 * (x + 1) - s2


class _Stack:
    """Items in freeing order: time t holds ``key_at[t]`` (-1: caches nothing)."""

    def __init__(self, size: int) -> None:
        self.key_at: list[int] = []
        self.moved = _Fenwick(size)
        self.is_moved = bytearray(size)
        self.num_moved = 0
        self.last: dict[int, int] = {}  # key -> time of its most recent item

    def depth(self, t: int) -> int:
        """Items freed after time t and not moved since."""
        now = len(self.key_at)
        return (now - 1 - t) - (self.num_moved - self.moved.prefix(t))

    def move(self, lo: int, hi: int) -> None:
        """The items of times [lo, hi] leave their places (looked up again)."""
        self.moved.add_range(lo, hi)
        self.is_moved[lo : hi + 1] = b"\x01" * (hi + 1 - lo)
        self.num_moved += hi + 1 - lo

    def top_items(self, n: int) -> list[int | None]:
        """The ``n`` most recent items, least recent first (keys; None for no key)."""
        out: list[int | None] = []
        key_at, is_moved, last = self.key_at, self.is_moved, self.last
        t = len(key_at) - 1
        while t >= 0 and len(out) < n:
            if not is_moved[t]:
                k = key_at[t]
                # NOTE: an older copy of a key is never inside a capacity still in the pass
                out.append(k if k >= 0 and last.get(k) == t else None)
            t -= 1
        out.reverse()
        return out

    def keyed_depths(self) -> list[int]:
        """Depth of every item that holds a key, ascending."""
        out, depth = [], 0
        key_at, is_moved = self.key_at, self.is_moved
        for t in range(len(key_at) - 1, -1, -1):
            if not is_moved[t]:
                if key_at[t] >= 0:
                    out.append(depth)
                depth += 1
        return out


def _runs(times: list[int]) -> list[tuple[int, int]]:
    """(start index, length) of the runs where times[j + 1] == times[j] - 1."""
    out, start = [], 0
    for j in range(1, len(times)):
        if times[j] != times[j - 1] - 1:
            out.append((start, j - start))
            start = j
    if times:
        out.append((start, len(times) - start))
    return out


def lru_curve(blocked: BlockedTraffic, capacities_tokens: Sequence[int], cap_hit: bool = True,
              stop_after: int | None = None,
              max_model_len: int | None = None) -> list[CurvePoint]:  # fmt: skip
    """vLLM's (``cap_hit``) or nano-vllm's hits at every capacity in one pass (module doc).

    Args:
        blocked: The traffic at one block size (only ``keys`` and prompt lengths are read).
        capacities_tokens: Pool sizes (tokens); each gives ``capacity // block_size`` blocks.
        cap_hit: True = vLLM (lookups capped at num_tokens - 1), False = nano-vllm.
        stop_after: Replay only the first ``stop_after`` requests (None = all).
        max_model_len: Prompts longer than this (tokens) are refused at every capacity before
            any lookup (vLLM's input check; None = no limit).

    Returns:
        One CurvePoint per capacity, in the order given; equal to replaying each capacity
        with ``LRUPrefixCache`` (and so with kvlab.core / kvlab.nanovllm), request by request.

    Raises:
        ValueError: If a capacity is below one block.
    """
    bs = blocked.block_size
    sizes = []
    for cap in capacities_tokens:
        if cap < bs:
            raise ValueError(f"capacity {cap} tokens is below one block ({bs} tokens)")
        sizes.append(cap // bs)
    n_req = len(blocked) if stop_after is None else min(stop_after, len(blocked))
    reqs, all_keys = blocked.requests, blocked.keys
    points = {n: CurvePoint(n) for n in sorted(set(sizes))}
    active = sorted(points)  # NOTE: capacities (blocks) still answered by the pass
    total = sum(-(-r.num_prompt_tokens // bs) for r in reqs[:n_req])
    st = _Stack(total)
    last, key_at = st.last, st.key_at
    for i in range(n_req):
        n = reqs[i].num_prompt_tokens
        if max_model_len is not None and n > max_model_len:
            for c in active:
                points[c].rejected += 1
                points[c].per_request_hit_tokens.append(0)
            continue
        keys = all_keys[i]
        nb = -(-n // bs)
        m = len(keys)
        limit = min((n - 1) // bs, m) if cap_hit else m
        seen = 0
        while seen < m and keys[seen] in last:
            seen += 1
        looked = min(seen, limit)
        old = [last[k] for k in keys[:looked]]
        runs = _runs(old)
        depth = [st.depth(old[j]) for j, _ in runs]
        leave = [c for c in active if c < nb]
        if seen > limit:  # NOTE: a cached last block gets a second copy at these sizes
            d = st.depth(last[keys[limit]])
            leave += [c for c in active if c > d and c >= nb]
        if leave:
            _hand_over(st, points, leave, blocked, i, n_req, cap_hit, max_model_len)
            active = [c for c in active if c not in leave]
            if not active:
                break
        # hits: running max of depths (depth grows by 1 along a run)
        pm = -1
        run_max = []
        for (j0, length), d0 in zip(runs, depth, strict=True):
            pm = max(pm, d0 + length - 1)
            run_max.append((j0, length, d0, pm))
        for c in active:
            p = points[c]
            hit = 0
            for j0, length, d0, top in run_max:
                if top < c:
                    hit = j0 + length
                    continue
                hit = j0 + max(0, min(length, c - d0)) if d0 < c else j0
                break
            p.per_request_hit_tokens.append(hit * bs if cap_hit else min(hit * bs, n - 1))
            for _, length, d0, _ in run_max:  # NOTE: blocks found at depth >= c were evicted
                if d0 + length - 1 >= c:
                    p.evicted_blocks += length - max(0, c - d0)
        # move: the looked-up items leave their places, then the request is freed on top
        for j0, length in runs:
            st.move(old[j0 + length - 1], old[j0])
        base = len(key_at)
        if nb > m:
            key_at.append(-1)  # NOTE: the partial last block, freed first, caches nothing
        key_at.extend(reversed(keys))
        top = len(key_at) - 1
        last.update(zip(keys, range(top, top - m, -1)))
        assert len(key_at) - base == nb
    if active:
        depths = st.keyed_depths()  # NOTE: items never looked up again: evicted past their depth
        for c in active:
            points[c].evicted_blocks += len(depths) - bisect_left(depths, c)
    return [points[n] for n in sizes]


def _hand_over(st: _Stack, points: dict, leave: list[int], blocked: BlockedTraffic, start: int,
               n_req: int, cap_hit: bool, max_model_len: int | None) -> None:  # fmt: skip
    """Replay the ``leave`` capacities from request ``start`` on, from the stack's state."""
    bs = blocked.block_size
    depths = st.keyed_depths()
    for c in leave:
        p = points[c]
        p.evicted_blocks += len(depths) - bisect_left(depths, c)
        sim = LRUPrefixCache(c, bs, cap_hit=cap_hit, items=st.top_items(c),
                             max_model_len=max_model_len)  # fmt: skip
        p.replayed_from = start
        for i in range(start, n_req):
            hit = sim.serve(blocked.keys[i], blocked.requests[i].num_prompt_tokens)
            if hit < 0:
                p.rejected += 1
                hit = 0
            p.per_request_hit_tokens.append(hit)
        p.evicted_blocks += sim.num_evicted_blocks
