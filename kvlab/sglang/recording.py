"""Record a RadixCache as a list of events, and replay them to the tree at any event (kvlab's).

A radix cache's state is a tree, not a block pool, so it has its own small vocabulary (one
event per state change, recorded *after* the change, like kvlab.core's recorder):

==============  =====================================  ========================================
kind            fields                                 state change replay applies
==============  =====================================  ========================================
STEP            step                                   none (a driver step starts)
MATCHED         request_id, num_tokens (hit), node_id  last_access_time = time on ``touched``
                (last matched node), touched, time
INSERTED        node_id (last node), num_tokens        last_access_time = time on ``touched``
                (already cached), touched, time
NODE_ADDED      node_id, other_id (parent), tokens     a new leaf under other_id
                (key), slots (value), time
NODE_SPLIT      node_id (child), other_id (new head),  child's first num_tokens tokens move to
                num_tokens (split length)              the new node, which becomes its parent
NODE_EVICTED    node_id, num_tokens                    the leaf is deleted
LOCK_CHANGED    node_id, num_tokens (+1 or -1)         lock_ref += delta on node_id and ancestors
SLOTS_ALLOCATED slots                                  slots leave the head of the free list
SLOTS_FREED     slots                                  slots join the end of the free list
==============  =====================================  ========================================

Examples:
    >>> from kvlab.sglang.mem_cache.radix_cache import RadixCache
    >>> from kvlab.sglang.mem_cache.allocator import TokenToKVPoolAllocator
    >>> cache = RadixCache(TokenToKVPoolAllocator(8)); rec = RadixRecorder.attach(cache)
    >>> cache.insert((1, 2, 3), cache.token_to_kv_pool_allocator.alloc(3))
    0
    >>> rec.state_at(len(rec) - 1) == cache.snapshot()
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "NodeView",
    "RadixEvent",
    "RadixEventKind",
    "RadixRecorder",
    "RadixSnapshot",
    "radix_snapshot",
]


class RadixEventKind(str, Enum):
    """What happened to a radix cache (see the module docstring)."""

    STEP = "STEP"
    MATCHED = "MATCHED"
    INSERTED = "INSERTED"
    NODE_ADDED = "NODE_ADDED"
    NODE_SPLIT = "NODE_SPLIT"
    NODE_EVICTED = "NODE_EVICTED"
    LOCK_CHANGED = "LOCK_CHANGED"
    SLOTS_ALLOCATED = "SLOTS_ALLOCATED"
    SLOTS_FREED = "SLOTS_FREED"


@dataclass(frozen=True)
class RadixEvent:
    """One recorded change (unused fields keep their defaults; see the module table).

    Attributes:
        seq: Index in the recording.
        step: Driver step when it happened.
        kind: The RadixEventKind.
        node_id, other_id: Node ids (-1 = unused).
        num_tokens: Per kind: hit, cached length, split length, evicted length or lock delta.
        time: Logical clock of a match / insert / new node.
        tokens: A new node's key (token ids).
        slots: A new node's value, or the slots allocated / freed.
        touched: Node ids whose last_access_time became ``time``.
        request_id: The request of a match (or None).
    """

    seq: int
    step: int
    kind: RadixEventKind
    node_id: int = -1
    other_id: int = -1
    num_tokens: int = 0
    time: int = 0
    tokens: tuple[int, ...] = ()
    slots: tuple[int, ...] = ()
    touched: tuple[int, ...] = ()
    request_id: str | None = None


@dataclass(frozen=True)
class NodeView:
    """One tree node at one moment (the root is not listed; its id is 0).

    Attributes:
        node_id: The node.
        parent_id: Its parent (0 = the root).
        key: Token ids on its edge.
        value: KV slot ids of those tokens.
        lock_ref: Requests locking it.
        last_access_time: Logical clock of its last access.
        children: Child ids in insertion order.
    """

    node_id: int
    parent_id: int
    key: tuple[int, ...]
    value: tuple[int, ...]
    lock_ref: int
    last_access_time: int
    children: tuple[int, ...]


@dataclass(frozen=True)
class RadixSnapshot:
    """A whole radix cache at one moment: its nodes and the pool's free list.

    Attributes:
        nodes: node_id -> NodeView (root excluded).
        root_children: The root's child ids in insertion order.
        free_slots: The pool's free slot ids, front (allocated next) first.
        pool_size: Usable slots in the pool (tokens).
    """

    nodes: dict[int, NodeView] = field(default_factory=dict)
    root_children: tuple[int, ...] = ()
    free_slots: tuple[int, ...] = ()
    pool_size: int = 0

    @property
    def evictable_size(self) -> int:
        """Tokens in unlocked nodes (tokens)."""
        return sum(len(n.key) for n in self.nodes.values() if n.lock_ref == 0)

    @property
    def protected_size(self) -> int:
        """Tokens in locked nodes (tokens)."""
        return sum(len(n.key) for n in self.nodes.values() if n.lock_ref > 0)

    @property
    def total_size(self) -> int:
        """Tokens held by the tree (tokens)."""
        return sum(len(n.key) for n in self.nodes.values())

    def path_key(self, node_id: int) -> tuple[int, ...]:
        """Token ids from the root down to ``node_id`` (inclusive)."""
        parts = []
        while node_id != 0:
            node = self.nodes[node_id]
            parts.append(node.key)
            node_id = node.parent_id
        return tuple(t for part in reversed(parts) for t in part)

    def eviction_order(self) -> list[int]:
        """Unlocked leaves in the order evict() would take them (least recently used first)."""
        leaves = [n for n in self.nodes.values() if not n.children and n.lock_ref == 0]
        return [n.node_id for n in sorted(leaves, key=lambda n: (n.last_access_time, n.node_id))]


def radix_snapshot(cache: Any) -> RadixSnapshot:
    """Snapshot a live ``kvlab.sglang.mem_cache.radix_cache.RadixCache``."""
    nodes = {
        n.node_id: NodeView(
            n.node_id,
            n.parent.node_id,
            tuple(n.key),
            tuple(n.value),
            n.lock_ref,
            n.last_access_time,
            tuple(c.node_id for c in n.children.values()),
        )
        for n in cache.nodes()
    }
    pool = cache.token_to_kv_pool_allocator
    return RadixSnapshot(
        nodes,
        tuple(c.node_id for c in cache.root_node.children.values()),
        tuple(pool.free_slots),
        pool.size,
    )


class _Tree:
    """Mutable replay state: per node [parent_id, key, value, lock_ref, time, children dict]."""

    def __init__(self, snap: RadixSnapshot) -> None:
        self.nodes: dict[int, list[Any]] = {0: [-1, (), (), 1, 0, {}]}
        for n in _parents_first(snap):
            self.nodes[n.node_id] = [
                n.parent_id,
                n.key,
                n.value,
                n.lock_ref,
                n.last_access_time,
                {},
            ]
        for nid in snap.root_children:
            self.nodes[0][5][snap.nodes[nid].key[0]] = nid
        for n in snap.nodes.values():
            for c in n.children:
                self.nodes[n.node_id][5][snap.nodes[c].key[0]] = c
        self.free_slots = list(snap.free_slots)
        self.pool_size = snap.pool_size

    def apply(self, e: RadixEvent) -> None:
        k, nodes = e.kind, self.nodes
        if k in (RadixEventKind.MATCHED, RadixEventKind.INSERTED):
            for nid in e.touched:
                nodes[nid][4] = e.time
        elif k is RadixEventKind.NODE_ADDED:
            nodes[e.node_id] = [e.other_id, e.tokens, e.slots, 0, e.time, {}]
            nodes[e.other_id][5][e.tokens[0]] = e.node_id
        elif k is RadixEventKind.NODE_SPLIT:
            child = nodes[e.node_id]
            parent_id, cut = child[0], e.num_tokens
            head = [parent_id, child[1][:cut], child[2][:cut], child[3], child[4], {}]
            child[0], child[1], child[2] = e.other_id, child[1][cut:], child[2][cut:]
            head[5][child[1][0]] = e.node_id
            nodes[e.other_id] = head
            nodes[parent_id][5][head[1][0]] = e.other_id
        elif k is RadixEventKind.NODE_EVICTED:
            node = nodes.pop(e.node_id)
            del nodes[node[0]][5][node[1][0]]
        elif k is RadixEventKind.LOCK_CHANGED:
            nid = e.node_id
            while nid != 0:
                nodes[nid][3] += e.num_tokens
                nid = nodes[nid][0]
        elif k is RadixEventKind.SLOTS_ALLOCATED:
            n = len(e.slots)
            if tuple(self.free_slots[:n]) != e.slots:
                raise ValueError(f"event {e.seq}: slots {e.slots[:8]} are not the free list's head")
            del self.free_slots[:n]
        elif k is RadixEventKind.SLOTS_FREED:
            self.free_slots.extend(e.slots)

    def snapshot(self) -> RadixSnapshot:
        views = {
            nid: NodeView(nid, p, tuple(key), tuple(val), lock, t, tuple(kids.values()))
            for nid, (p, key, val, lock, t, kids) in self.nodes.items()
            if nid != 0
        }
        return RadixSnapshot(
            views, tuple(self.nodes[0][5].values()), tuple(self.free_slots), self.pool_size
        )


def _parents_first(snap: RadixSnapshot) -> Iterable[NodeView]:
    stack = list(reversed(snap.root_children))
    while stack:
        node = snap.nodes[stack.pop()]
        yield node
        stack.extend(reversed(node.children))


class RadixRecorder:
    """Records a RadixCache's changes (its hooks) and replays them (``state_at``).

    Args:
        initial: The state before the first event (``attach`` snapshots it).

    Attributes:
        events: The recorded RadixEvents, in order.
        step: The driver step stamped on events from now on.
    """

    def __init__(self, initial: RadixSnapshot | None = None) -> None:
        self.initial = initial if initial is not None else RadixSnapshot()
        self.events: list[RadixEvent] = []
        self.step = 0
        self._cursor: tuple[int, _Tree] | None = None

    @classmethod
    def attach(cls, cache: Any) -> RadixRecorder:
        """Snapshot ``cache`` and start recording it (and its token pool).

        Raises:
            RuntimeError: If the cache already has a recorder.
        """
        if cache.recorder is not None:
            raise RuntimeError("the RadixCache already has a recorder; detach it first")
        rec = cls(radix_snapshot(cache))
        cache.recorder = rec
        cache.token_to_kv_pool_allocator.recorder = rec
        return rec

    def __len__(self) -> int:
        return len(self.events)

    def _add(self, kind: RadixEventKind, **kw: Any) -> None:
        self.events.append(RadixEvent(len(self.events), self.step, kind, **kw))

    # ------------------------------------------------------------------ hooks
    def mark_step(self, step: int) -> None:
        """Set ``step`` and record a STEP event."""
        self.step = int(step)
        self._add(RadixEventKind.STEP, num_tokens=self.step)

    def match(self, request_id: str | None, hit: int, node_id: int, touched: tuple, time: int):
        """Hook: match_prefix found ``hit`` tokens ending at ``node_id``."""
        self._add(RadixEventKind.MATCHED, node_id=node_id, num_tokens=hit, touched=touched,
                  time=time, request_id=request_id)  # fmt: skip

    def insert(self, node_id: int, prefix_len: int, touched: tuple, time: int) -> None:
        """Hook: insert ended at ``node_id``; ``prefix_len`` tokens were already cached."""
        self._add(RadixEventKind.INSERTED, node_id=node_id, num_tokens=prefix_len,
                  touched=touched, time=time)  # fmt: skip

    def node_added(self, node_id: int, parent_id: int, key: tuple, value: list, time: int):
        """Hook: a new leaf."""
        self._add(RadixEventKind.NODE_ADDED, node_id=node_id, other_id=parent_id,
                  tokens=tuple(key), slots=tuple(value), time=time)  # fmt: skip

    def node_split(self, child_id: int, new_id: int, split_len: int) -> None:
        """Hook: ``child_id``'s edge was cut; ``new_id`` holds its first split_len tokens."""
        self._add(RadixEventKind.NODE_SPLIT, node_id=child_id, other_id=new_id,
                  num_tokens=split_len)  # fmt: skip

    def node_evicted(self, node_id: int, num_tokens: int) -> None:
        """Hook: a leaf was evicted."""
        self._add(RadixEventKind.NODE_EVICTED, node_id=node_id, num_tokens=num_tokens)

    def lock(self, node_id: int, delta: int) -> None:
        """Hook: lock_ref changed by ``delta`` on node_id and its ancestors."""
        self._add(RadixEventKind.LOCK_CHANGED, node_id=node_id, num_tokens=delta)

    def slots_allocated(self, slots: list[int]) -> None:
        """Hook: slots left the head of the pool's free list."""
        self._add(RadixEventKind.SLOTS_ALLOCATED, slots=tuple(slots))

    def slots_freed(self, slots: list[int]) -> None:
        """Hook: slots returned to the end of the free list."""
        self._add(RadixEventKind.SLOTS_FREED, slots=tuple(slots))

    # ------------------------------------------------------------------ replay
    def state_at(self, i: int) -> RadixSnapshot:
        """The tree right after event ``i`` (-1 = the initial state).

        Raises:
            IndexError: If ``i`` is not in [-1, len(self)).
        """
        if not -1 <= i < len(self.events):
            raise IndexError(f"state_at({i}): need -1 <= i < {len(self.events)}")
        start, tree = (0, _Tree(self.initial))
        if self._cursor is not None and self._cursor[0] <= i + 1:
            start, tree = self._cursor
        for e in self.events[start : i + 1]:
            tree.apply(e)
        self._cursor = (i + 1, tree)
        return tree.snapshot()

    def index_of_step(self, step: int) -> int:
        """The last event recorded at or before driver step ``step`` (-1 if none)."""
        last = -1
        for e in self.events:
            if e.step > step:
                break
            last = e.seq
        return last
