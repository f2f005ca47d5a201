"""A paged radix tree with switchable mistakes (lab ``radix_cache``).

:func:`radix_model` builds SGLang 0.5.23's RadixCache (as kvlab.sglang mirrors it, with
``page_size`` >= 1 as SGLang has it) with one mistake switched on, for the lab's catalogue of
typical wrong implementations: a model is replayed on a divergence's scenario and must diverge
exactly where the learner's code did. With no mistake it is the lab's reference for page sizes
above 1 (kvlab.sglang's RadixCache has page size 1 only; on page size 1 a test keeps the two
equal).
"""

from __future__ import annotations

import heapq
from typing import Any

__all__ = ["radix_model"]


def radix_model(*, lru: bool = True, respect_lock: bool = True, split_on_match: bool = True,
                page_round: bool = True, touch_on_match: bool = True, cascade: bool = True,
                split_keeps_lock: bool = True, lock_ancestors: bool = True) -> Any:
    """SGLang's RadixCache with one mistake (each keyword's default is SGLang's way).

    Args:
        lru: Evict by (last_access_time, node_id); False: by node_id (creation order).
        respect_lock: Skip leaves with lock_ref > 0; False: evict them too.
        split_on_match: Split an edge where a match ends inside it; False: stop before it.
        page_round: Round a match on an edge down to whole pages; False: split mid-page.
        touch_on_match: match_prefix refreshes last_access_time; False: only insert does.
        cascade: A parent left without children becomes a candidate; False: it does not.
        split_keeps_lock: The node a split creates inherits lock_ref; False: starts at 0.
        lock_ancestors: inc/dec_lock_ref walk up to the root; False: the node only.
    """
    from kvlab.sglang import TreeNode

    class Model:
        def __init__(self, token_to_kv_pool_allocator: Any, page_size: int = 1) -> None:
            self.token_to_kv_pool_allocator = token_to_kv_pool_allocator
            self.page_size = page_size
            self._next_id, self.clock = 1, 0
            self.root_node = TreeNode(0)
            self.root_node.lock_ref = 1
            self.evictable_size_ = self.protected_size_ = 0

        def evictable_size(self) -> int:
            return self.evictable_size_

        def _ck(self, key: tuple) -> Any:
            return key[0] if self.page_size == 1 else tuple(key[: self.page_size])

        def _new(self, parent: Any) -> Any:
            node = TreeNode(self._next_id, parent)
            self._next_id += 1
            return node

        def _match_len(self, a: tuple, b: tuple) -> int:
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            return n // self.page_size * self.page_size if page_round else n

        def _walk(self, key: tuple, value: list | None, touch: bool) -> tuple[Any, list, int, tuple, list]:
            now = self.clock = self.clock + 1
            p = self.page_size
            key = key[: len(key) // p * p]
            value = None if value is None else value[: len(key)]
            node, got, total = self.root_node, [], 0
            if touch:
                node.last_access_time = now
            while key and self._ck(key) in node.children:
                child = node.children[self._ck(key)]
                if touch:
                    child.last_access_time = now
                n = self._match_len(child.key, key)
                total += n
                if n < len(child.key):
                    if value is None and not split_on_match:
                        break
                    node = self._split(child, n)
                    got += node.value
                    key = key[n:]
                    value = None if value is None else value[n:]
                    if value is None:
                        break
                    continue
                got += child.value
                node, key = child, key[n:]
                value = None if value is None else value[n:]
            return node, got, total, key, value or []

        def match_prefix(self, key: tuple) -> tuple[list[int], Any]:
            node, got, _, _, _ = self._walk(tuple(key), None, touch_on_match)
            return got, node

        def insert(self, key: tuple, value: list[int]) -> int:
            node, _, total, key, value = self._walk(tuple(key), list(value), True)
            if key:
                leaf = self._new(node)
                leaf.key, leaf.value, leaf.last_access_time = key, value, self.clock
                node.children[self._ck(key)] = leaf
                self.evictable_size_ += len(key)
            return total

        def _split(self, child: Any, n: int) -> Any:
            parent, new = child.parent, self._new(child.parent)
            new.key, new.value = child.key[:n], child.value[:n]
            new.lock_ref = child.lock_ref if split_keeps_lock else 0
            new.last_access_time = child.last_access_time
            child.key, child.value, child.parent = child.key[n:], child.value[n:], new
            new.children = {self._ck(child.key): child}
            parent.children[self._ck(new.key)] = new
            return new

        def _entry(self, node: Any) -> tuple:
            return (node.last_access_time if lru else 0, node.node_id, node)

        def evict(self, num_tokens: int) -> int:
            heap, stack = [], list(self.root_node.children.values())
            while stack:
                node = stack.pop()
                stack.extend(node.children.values())
                if not node.children and (node.lock_ref == 0 or not respect_lock):
                    heap.append(self._entry(node))
            heapq.heapify(heap)
            freed = 0
            while freed < num_tokens and heap:
                x = heapq.heappop(heap)[2]
                self.token_to_kv_pool_allocator.free(x.value)
                freed += len(x.value)
                del x.parent.children[self._ck(x.key)]
                self.evictable_size_ -= len(x.key)  # NOTE: as the skeleton's _delete_leaf
                parent = x.parent
                if cascade and parent is not self.root_node and not parent.children and \
                        (parent.lock_ref == 0 or not respect_lock):
                    heapq.heappush(heap, self._entry(parent))
            return freed

        def _lock(self, node: Any, step: int) -> int:
            delta = 0
            while node is not self.root_node:
                if node.lock_ref == (0 if step > 0 else 1):
                    self.evictable_size_ -= step * len(node.key)
                    self.protected_size_ += step * len(node.key)
                    delta -= step * len(node.key)
                node.lock_ref += step
                node = node.parent if lock_ancestors else self.root_node
            return delta

        def inc_lock_ref(self, node: Any) -> int:
            return self._lock(node, +1)

        def dec_lock_ref(self, node: Any) -> int:
            return self._lock(node, -1)

    return Model
