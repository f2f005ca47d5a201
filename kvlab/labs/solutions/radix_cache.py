"""Reference solution of lab ``radix_cache``: the notebook's TreeNode and RadixCache cells.

Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache of SGLang 0.5.23 (match_prefix,
_split_node, insert, evict, inc_lock_ref, dec_lock_ref; LRU policy), in kvlab.sglang's terms.
"""

from __future__ import annotations

import heapq

# --- notebook cell ---
class TreeNode:
    """One node of the radix tree: the edge from its parent.

    Given. ``key`` holds the edge's token ids (a tuple), ``value`` their KV slot ids (a list,
    ``len(value) == len(key)``), ``children`` maps a child's ``RadixCache._child_key`` to the
    child. ``lock_ref`` counts the running requests whose path goes through the node;
    ``last_access_time`` is the logical time of the last match or insert that passed here.

    Mirrors: sglang/srt/mem_cache/radix_cache.py::TreeNode
    """

    def __init__(self, node_id: int, parent: "TreeNode | None" = None) -> None:
        self.node_id = node_id
        self.parent = parent
        self.children: dict = {}
        self.key: tuple[int, ...] = ()
        self.value: list[int] = []
        self.lock_ref = 0
        self.last_access_time = 0

    def __repr__(self) -> str:
        return f"TreeNode({self.node_id}, key={self.key}, lock_ref={self.lock_ref}, last_access_time={self.last_access_time})"


class RadixCache:
    """SGLang's radix-tree prefix cache over a pool of KV slots (one slot per token).

    Given: the constructor, ``_tick`` (the logical clock: SGLang uses time.monotonic()),
    ``_new_node`` (the next node_id), ``_child_key``, ``_page_aligned``,
    ``_common_prefix_len``, ``_leaves``, ``_delete_leaf`` and the sizes.
    You write: match_prefix, _split_node, insert, evict, inc_lock_ref, dec_lock_ref.

    Invariant: ``evictable_size_ + protected_size_`` = tokens in the tree; a node's tokens count
    as protected while its lock_ref > 0, as evictable otherwise.

    Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache
    """

    def __init__(self, token_to_kv_pool_allocator, page_size: int = 1) -> None:
        self.token_to_kv_pool_allocator = token_to_kv_pool_allocator
        self.page_size = page_size
        self.reset()

    def reset(self) -> None:
        self._next_id = 1
        self.clock = 0
        self.root_node = TreeNode(0)
        self.root_node.lock_ref = 1  # never evicted
        self.evictable_size_ = 0
        self.protected_size_ = 0

    def evictable_size(self) -> int:
        return self.evictable_size_

    def protected_size(self) -> int:
        return self.protected_size_

    def _tick(self) -> int:
        """Advance the clock; call it once at the start of each match_prefix and insert."""
        self.clock += 1
        return self.clock

    def _new_node(self, parent: TreeNode) -> TreeNode:
        """A fresh node under ``parent`` (not yet in ``parent.children``), with the next node_id."""
        node = TreeNode(self._next_id, parent)
        self._next_id += 1
        return node

    def _child_key(self, key: tuple) -> object:
        """The ``children`` key of an edge starting with ``key``: its first token (page_size 1)
        or the tuple of its first page_size tokens."""
        return key[0] if self.page_size == 1 else tuple(key[: self.page_size])

    def _page_aligned(self, key: tuple) -> tuple:
        """``key`` cut to a whole number of pages."""
        return key[: len(key) // self.page_size * self.page_size]

    @staticmethod
    def _common_prefix_len(a: tuple, b: tuple) -> int:
        """How many leading tokens ``a`` and ``b`` share (tokens; not rounded to pages)."""
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    def _leaves(self) -> list[TreeNode]:
        """Every node without children (the root excluded), locked or not."""
        out, stack = [], list(self.root_node.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                out.append(node)
        return out

    def _delete_leaf(self, node: TreeNode) -> None:
        """Unlink the leaf ``node`` from its parent; its tokens leave evictable_size_."""
        del node.parent.children[self._child_key(node.key)]
        self.evictable_size_ -= len(node.key)

    def match_prefix(self, key: tuple) -> tuple[list[int], TreeNode]:
        """The KV slots of the longest cached prefix of ``key`` and the node where it ends.

        ``key`` is first cut to whole pages. From the root, follow the child whose
        ``_child_key`` is the key's: on an edge the match is the common prefix rounded down to
        whole pages. A whole edge matched: take its value and go on with the rest of the key.
        A match that ends inside an edge: split the edge there (``_split_node``), take the new
        node's value and stop. Every node passed (the root, each child looked at) gets
        ``last_access_time`` = this call's ``_tick()``.

        Returns:
            ``(value, last_node)``: the matched slot ids (tokens) and the deepest matched node
            (the root on a miss).
        """
        ### BEGIN SOLUTION
        now = self._tick()
        key = self._page_aligned(tuple(key))
        node = self.root_node
        node.last_access_time = now
        value: list[int] = []
        while key and self._child_key(key) in node.children:
            child = node.children[self._child_key(key)]
            child.last_access_time = now
            prefix_len = self._common_prefix_len(child.key, key) // self.page_size * self.page_size
            if prefix_len < len(child.key):
                node = self._split_node(child, prefix_len)
                value.extend(node.value)
                break
            value.extend(child.value)
            node = child
            key = key[prefix_len:]
        return value, node
        ### END SOLUTION

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Cut ``child``'s edge after ``split_len`` tokens (0 < split_len < len(child.key)).

        A new node (``_new_node``) takes the head of the edge and ``child``'s place under its
        parent; ``child`` keeps its node_id and the tail and hangs under the new node. The new
        node inherits ``child``'s lock_ref and last_access_time. Sizes do not change.

        Returns:
            The new node.
        """
        ### BEGIN SOLUTION
        parent = child.parent
        new = self._new_node(parent)
        new.key, new.value = child.key[:split_len], child.value[:split_len]
        new.lock_ref, new.last_access_time = child.lock_ref, child.last_access_time
        child.key, child.value = child.key[split_len:], child.value[split_len:]
        child.parent = new
        new.children = {self._child_key(child.key): child}
        parent.children[self._child_key(new.key)] = new
        return new
        ### END SOLUTION

    def insert(self, key: tuple, value: list[int]) -> int:
        """Add ``key`` with its slots ``value``; return how many leading tokens were cached.

        ``key`` is cut to whole pages (and ``value`` to the same length). Walk down as
        match_prefix does (each node passed gets this call's ``_tick()``), splitting an edge
        where the key leaves it; what is left of the key becomes a new leaf (``_new_node``)
        with the rest of ``value`` and the same time, its tokens evictable. The tree keeps its
        own slots for the part already cached (the caller frees its duplicates).

        Returns:
            The length of the prefix that was already in the tree (tokens).
        """
        ### BEGIN SOLUTION
        now = self._tick()
        key = self._page_aligned(tuple(key))
        value = list(value)[: len(key)]
        node = self.root_node
        node.last_access_time = now
        total_prefix_length = 0
        while key and self._child_key(key) in node.children:
            node = node.children[self._child_key(key)]
            node.last_access_time = now
            prefix_len = self._common_prefix_len(node.key, key) // self.page_size * self.page_size
            total_prefix_length += prefix_len
            key, value = key[prefix_len:], value[prefix_len:]
            if prefix_len < len(node.key):
                node = self._split_node(node, prefix_len)
        if key:
            leaf = self._new_node(node)
            leaf.key, leaf.value, leaf.last_access_time = key, value, now
            node.children[self._child_key(key)] = leaf
            self.evictable_size_ += len(key)
        return total_prefix_length
        ### END SOLUTION

    def evict(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` slots, least recently used unlocked leaf first.

        Candidates are the leaves (``_leaves``) with lock_ref 0, ordered by
        (last_access_time, node_id). Take the first: give its value back to the pool
        (``self.token_to_kv_pool_allocator.free(node.value)``) and ``_delete_leaf`` it; a parent
        left with no children and lock_ref 0 (not the root) becomes a candidate in turn. Stop
        once ``num_tokens`` are freed or no candidate is left.

        Returns:
            Tokens freed (may exceed ``num_tokens`` by part of the last leaf).
        """
        ### BEGIN SOLUTION
        heap = [(n.last_access_time, n.node_id, n) for n in self._leaves() if n.lock_ref == 0]
        heapq.heapify(heap)
        num_evicted = 0
        while num_evicted < num_tokens and heap:
            _, _, x = heapq.heappop(heap)
            self.token_to_kv_pool_allocator.free(x.value)
            num_evicted += len(x.value)
            self._delete_leaf(x)
            parent = x.parent
            if parent is not self.root_node and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access_time, parent.node_id, parent))
        return num_evicted
        ### END SOLUTION

    def inc_lock_ref(self, node: TreeNode) -> int:
        """lock_ref += 1 on ``node`` and each ancestor up to (not including) the root.

        A node going from 0 to 1 moves its tokens from evictable_size_ to protected_size_.

        Returns:
            The change of evictable_size_ (tokens, <= 0).
        """
        ### BEGIN SOLUTION
        delta = 0
        while node is not self.root_node:
            if node.lock_ref == 0:
                self.evictable_size_ -= len(node.key)
                self.protected_size_ += len(node.key)
                delta -= len(node.key)
            node.lock_ref += 1
            node = node.parent
        return delta
        ### END SOLUTION

    def dec_lock_ref(self, node: TreeNode) -> int:
        """lock_ref -= 1 on ``node`` and each ancestor up to (not including) the root.

        A node going from 1 to 0 moves its tokens back to evictable_size_.

        Returns:
            The change of evictable_size_ (tokens, >= 0).
        """
        ### BEGIN SOLUTION
        delta = 0
        while node is not self.root_node:
            if node.lock_ref == 1:
                self.evictable_size_ += len(node.key)
                self.protected_size_ -= len(node.key)
                delta += len(node.key)
            node.lock_ref -= 1
            node = node.parent
        return delta
        ### END SOLUTION


SOLUTION = RadixCache
