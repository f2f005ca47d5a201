"""A token-granular radix-tree prefix cache, as SGLang's RadixCache keeps one.

Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache of SGLang 0.5.23 with page_size 1
(every token is its own unit: a prefix can be shared up to the exact token, not only to a
block boundary) and the LRU eviction policy (SGLang's default).

Each edge holds a run of token ids (``key``) and the KV slots of those tokens (``value``, slot
ids from a ``TokenToKVPoolAllocator``); children are keyed by their first token::

    root ─[1 2 3 4]─ n1 ─[5 6]─ n2        two prompts [1 2 3 4 5 6] and [1 2 3 4 9]
                        └─[9]─── n3       share n1's 4 slots

* ``match_prefix`` walks down and returns the slots of the longest cached prefix; a match that
  ends inside an edge *splits* it so the matched part becomes its own node.
* ``insert`` adds a request's tokens and slots, splitting where it diverges, and returns how
  much was already there (the caller frees its duplicate slots).
* ``checkpoint`` is how a request's KV enters the tree, after its prefill and when it finishes:
  insert (and split the leaf at the prompt's end), free the duplicates, match again, move the
  request's lock to the new last node.
* ``inc_lock_ref`` / ``dec_lock_ref`` count running requests on every node of a path; a node
  with lock_ref > 0 is *protected*, otherwise *evictable*.
* ``evict`` frees least-recently-used *leaves* with lock_ref 0 until enough tokens are freed; a
  parent whose last child went becomes a leaf and a candidate in turn.

Differs from SGLang: time is a logical clock (one tick per match_prefix / insert, so runs are
reproducible) and LRU ties go to the lower node_id; there is no host (hierarchical) cache, no
page size > 1, no EAGLE bigram keys, no extra_key / cache_salt namespaces, no eviction policy
but LRU (so no node priority: 0.5.23's checkpoint gives the prompt node priority + 1, which only
its "priority" policy reads), no KV events and no metrics. Keys are tuples of ints and values
lists of slot ids (SGLang: RadixKey over an int array, int64 tensors). Node ids are kvlab's
(root = 0, then creation order).

Examples:
    >>> from kvlab.sglang.mem_cache.allocator import TokenToKVPoolAllocator
    >>> cache = RadixCache(TokenToKVPoolAllocator(16))
    >>> cache.insert((1, 2, 3, 4), cache.token_to_kv_pool_allocator.alloc(4))
    0
    >>> value, node = cache.match_prefix((1, 2, 9)); value, node.key
    ([1, 2], (1, 2))
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import Any

from kvlab.sglang.mem_cache.allocator.token import TokenToKVPoolAllocator

__all__ = ["RadixCache", "TreeNode"]


class TreeNode:
    """One node: the edge from its parent (key = token ids, value = their KV slots).

    Mirrors: sglang/srt/mem_cache/radix_cache.py::TreeNode.

    Attributes:
        node_id: kvlab's id (root 0, then creation order).
        parent: The parent node (None for the root).
        children: First token of the child's key -> child.
        key: Token ids on the edge (tokens).
        value: KV slot ids of those tokens, ``len(value) == len(key)``.
        lock_ref: Running requests whose path goes through this node.
        last_access_time: Logical clock of the last match/insert that passed here.
    """

    __slots__ = ("children", "key", "last_access_time", "lock_ref", "node_id", "parent", "value")

    def __init__(self, node_id: int, parent: TreeNode | None = None) -> None:
        self.node_id = node_id
        self.parent = parent
        self.children: dict[int, TreeNode] = {}
        self.key: tuple[int, ...] = ()
        self.value: list[int] = []
        self.lock_ref = 0
        self.last_access_time = 0

    def __repr__(self) -> str:
        return (
            f"TreeNode({self.node_id}, key={self.key}, lock_ref={self.lock_ref}, "
            f"last_access_time={self.last_access_time})"
        )


def _common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class RadixCache:
    """SGLang's radix-tree prefix cache over a token pool (see the module docstring).

    Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache (page_size 1).

    Args:
        token_to_kv_pool_allocator: The pool whose slots the tree's values hold.
        recorder: None (off) or a ``kvlab.sglang.recording.RadixRecorder``.

    Attributes:
        root_node: The root (empty key, lock_ref 1 so it is never evicted).
        evictable_size_: Tokens in nodes with lock_ref 0 (tokens).
        protected_size_: Tokens in nodes with lock_ref > 0 (tokens).
    """

    def __init__(self, token_to_kv_pool_allocator: TokenToKVPoolAllocator, recorder: Any = None):
        if not isinstance(token_to_kv_pool_allocator, TokenToKVPoolAllocator):
            raise TypeError(
                "token_to_kv_pool_allocator must be a TokenToKVPoolAllocator, got "
                f"{type(token_to_kv_pool_allocator).__name__}"
            )
        self.token_to_kv_pool_allocator = token_to_kv_pool_allocator
        self.recorder = recorder
        self.reset()

    def reset(self) -> None:
        """Empty tree (the pool is not touched: call it on a fresh pool)."""
        self._next_id = 1
        self.clock = 0
        self.root_node = TreeNode(0)
        self.root_node.lock_ref = 1
        # NOTE: evictable_size_ + protected_size_ == tokens in the tree, always.
        self.evictable_size_ = 0
        self.protected_size_ = 0

    # ------------------------------------------------------------------ sizes and walks
    def evictable_size(self) -> int:
        """Tokens that evict() could free (tokens)."""
        return self.evictable_size_

    def protected_size(self) -> int:
        """Tokens locked by running requests (tokens)."""
        return self.protected_size_

    def total_size(self) -> int:
        """Tokens held by the tree (tokens)."""
        return sum(len(n.key) for n in self.nodes())

    def nodes(self) -> Iterator[TreeNode]:
        """Every node except the root, depth first, children in insertion order."""
        stack = list(reversed(self.root_node.children.values()))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children.values()))

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    # ------------------------------------------------------------------ match
    def match_prefix(
        self, key: Sequence[int], request_id: str | None = None
    ) -> tuple[list[int], TreeNode]:
        """The KV slots of the longest cached prefix of ``key``, and the node where it ends.

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache.match_prefix. Every node on
        the path gets the current time; a match ending inside an edge splits that edge.

        Args:
            key: Token ids to look up.
            request_id: Recorded with the lookup (optional).

        Returns:
            ``(value, last_node)``: slot ids of the matched tokens (len = hit in tokens) and the
            deepest matched node (the root on a miss).
        """
        key = tuple(key)
        now = self._tick()
        node = self.root_node
        node.last_access_time = now
        value: list[int] = []
        touched: list[int] = []
        while key and key[0] in node.children:
            child = node.children[key[0]]
            child.last_access_time = now
            touched.append(child.node_id)
            prefix_len = _common_prefix_len(child.key, key)
            if prefix_len < len(child.key):
                node = self._split_node(child, prefix_len)
                touched.append(node.node_id)
                value.extend(node.value)
                break
            value.extend(child.value)
            node = child
            key = key[prefix_len:]
        if self.recorder is not None:
            self.recorder.match(request_id, len(value), node.node_id, tuple(touched), now)
        return value, node

    # ------------------------------------------------------------------ insert
    def insert(self, key: Sequence[int], value: Sequence[int]) -> int:
        """Add ``key`` with its slots; return how many leading tokens were already cached.

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache.insert. The tree keeps its
        own slots for the already-cached prefix: the caller frees its duplicates
        (``value[cached_len_before : returned]``).

        Args:
            key: Token ids (tokens).
            value: Their KV slot ids, same length.

        Returns:
            The length of the prefix that was already in the tree (tokens).

        Raises:
            ValueError: If key and value differ in length (nothing changed).
        """
        key, value = tuple(key), list(value)
        if len(key) != len(value):
            raise ValueError(f"insert: key has {len(key)} tokens but value {len(value)} slots")
        now = self._tick()
        node = self.root_node
        node.last_access_time = now
        total_prefix_length = 0
        touched: list[int] = []
        while key and key[0] in node.children:
            node = node.children[key[0]]
            node.last_access_time = now
            touched.append(node.node_id)
            prefix_len = _common_prefix_len(node.key, key)
            total_prefix_length += prefix_len
            key, value = key[prefix_len:], value[prefix_len:]
            if prefix_len < len(node.key):
                node = self._split_node(node, prefix_len)
                touched.append(node.node_id)
        if key:
            node = self._add_leaf(node, key, value, now)
            touched.append(node.node_id)
        if self.recorder is not None:
            self.recorder.insert(node.node_id, total_prefix_length, tuple(touched), now)
        return total_prefix_length

    def _add_leaf(self, parent: TreeNode, key: tuple[int, ...], value: list[int], now: int):
        leaf = TreeNode(self._next_id, parent)
        self._next_id += 1
        leaf.key, leaf.value, leaf.last_access_time = key, value, now
        parent.children[key[0]] = leaf
        self.evictable_size_ += len(key)
        if self.recorder is not None:
            self.recorder.node_added(leaf.node_id, parent.node_id, key, value, now)
        return leaf

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Cut ``child``'s edge after ``split_len`` tokens; the head becomes a new parent node.

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache._split_node (the new node
        inherits lock_ref and, in kvlab, last_access_time; child keeps its node_id and the tail).
        """
        parent = child.parent
        assert parent is not None and 0 < split_len < len(child.key)
        new = TreeNode(self._next_id, parent)
        self._next_id += 1
        new.key, new.value = child.key[:split_len], child.value[:split_len]
        new.lock_ref, new.last_access_time = child.lock_ref, child.last_access_time
        child.key, child.value = child.key[split_len:], child.value[split_len:]
        child.parent = new
        new.children = {child.key[0]: child}
        parent.children[new.key[0]] = new
        if self.recorder is not None:
            self.recorder.node_split(child.node_id, new.node_id, split_len)
        return new

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: TreeNode) -> int:
        """lock_ref += 1 on ``node`` and every ancestor (not the root).

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache.inc_lock_ref

        Returns:
            The change of evictable_size_ (tokens, <= 0).
        """
        delta = 0
        start = node
        while node is not self.root_node:
            if node.lock_ref == 0:
                self.evictable_size_ -= len(node.key)
                self.protected_size_ += len(node.key)
                delta -= len(node.key)
            node.lock_ref += 1
            node = node.parent
        if self.recorder is not None and start is not self.root_node:
            self.recorder.lock(start.node_id, +1)
        return delta

    def dec_lock_ref(self, node: TreeNode) -> int:
        """lock_ref -= 1 on ``node`` and every ancestor (not the root).

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache.dec_lock_ref

        Returns:
            The change of evictable_size_ (tokens, >= 0).

        Raises:
            ValueError: If a node on the path is not locked (nothing changed).
        """
        path = []
        walk = node
        while walk is not self.root_node:
            if walk.lock_ref < 1:
                raise ValueError(f"dec_lock_ref: node {walk.node_id} is not locked")
            path.append(walk)
            walk = walk.parent
        delta = 0
        for n in path:
            if n.lock_ref == 1:
                self.evictable_size_ += len(n.key)
                self.protected_size_ -= len(n.key)
                delta += len(n.key)
            n.lock_ref -= 1
        if self.recorder is not None and path:
            self.recorder.lock(node.node_id, -1)
        return delta

    # ------------------------------------------------------------------ checkpoint
    def checkpoint(self, req: Any, up_to: int) -> None:
        """Put ``req``'s first ``up_to`` tokens into the tree and lock the node where they end.

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache.checkpoint (0.5.23), which
        ``checkpoint_kv_cache`` calls after a prefill and ``release_kv_cache`` when a request
        finishes: insert the tokens with their slots, split the leaf at the prompt's end (so
        eviction can drop the output's KV and keep the prompt's), free the request's slots the
        tree already held (duplicates), match the tokens again and take the tree's slots into
        the request's row, then move the request's lock from its old last node to the new one.

        Args:
            req: A ``kvlab.sglang.managers.schedule_batch.Req`` (or any object with fill_ids,
                origin_input_ids, kv_indices, cache_protected_len, last_node and rid).
            up_to: Tokens to put in the tree (tokens), at most ``len(req.kv_indices)``.

        Raises:
            ValueError: If up_to is not an int in 0..len(req.kv_indices) or below the
                protected prefix (nothing changed).
        """
        n = len(req.kv_indices)
        if isinstance(up_to, bool) or not isinstance(up_to, int) or not 0 <= up_to <= n:
            raise ValueError(f"checkpoint: up_to must be an int in 0..{n} (tokens with KV), "
                             f"got {up_to!r}")  # fmt: skip
        if up_to < req.cache_protected_len:
            raise ValueError(f"checkpoint: up_to {up_to} is below the {req.cache_protected_len} "
                             "tokens the tree already owns for this request")  # fmt: skip
        key = tuple(req.fill_ids[:up_to])
        self._insert_cache(req, key)
        value, new_last_node = self.match_prefix(key, req.rid)
        assert len(value) == len(key)  # NOTE: the tree holds every inserted token now
        protected = req.cache_protected_len
        req.kv_indices[protected : len(value)] = value[protected:]
        req.cache_protected_len = len(value)
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(new_last_node)
        req.last_node = new_last_node

    def _insert_cache(self, req: Any, key: tuple[int, ...]) -> int:
        """Insert ``key``, split it at the prompt's end, free the duplicate slots.

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache._insert_cache (split_prompt on,
        as checkpoint calls it).

        Returns:
            The tokens that were already in the tree (tokens).
        """
        values = req.kv_indices[: len(key)]
        prefix_len = self.insert(key, values)
        num_prompt_tokens = len(req.origin_input_ids)
        if 0 < num_prompt_tokens < len(key):
            # NOTE: a re-insert of the prompt only changes the tree's shape: its leaf is split.
            self.insert(key[:num_prompt_tokens], values[:num_prompt_tokens])
        self.token_to_kv_pool_allocator.free(values[req.cache_protected_len : prefix_len])
        return prefix_len

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` slots from unlocked leaves, least recently used first.

        Mirrors: sglang/srt/mem_cache/radix_cache.py::RadixCache.evict. Stops early when no
        unlocked leaf is left.

        Args:
            num_tokens: Tokens to free (tokens), >= 0.

        Returns:
            Tokens freed (tokens); may exceed ``num_tokens`` by part of the last leaf.

        Raises:
            ValueError: If num_tokens is negative or not an int.
        """
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
            raise ValueError(f"num_tokens must be an int >= 0 (tokens), got {num_tokens!r}")
        heap = self._collect_leaves()
        heapq.heapify(heap)
        num_evicted = 0
        while num_evicted < num_tokens and heap:
            _, _, x = heapq.heappop(heap)
            if x.lock_ref > 0:
                continue
            self.token_to_kv_pool_allocator.free(x.value)
            num_evicted += len(x.value)
            self._delete_leaf(x)
            parent = x.parent
            if parent is not self.root_node and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access_time, parent.node_id, parent))
        return num_evicted

    def _collect_leaves(self) -> list[tuple[int, int, TreeNode]]:
        """(last_access_time, node_id, node) of every leaf, for evict's heap.

        NOTE: SGLang 0.5.23 keeps its evictable leaves in a set updated on every change
        (``_update_leaf_status``); kvlab walks the tree at each evict (no generator: the walk
        dominated what-if replays) and skips locked leaves when popping: the same victims.
        """
        out = []
        stack = list(self.root_node.children.values())
        while stack:
            node = stack.pop()
            children = node.children
            if children:
                stack.extend(children.values())
            else:
                out.append((node.last_access_time, node.node_id, node))
        return out

    def _delete_leaf(self, node: TreeNode) -> None:
        parent = node.parent
        assert parent is not None and not node.children
        del parent.children[node.key[0]]
        self.evictable_size_ -= len(node.key)
        if self.recorder is not None:
            self.recorder.node_evicted(node.node_id, len(node.key))

    # ------------------------------------------------------------------ views
    def all_prefixes(self) -> list[tuple[int, ...]]:
        """The token ids from the root to every leaf (each is matchable in full)."""
        out = []
        for n in self.nodes():
            if not n.children:
                out.append(self.path_key(n))
        return out

    def path_key(self, node: TreeNode) -> tuple[int, ...]:
        """Token ids from the root down to ``node`` (inclusive)."""
        parts = []
        while node is not self.root_node and node is not None:
            parts.append(node.key)
            node = node.parent
        return tuple(t for part in reversed(parts) for t in part)

    def snapshot(self) -> Any:
        """The tree as a ``kvlab.sglang.recording.RadixSnapshot`` (what the views draw)."""
        from kvlab.sglang.recording import radix_snapshot  # NOTE: recording builds on this module

        return radix_snapshot(self)

    def __repr__(self) -> str:
        return (
            f"RadixCache(nodes={sum(1 for _ in self.nodes())}, evictable={self.evictable_size_}, "
            f"protected={self.protected_size_}, free_slots="
            f"{self.token_to_kv_pool_allocator.available_size()})"
        )
