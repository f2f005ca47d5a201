"""Property tests of the radix cache: random inserts, matches, locks and evictions keep every
invariant, and the recorded events replay to the live tree."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvlab.sglang import RadixCache, RadixRecorder, TokenToKVPoolAllocator, TreeNode

POOL = 48
keys = st.lists(st.integers(1, 3), min_size=1, max_size=9).map(tuple)


def walk(cache: RadixCache, key: tuple[int, ...]) -> list[int]:
    """The slots of the longest cached prefix of key, without touching the tree."""
    node, out = cache.root_node, []
    while key and key[0] in node.children:
        child = node.children[key[0]]
        n = 0
        while n < min(len(key), len(child.key)) and key[n] == child.key[n]:
            n += 1
        out += child.value[:n]
        if n < len(child.key):
            break
        node, key = child, key[n:]
    return out


def attached(cache: RadixCache, node: TreeNode) -> bool:
    while node is not cache.root_node:
        parent = node.parent
        if parent is None or parent.children.get(node.key[0]) is not node:
            return False
        node = parent
    return True


class RadixMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pool = TokenToKVPoolAllocator(POOL)
        self.cache = RadixCache(self.pool)
        self.rec = RadixRecorder.attach(self.cache)
        self.locks: list[TreeNode] = []
        self.stored: dict[tuple[int, ...], list[int]] = {}

    @rule(key=keys)
    def insert(self, key: tuple[int, ...]) -> None:
        if self.pool.available_size() < len(key):
            self.cache.evict(len(key))
        slots = self.pool.alloc(len(key))
        if slots is None:
            return
        cached = self.cache.insert(key, slots)
        self.pool.free(slots[:cached])  # the tree keeps its own slots for the cached part
        assert cached <= len(key)

    @rule(key=keys)
    def match_and_lock(self, key: tuple[int, ...]) -> None:
        expected = walk(self.cache, key)
        value, node = self.cache.match_prefix(key)
        assert value == expected
        assert self.cache.path_key(node) == key[: len(value)]
        self.cache.inc_lock_ref(node)
        self.locks.append(node)

    @precondition(lambda self: self.locks)
    @rule(i=st.integers(0, 100))
    def unlock(self, i: int) -> None:
        self.cache.dec_lock_ref(self.locks.pop(i % len(self.locks)))

    @rule(n=st.integers(0, 20))
    def evict(self, n: int) -> None:
        before = self.cache.evictable_size()
        freed = self.cache.evict(n)
        assert freed >= min(n, before) and self.cache.evictable_size() == before - freed

    @invariant()
    def sizes_are_consistent(self) -> None:
        nodes = list(self.cache.nodes())
        evictable = sum(len(n.key) for n in nodes if n.lock_ref == 0)
        protected = sum(len(n.key) for n in nodes if n.lock_ref > 0)
        assert self.cache.evictable_size() == evictable
        assert self.cache.protected_size() == protected
        slots = [s for n in nodes for s in n.value]
        assert len(slots) == len(set(slots)) and all(len(n.key) == len(n.value) > 0 for n in nodes)
        assert self.pool.available_size() == POOL - len(slots)
        assert set(self.pool.free_slots).isdisjoint(slots)

    @invariant()
    def locks_protect_their_paths(self) -> None:
        expected: dict[int, int] = {}
        for node in self.locks:
            assert attached(self.cache, node), f"locked node {node.node_id} was evicted"
            while node is not self.cache.root_node:
                expected[node.node_id] = expected.get(node.node_id, 0) + 1
                node = node.parent
        for n in self.cache.nodes():
            assert n.lock_ref == expected.get(n.node_id, 0)

    @invariant()
    def every_cached_prefix_is_matchable(self) -> None:
        for n in self.cache.nodes():
            path = self.cache.path_key(n)
            assert len(walk(self.cache, path)) == len(path)
            assert n.children == {c.key[0]: c for c in n.children.values()}

    @invariant()
    def replay_equals_live(self) -> None:
        assert self.rec.state_at(len(self.rec) - 1) == self.cache.snapshot()


RadixMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
TestRadixMachine = RadixMachine.TestCase
