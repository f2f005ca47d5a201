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
of the stack) is handed to ``LRUPrefixCache`` (``lru.py``), which serves the rest of the trace
for that capacity alone. Both Mooncake traces at block size 512 have no second copy; the
biggest request (126,195 conversation tokens) only moves capacities below it to replay.
nano-vllm (``cap_hit=False``) never makes second copies.

Memory is bounded by the largest capacity, not by the trace: ``LRUCurve`` takes requests one
at a time (``feed``), and when its arrays fill it compacts them, dropping the items deeper than
the largest capacity still in the pass (evicted at every capacity: counted as such; a later
lookup of one is a miss everywhere, exactly as a fresh item). A 100x extension of the
conversation trace (``synthetic.extend_trace``) streams through it.

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

__all__ = ["CurvePoint", "LRUCurve", "lru_curve"]


MIN_TIMES = 1 << 16
"""Freeing times a streaming pass allocates at least (compaction doubles what it keeps)."""


@dataclass
class CurvePoint:
    """One capacity of the curve.

    Attributes:
        num_blocks: Pool size (blocks).
        per_request_hit_tokens: Hit of each request (tokens; 0 for a refused one), when kept.
        hit_tokens: Hit tokens of the requests from ``warmup_requests`` on (tokens).
        prompt_tokens: Prompt tokens of those requests (tokens).
        rejected: Requests refused (larger than the pool, or than max_model_len).
        evicted_blocks: Cached blocks evicted (blocks).
        replayed_from: Index of the request from which this capacity was served on its own
            (``LRUPrefixCache``), or None if the pass answered it to the end.
    """

    num_blocks: int
    per_request_hit_tokens: list[int] = field(default_factory=list, repr=False)
    hit_tokens: int = 0
    prompt_tokens: int = 0
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
    """Items in freeing order: time t holds ``key_at[t]`` (-1: caches nothing).

    NOTE: ``last[key]`` is the time of the key's most recent item; an older item of the same
    key (a second copy's original) stays in ``key_at`` but is never looked up again.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.key_at: list[int] = []
        self.moved = _Fenwick(size)
        self.is_moved = bytearray(size)
        self.num_moved = 0
        self.last: dict = {}

    def depth(self, t: int) -> int:
        """Items freed after time t and not moved since."""
        now = len(self.key_at)
        return (now - 1 - t) - (self.num_moved - self.moved.prefix(t))

    def move(self, lo: int, hi: int) -> None:
        """The items of times [lo, hi] leave their places (looked up again)."""
        self.moved.add_range(lo, hi)
        self.is_moved[lo : hi + 1] = b"\x01" * (hi + 1 - lo)
        self.num_moved += hi + 1 - lo

    def live(self, limit: int) -> list[int]:
        """Times of the ``limit`` most recent items, most recent first."""
        out: list[int] = []
        is_moved = self.is_moved
        t = len(self.key_at) - 1
        while t >= 0 and len(out) < limit:
            if not is_moved[t]:
                out.append(t)
            t -= 1
        return out

    def top_items(self, n: int) -> list:
        """The ``n`` most recent items, least recent first (keys; None for no key)."""
        key_at, last = self.key_at, self.last
        out = []
        for t in reversed(self.live(n)):
            k = key_at[t]
            # NOTE: an older copy of a key is never inside a capacity still in the pass
            out.append(k if k != -1 and last.get(k) == t else None)
        return out

    def keyed_depths(self) -> list[int]:
        """Depth of every item that holds a key, ascending."""
        import numpy as np

        n = len(self.key_at)
        live = np.frombuffer(self.is_moved, dtype=np.uint8, count=n) == 0
        after = np.cumsum(live[::-1])[::-1] - live  # NOTE: live items freed later = depth
        keyed = live & (np.fromiter(self.key_at, dtype=object, count=n) != -1)
        return np.sort(after[keyed]).tolist()

    def compact(self, keep: int, room: int) -> int:
        """Keep the ``keep`` most recent items (renumbered), with room for ``room`` more
        times; returns how many dropped items held a key."""
        kept = self.live(keep)
        key_at, last = self.key_at, self.last
        dropped = sum(1 for t in range(len(key_at)) if not self.is_moved[t]
                      and key_at[t] != -1) - sum(1 for t in kept if key_at[t] != -1)  # fmt: skip
        new_keys = [key_at[t] for t in reversed(kept)]
        new_last = {}
        for new_t, t in enumerate(reversed(kept)):
            k = key_at[t]
            if k != -1 and last.get(k) == t:
                new_last[k] = new_t
        # NOTE: fresh arrays (no time moved yet) for the kept items, renumbered 0 ...
        self.__init__(max(room + len(new_keys), 2 * len(new_keys), MIN_TIMES))
        self.key_at, self.last = new_keys, new_last
        return dropped


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


class LRUCurve:
    """The one pass, fed one request at a time (see the module docstring).

    Args:
        block_size: Tokens per block (tokens).
        capacities_tokens: Pool sizes (tokens); each gives ``capacity // block_size`` blocks.
        cap_hit: True = vLLM (lookups capped at num_tokens - 1), False = nano-vllm.
        max_model_len: Prompts longer than this (tokens) are refused at every capacity before
            any lookup (vLLM's input check; None = no limit).
        keep_per_request: Keep every request's hit per capacity (False: sums only, for
            traces that do not fit in memory).
        warmup_requests: Requests before this index are replayed but not summed into
            ``hit_tokens`` / ``prompt_tokens``.
        expected_times: Freeing times to allocate at first (blocks of the whole trace avoids
            any compaction; None = grow by compaction).

    Raises:
        ValueError: If a capacity is below one block.
    """

    def __init__(self, block_size: int, capacities_tokens: Sequence[int], cap_hit: bool = True,
                 max_model_len: int | None = None, keep_per_request: bool = True,
                 warmup_requests: int = 0, expected_times: int | None = None) -> None:  # fmt: skip
        bs = block_size
        self.sizes = []
        for cap in capacities_tokens:
            if cap < bs:
                raise ValueError(f"capacity {cap} tokens is below one block ({bs} tokens)")
            self.sizes.append(cap // bs)
        self.bs, self.cap_hit, self.max_model_len = bs, cap_hit, max_model_len
        self.keep, self.warmup = keep_per_request, warmup_requests
        self.points = {n: CurvePoint(n) for n in sorted(set(self.sizes))}
        self.active = sorted(self.points)  # NOTE: capacities (blocks) still in the pass
        self.sims: dict[int, LRUPrefixCache] = {}
        self.st = _Stack(expected_times + 1 if expected_times else MIN_TIMES)
        self.index = 0

    def _record(self, c: int, hit: int, n: int) -> None:
        p = self.points[c]
        if self.keep:
            p.per_request_hit_tokens.append(hit)
        if self.index >= self.warmup:
            p.hit_tokens += hit
            p.prompt_tokens += n

    def feed(self, keys: Sequence, num_tokens: int) -> None:
        """Serve one request at every capacity.

        Args:
            keys: Its full-block keys (``num_tokens // block_size``; equal key = equal
                prefix: ``BlockedTraffic.keys`` or ``blocks.hash_id_keys``).
            num_tokens: Its prompt (tokens).
        """
        n, bs, st = num_tokens, self.bs, self.st
        for c, sim in self.sims.items():
            hit = sim.serve(keys, n)
            if hit < 0:
                self.points[c].rejected += 1
            self._record(c, max(hit, 0), n)
        if self.max_model_len is not None and n > self.max_model_len:
            for c in self.active:
                self.points[c].rejected += 1
                self._record(c, 0, n)
            self.index += 1
            return
        if self.active:
            self._feed_pass(keys, n, bs, st)
        self.index += 1

    def _feed_pass(self, keys: Sequence, n: int, bs: int, st: _Stack) -> None:
        nb, m = -(-n // bs), len(keys)
        if len(st.key_at) + nb > st.size:
            dropped = st.compact(self.active[-1], nb)
            for c in self.active:
                self.points[c].evicted_blocks += dropped
            st = self.st
        last, key_at = st.last, st.key_at
        limit = min((n - 1) // bs, m) if self.cap_hit else m
        seen = 0
        while seen < m and keys[seen] in last:
            seen += 1
        looked = min(seen, limit)
        old = list(map(last.__getitem__, keys[:looked]))
        if looked and old[-1] == old[0] - looked + 1:
            # NOTE: times fall strictly along a prefix (a parent is freed after its child in
            # every request holding both), so equal ends mean one run: the common case
            runs = [(0, looked)]
        else:
            runs = _runs(old)
        depth = [st.depth(old[j]) for j, _ in runs]
        leave = [c for c in self.active if c < nb] if self.active[0] < nb else []
        if seen > limit:  # NOTE: a cached last block gets a second copy at these sizes
            d = st.depth(last[keys[limit]])
            leave += [c for c in self.active if c > d and c >= nb]
        if leave:
            self._hand_over(leave, keys, n)
            if not self.active:
                return
        # hits: running max of depths (depth grows by 1 along a run)
        pm, run_max = -1, []
        for (j0, length), d0 in zip(runs, depth, strict=True):
            pm = max(pm, d0 + length - 1)
            run_max.append((j0, length, d0, pm))
        points, keep, cap_hit = self.points, self.keep, self.cap_hit
        counted = self.index >= self.warmup
        for c in self.active:
            hit = 0
            for j0, length, d0, top in run_max:
                if top < c:
                    hit = j0 + length
                    continue
                hit = j0 + max(0, min(length, c - d0)) if d0 < c else j0
                break
            hit = hit * bs if cap_hit else min(hit * bs, n - 1)
            p = points[c]  # NOTE: _record, inlined (once per request and capacity)
            if keep:
                p.per_request_hit_tokens.append(hit)
            if counted:
                p.hit_tokens += hit
                p.prompt_tokens += n
            if pm >= c:
                for _, length, d0, _ in run_max:  # NOTE: blocks found at depth >= c: evicted
                    if d0 + length - 1 >= c:
                        p.evicted_blocks += length - max(0, c - d0)
        # move: the looked-up items leave their places, then the request is freed on top
        for j0, length in runs:
            st.move(old[j0 + length - 1], old[j0])
        if nb > m:
            key_at.append(-1)  # NOTE: the partial last block, freed first, caches nothing
        key_at.extend(reversed(keys))
        top = len(key_at) - 1
        last.update(zip(keys, range(top, top - m, -1)))

    def _hand_over(self, leave: list[int], keys: Sequence, n: int) -> None:
        """Serve the ``leave`` capacities on their own from now on (this request included)."""
        depths = self.st.keyed_depths()
        for c in leave:
            p = self.points[c]
            p.evicted_blocks += len(depths) - bisect_left(depths, c)
            sim = LRUPrefixCache(c, self.bs, cap_hit=self.cap_hit, items=self.st.top_items(c),
                                 max_model_len=self.max_model_len)  # fmt: skip
            p.replayed_from = self.index
            hit = sim.serve(keys, n)
            if hit < 0:
                p.rejected += 1
            self._record(c, max(hit, 0), n)
            self.sims[c] = sim
        self.active = [c for c in self.active if c not in leave]

    def finish(self) -> list[CurvePoint]:
        """Close the pass: count the evictions still pending; one CurvePoint per capacity
        given, in that order."""
        if self.active:
            depths = self.st.keyed_depths()  # NOTE: items never looked up again
            for c in self.active:
                self.points[c].evicted_blocks += len(depths) - bisect_left(depths, c)
            self.active = []
        for c, sim in self.sims.items():
            self.points[c].evicted_blocks += sim.num_evicted_blocks
        self.sims = {}
        return [self.points[n] for n in self.sizes]


def lru_curve(blocked: BlockedTraffic, capacities_tokens: Sequence[int], cap_hit: bool = True,
              stop_after: int | None = None, max_model_len: int | None = None,
              warmup_requests: int = 0) -> list[CurvePoint]:  # fmt: skip
    """vLLM's (``cap_hit``) or nano-vllm's hits at every capacity in one pass (module doc).

    Args:
        blocked: The traffic at one block size (only ``keys`` and prompt lengths are read).
        capacities_tokens: Pool sizes (tokens); each gives ``capacity // block_size`` blocks.
        cap_hit: True = vLLM (lookups capped at num_tokens - 1), False = nano-vllm.
        stop_after: Replay only the first ``stop_after`` requests (None = all).
        max_model_len: Prompts longer than this (tokens) are refused at every capacity before
            any lookup (vLLM's input check; None = no limit).
        warmup_requests: Requests before this index count in no sum (still replayed).

    Returns:
        One CurvePoint per capacity, in the order given; equal to replaying each capacity
        with ``LRUPrefixCache`` (and so with kvlab.core / kvlab.nanovllm), request by request.

    Raises:
        ValueError: If a capacity is below one block.
    """
    n_req = len(blocked) if stop_after is None else min(stop_after, len(blocked))
    reqs = blocked.requests
    total = sum(-(-r.num_prompt_tokens // blocked.block_size) for r in reqs[:n_req])
    curve = LRUCurve(blocked.block_size, capacities_tokens, cap_hit, max_model_len,
                     warmup_requests=warmup_requests, expected_times=total)  # fmt: skip
    for i in range(n_req):
        curve.feed(blocked.keys[i], reqs[i].num_prompt_tokens)
    return curve.finish()
