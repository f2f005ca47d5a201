"""Wrong RadixCaches, written as learners write them: one per catalogue entry."""
from __future__ import annotations

import heapq

from kvlab.labs.solutions.radix_cache import RadixCache as Reference


class NoSplitOnMatch(Reference):
    def match_prefix(self, key):
        now = self._tick()
        key = self._page_aligned(tuple(key))
        node = self.root_node
        node.last_access_time = now
        value = []
        while key and self._child_key(key) in node.children:
            child = node.children[self._child_key(key)]
            child.last_access_time = now
            n = self._common_prefix_len(child.key, key) // self.page_size * self.page_size
            if n < len(child.key):
                break  # "only whole edges match"
            value.extend(child.value)
            node, key = child, key[n:]
        return value, node


class SplitMidPage(Reference):
    def match_prefix(self, key):
        now = self._tick()
        key = self._page_aligned(tuple(key))
        node = self.root_node
        node.last_access_time = now
        value = []
        while key and self._child_key(key) in node.children:
            child = node.children[self._child_key(key)]
            child.last_access_time = now
            n = self._common_prefix_len(child.key, key)  # not rounded to pages
            if n < len(child.key):
                node = self._split_node(child, n)
                value.extend(node.value)
                break
            value.extend(child.value)
            node, key = child, key[n:]
        return value, node

    def insert(self, key, value):
        now = self._tick()
        key = self._page_aligned(tuple(key))
        value = list(value)[: len(key)]
        node = self.root_node
        node.last_access_time = now
        total = 0
        while key and self._child_key(key) in node.children:
            node = node.children[self._child_key(key)]
            node.last_access_time = now
            n = self._common_prefix_len(node.key, key)
            total += n
            key, value = key[n:], value[n:]
            if n < len(node.key):
                node = self._split_node(node, n)
        if key:
            leaf = self._new_node(node)
            leaf.key, leaf.value, leaf.last_access_time = key, value, now
            node.children[self._child_key(key)] = leaf
            self.evictable_size_ += len(key)
        return total


class SplitDropsLock(Reference):
    def _split_node(self, child, split_len):
        parent = child.parent
        new = self._new_node(parent)
        new.key, new.value = child.key[:split_len], child.value[:split_len]
        new.last_access_time = child.last_access_time  # lock_ref left at 0
        child.key, child.value = child.key[split_len:], child.value[split_len:]
        child.parent = new
        new.children = {self._child_key(child.key): child}
        parent.children[self._child_key(new.key)] = new
        return new


class NoTouchOnMatch(Reference):
    def match_prefix(self, key):
        self._tick()
        key = self._page_aligned(tuple(key))
        node, value = self.root_node, []
        while key and self._child_key(key) in node.children:
            child = node.children[self._child_key(key)]
            n = self._common_prefix_len(child.key, key) // self.page_size * self.page_size
            if n < len(child.key):
                node = self._split_node(child, n)
                value.extend(node.value)
                break
            value.extend(child.value)
            node, key = child, key[n:]
        return value, node


def _evict(self, num_tokens, order, candidate, cascade=True):
    heap = [(order(n), n.node_id, n) for n in self._leaves() if candidate(n)]
    heapq.heapify(heap)
    freed = 0
    while freed < num_tokens and heap:
        x = heapq.heappop(heap)[2]
        self.token_to_kv_pool_allocator.free(x.value)
        freed += len(x.value)
        self._delete_leaf(x)
        p = x.parent
        if cascade and p is not self.root_node and not p.children and candidate(p):
            heapq.heappush(heap, (order(p), p.node_id, p))
    return freed


class EvictByCreation(Reference):
    def evict(self, num_tokens):
        return _evict(self, num_tokens, lambda n: n.node_id, lambda n: n.lock_ref == 0)


class IgnoresLockRef(Reference):
    def evict(self, num_tokens):
        return _evict(self, num_tokens, lambda n: n.last_access_time, lambda n: True)


class NoCascade(Reference):
    def evict(self, num_tokens):
        return _evict(self, num_tokens, lambda n: n.last_access_time, lambda n: n.lock_ref == 0, cascade=False)


class LockNodeOnly(Reference):
    def inc_lock_ref(self, node):
        if node is self.root_node:
            return 0
        delta = 0
        if node.lock_ref == 0:
            self.evictable_size_ -= len(node.key)
            self.protected_size_ += len(node.key)
            delta = -len(node.key)
        node.lock_ref += 1
        return delta

    def dec_lock_ref(self, node):
        if node is self.root_node:
            return 0
        delta = 0
        if node.lock_ref == 1:
            self.evictable_size_ += len(node.key)
            self.protected_size_ -= len(node.key)
            delta = len(node.key)
        node.lock_ref -= 1
        return delta


BUGS = {
    "no_split_on_match": NoSplitOnMatch, "split_mid_page": SplitMidPage, "split_drops_lock": SplitDropsLock,
    "no_touch_on_match": NoTouchOnMatch, "evict_by_creation": EvictByCreation,
    "ignores_lock_ref": IgnoresLockRef, "no_cascade": NoCascade, "lock_node_only": LockNodeOnly,
}
