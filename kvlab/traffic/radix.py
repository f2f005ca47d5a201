"""SGLang's radix tree on the sequence clock, on plain ints: the same decisions, a lean tree.

``replay.serve_radix_one`` runs one request through kvlab.sglang's faithful RadixCache on
SGLang 0.5.23's life cycle, one page (``page_size = block_size``) per tree element::

    t1  match_prefix(keys[:(num_tokens - 1) // block_size])   # split where the match ends
        lock the matched path; refuse if pool + evictable < pages needed
        evict the shortfall: unlocked leaves, least recently used first, whole nodes
        allocate; release with checkpoint:
    t2      insert(keys)                                         # split where it diverges
    t3      match_prefix(keys); move the lock; free the tail page; unlock

``RadixPrefixCache`` keeps the same tree (the same nodes, splits, node ids and order of access
times) and so takes the same decisions, request by request (tests check it on both Mooncake traces
and on random traces), without what only a live server needs:

* no slots, no pool, no lock counts: between two requests every slot is free or in the tree,
  so the pool's free pages are ``num_blocks - tree pages``; the check "pool + evictable <
  needed" is then "pages of the prompt > num_blocks"; and the locked path (the one just
  matched) is the most recently used one, which the shortfall never reaches (evict asks for
  at most the unlocked pages, and pops every older leaf first), so locks change nothing;
* the three walks of an admitted request are one: the path to the matched node gets the time
  of t3 at once (its nodes are locked at eviction, and matched again at t3), the insert goes
  on from the matched node, and the tail of a split keeps the time of the walk that split it
  (t1 or t2), as in the faithful tree;
* evict does not collect every leaf at each call (the faithful mirror's walk): a heap of
  (last access time, node id) over leaves gets an entry whenever a leaf's time changes or a
  node becomes a leaf, and stale entries (a node evicted, no longer a leaf, or touched since)
  are skipped when popped (and dropped whenever they outnumber the nodes twice, so memory
  follows the tree, not the trace); SGLang 0.5.23 itself keeps a set of evictable leaves.

A curve (``radix_curve``) replays each capacity alone, except one that a larger capacity's
replay answers: when that replay neither evicted nor refused anything, every pool at least as
large as the most pages it ever needed at once (its *peak*) makes the very same decisions.

Examples:
    >>> sim = RadixPrefixCache(num_blocks=4, block_size=2)
    >>> sim.serve([7, 8], 5), sim.serve([7, 9], 5), sim.serve([7, 8, 1], 7)
    (0, 2, 4)
    >>> sim.num_evicted_blocks, sim.serve([1, 2, 3, 4], 9)
    (1, -1)
"""

from __future__ import annotations

from collections.abc import Sequence
from heapq import heapify, heappop, heappush

from kvlab.traffic.blocks import BlockedTraffic
from kvlab.traffic.replay import check_capacity
from kvlab.traffic.stack import CurvePoint

__all__ = ["RadixPrefixCache", "radix_curve"]


class _Node:
    """A tree node: the pages on the edge from its parent (``key``: one int a page)."""

    __slots__ = ("children", "key", "node_id", "parent", "time")

    def __init__(self, key: list[int], parent: _Node | None, time: int, node_id: int) -> None:
        self.key = key
        self.parent = parent  # NOTE: None for the root and for an evicted node
        self.children: dict[int, _Node] = {}
        self.time = time
        self.node_id = node_id


class RadixPrefixCache:
    """One pool of ``num_blocks`` pages run as SGLang 0.5.23's RadixCache (module docstring).

    Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache (match_prefix, insert,
    _split_node, evict) and mem_cache/common.py's life cycle, as kvlab.sglang replays them
    (``replay.serve_radix_one``), on the sequence clock.

    Args:
        num_blocks: Pages in the pool (blocks of ``block_size`` tokens), >= 1.
        block_size: Tokens per page (tokens), >= 1.

    Attributes:
        num_evicted_blocks: Pages evicted so far (blocks).
        num_pages: Pages the tree holds (blocks).
        peak: The most pages any admitted request needed in the pool, its tree included
            (blocks): a pool at least this large would never have evicted (so far).

    Raises:
        ValueError: If a size is not an int >= 1.
    """

    heap_slack = 4096
    """Stale heap entries tolerated beyond twice the nodes before they are dropped."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        for name, v in (("num_blocks", num_blocks), ("block_size", block_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        self.num_blocks, self.block_size = num_blocks, block_size
        self.root = _Node([], None, 0, 0)
        self._next_id = 1  # NOTE: node ids in the faithful tree's creation order
        self._clock = 0
        self._heap: list[tuple[int, int, _Node]] = []
        self._num_nodes = 0  # NOTE: the root not counted
        self.num_pages = 0
        self.num_evicted_blocks = 0
        self.peak = 0

    def _split(self, child: _Node, j: int, now: int, tail_time: int) -> _Node:
        """Cut ``child``'s edge after ``j`` pages: a new head node (time ``now``) above it;
        ``child`` keeps the tail, its id and ``tail_time``."""
        key = child.key
        parent = child.parent
        assert parent is not None
        head = _Node(key[:j], parent, now, self._next_id)
        self._next_id += 1
        self._num_nodes += 1
        head.children[key[j]] = child
        parent.children[key[0]] = head
        child.key, child.parent, child.time = key[j:], head, tail_time
        if not child.children:
            heappush(self._heap, (tail_time, child.node_id, child))
        return head

    def _evict(self, shortfall: int, now: int) -> None:
        """Evict least recently used leaves, whole, until ``shortfall`` pages are freed."""
        heap, root, freed = self._heap, self.root, 0
        while freed < shortfall:
            if not heap:
                raise AssertionError("radix: nothing left to evict (a broken invariant)")
            t, _, x = heappop(heap)
            if x.parent is None or x.children or x.time != t:
                continue  # NOTE: a stale entry: evicted, no longer a leaf, or touched since
            assert t != now, "radix: the locked path would be evicted (a broken invariant)"
            freed += len(x.key)
            self._num_nodes -= 1
            parent = x.parent
            del parent.children[x.key[0]]
            x.parent = None
            if parent is not root and not parent.children:
                heappush(heap, (parent.time, parent.node_id, parent))
        self.num_pages -= freed
        self.num_evicted_blocks += freed

    def serve(self, keys: Sequence[int], num_tokens: int) -> int:
        """Match, evict the shortfall, insert and release one request.

        Args:
            keys: The request's full-page keys (``num_tokens // block_size`` of them).
            num_tokens: Its prompt (tokens), >= 1.

        Returns:
            Hit tokens (matched pages, at most ``(num_tokens - 1) // block_size``, in tokens),
            or -1 when its pages outnumber the pool (refused: only the match's access times
            and split stay, as in SGLang).
        """
        if keys.__class__ is not list:
            keys = list(keys)  # NOTE: edges are lists; a slice compares equal only to a list
        num_pages = -(-num_tokens // self.block_size)
        cap = (num_tokens - 1) // self.block_size
        admitted = num_pages <= self.num_blocks
        clock = self._clock
        t1 = clock + 1
        now = clock + 3 if admitted else t1  # NOTE: t3 for the path an admitted request keeps
        self._clock = now
        # t1: match_prefix(keys[:cap])
        node, pos = self.root, 0
        while pos < cap:
            child = node.children.get(keys[pos])
            if child is None:
                break
            ck = child.key
            end = pos + len(ck)
            if end <= cap and keys[pos:end] == ck:
                child.time = now
                node, pos = child, end
                continue
            lim, j = min(len(ck), cap - pos), 1
            while j < lim and ck[j] == keys[pos + j]:
                j += 1
            node, pos = self._split(child, j, now, t1), pos + j
            break
        hit = pos
        if not admitted:
            if node is not self.root and not node.children:
                heappush(self._heap, (now, node.node_id, node))
            return -1
        need = num_pages - hit
        if self.num_pages + need > self.peak:
            self.peak = self.num_pages + need
        shortfall = need - (self.num_blocks - self.num_pages)
        if shortfall > 0:
            self._evict(shortfall, now)
        # t2 + t3: insert(keys) from the matched node, then the path is matched again
        m = len(keys)
        while pos < m:
            child = node.children.get(keys[pos])
            if child is None:
                leaf = _Node(list(keys[pos:m]), node, now, self._next_id)
                self._next_id += 1
                self._num_nodes += 1
                node.children[keys[pos]] = leaf
                self.num_pages += m - pos
                node = leaf
                break
            ck = child.key
            end = pos + len(ck)
            if end <= m and keys[pos:end] == ck:
                child.time = now
                node, pos = child, end
                continue
            lim, j = min(len(ck), m - pos), 1
            while j < lim and ck[j] == keys[pos + j]:
                j += 1
            node, pos = self._split(child, j, now, clock + 2), pos + j
        if node is not self.root and not node.children:
            heappush(self._heap, (now, node.node_id, node))
            if len(self._heap) > 2 * self._num_nodes + self.heap_slack:
                self._compact()
        return hit * self.block_size

    def _compact(self) -> None:
        """Drop the heap's stale entries (memory stays bounded by the tree, not the trace)."""
        live = {e[1]: e for e in self._heap
                if e[2].parent is not None and not e[2].children and e[2].time == e[0]}
        self._heap = list(live.values())
        heapify(self._heap)


def radix_curve(blocked: BlockedTraffic, capacities_tokens: Sequence[int],
                stop_after: int | None = None,
                max_model_len: int | None = None) -> list[CurvePoint]:  # fmt: skip
    """The radix tree's hits at every capacity, each equal to its own faithful replay.

    Capacities are replayed from the largest down; one at least as large as the ``peak`` of a
    replay that neither evicted nor refused anything makes the same decisions and takes its
    results (module docstring).

    Args:
        blocked: The traffic at one block size (only ``keys`` and prompt lengths are read).
        capacities_tokens: Pool sizes (tokens); each gives ``capacity // block_size`` pages.
        stop_after: Replay only the first ``stop_after`` requests (None = all).
        max_model_len: Prompts longer than this (tokens) are refused at every capacity before
            they reach the tree (SGLang refuses an input over its context length when the
            request arrives), as ``stack.lru_curve`` does for vLLM; None = no limit.

    Returns:
        One CurvePoint per capacity, in the order given (``replayed_from`` None), equal
        request by request to ``replay.serve_radix_one`` through kvlab.sglang (with
        ``max_model_len``: to it on the requests that are not refused).

    Raises:
        ValueError: If a capacity is not a whole number of tokens or is below one block, or
            ``max_model_len`` is below one token.
    """
    if max_model_len is not None and not (isinstance(max_model_len, int) and max_model_len >= 1):
        raise ValueError(f"max_model_len must be a whole number of tokens >= 1 (or None), "
                         f"got {max_model_len!r}")  # fmt: skip
    bs = blocked.block_size
    n = len(blocked) if stop_after is None else min(stop_after, len(blocked))
    keys, reqs = blocked.keys, blocked.requests
    sizes = [check_capacity(c, bs) // bs for c in capacities_tokens]
    prompt = sum(r.num_prompt_tokens for r in reqs[:n])
    done: dict[int, CurvePoint] = {}
    clean: CurvePoint | None = None
    clean_peak = 0
    for nb in sorted(set(sizes), reverse=True):
        if clean is not None and nb >= clean_peak:
            done[nb] = CurvePoint(nb, list(clean.per_request_hit_tokens), clean.hit_tokens,
                                  prompt, 0, 0)  # fmt: skip
            continue
        sim = RadixPrefixCache(nb, bs)
        serve = sim.serve
        if max_model_len is None:
            hits = [serve(keys[i], reqs[i].num_prompt_tokens) for i in range(n)]
        else:
            hits = [serve(keys[i], reqs[i].num_prompt_tokens)
                    if reqs[i].num_prompt_tokens <= max_model_len else -1 for i in range(n)]  # fmt: skip
        rejected = hits.count(-1)
        if rejected:
            hits = [max(h, 0) for h in hits]
        point = CurvePoint(nb, hits, sum(hits), prompt, rejected, sim.num_evicted_blocks)
        if not rejected and not sim.num_evicted_blocks:
            clean, clean_peak = point, sim.peak
        done[nb] = point
    return [done[nb] if i == sizes.index(nb) else _copy(done[nb])
            for i, nb in enumerate(sizes)]  # fmt: skip


def _copy(p: CurvePoint) -> CurvePoint:
    return CurvePoint(p.num_blocks, list(p.per_request_hit_tokens), p.hit_tokens,
                      p.prompt_tokens, p.rejected, p.evicted_blocks)  # fmt: skip
