"""SGLang's radix cache driven by named tree calls (lab ``radix_cache``).

:class:`RadixSide` holds a radix tree (the learner's class, kvlab.sglang's ``RadixCache`` or a
paged model) over kvlab's ``TokenToKVPoolAllocator`` and performs one tree or pool call per
operation, with explicit arguments: ``match_prefix(key)``, ``insert(key, value)``,
``inc_lock_ref(path)`` / ``dec_lock_ref(path)`` (the node a match returned, named by its tokens
from the root), ``evict(num_tokens)``, ``alloc(n)``, ``free(slots)``.

:func:`record_radix_ops` generates a workload against one side as SGLang 0.5.23's scheduler
drives its tree (``kvlab.sglang.mem_cache.common`` and ``RadixCache.checkpoint``): admit
(match the prompt but its last token, lock, evict the shortfall, allocate), checkpoint after the
prefill (insert the page-aligned tokens, split at the prompt's end, free the duplicates, match
again, move the lock), decode one slot at a time (retracting the newest request when the pool is
full), finish (checkpoint, free the request's own slots, unlock) and retract (free, unlock).
Prompts share prefixes over a tiny vocabulary and pools are small, so splits and evictions are
frequent.
"""

from __future__ import annotations

import functools
import gzip
import random
from importlib import resources
from typing import Any

from kvlab.labs.workloads import Recording, Step

__all__ = ["RadixSide", "load_radix_recordings", "record_radix_ops", "tree_state"]

RADIX_SOURCE = "SGLang 0.5.23 (kvlab.sglang)"
"""Who decided the shipped radix recordings: kvlab.sglang, exact against SGLang 0.5.23."""


def _path(node: Any, root: Any) -> list[int]:
    parts = []
    while node is not None and node is not root:
        parts.append(list(node.key))
        node = node.parent
    return [t for part in reversed(parts) for t in part]


def tree_state(tree: Any) -> dict:
    """The tree and pool as plain values: nodes sorted by their tokens from the root.

    ``tree`` lists ``[path, value]`` per node (every node but the root); ``node_id``,
    ``lock_ref`` and ``last_access_time`` are in the same order.
    """
    nodes, stack = [], [(tree.root_node, [])]
    while stack:
        node, path = stack.pop()
        for child in node.children.values():
            p = path + [int(t) for t in child.key]
            nodes.append((p, child))
            stack.append((child, p))
    nodes.sort(key=lambda pn: pn[0])
    pool = tree.token_to_kv_pool_allocator
    return {
        "tree": [[p, [int(v) for v in n.value]] for p, n in nodes],
        "node_id": [n.node_id for _, n in nodes],
        "lock_ref": [n.lock_ref for _, n in nodes],
        "last_access_time": [n.last_access_time for _, n in nodes],
        "evictable_size_": tree.evictable_size_,
        "protected_size_": tree.protected_size_,
        "free slots": list(pool.free_slots),
    }


class RadixSide:
    """A radix tree over a ``TokenToKVPoolAllocator(pool_tokens)``, driven by named calls.

    Args:
        config: ``{"pool_tokens": n, "page_size": p}``.
        cache_cls: The tree class; built as ``cache_cls(allocator)`` for page size 1 and
            ``cache_cls(allocator, page_size=p)`` otherwise. Default: kvlab.sglang's
            ``RadixCache`` for page size 1, kvlab's paged model otherwise.
    """

    def __init__(self, config: dict, cache_cls: Any = None) -> None:
        from kvlab.sglang import RadixCache, TokenToKVPoolAllocator

        page_size = config["page_size"]
        if cache_cls is None:
            from kvlab.labs.radix_model import radix_model

            cache_cls = RadixCache if page_size == 1 else radix_model()
        pool = TokenToKVPoolAllocator(config["pool_tokens"])
        self.tree = cache_cls(pool) if page_size == 1 else cache_cls(pool, page_size=page_size)
        self.nodes: dict[tuple, Any] = {}

    def call(self, op: str, args: list) -> Any:
        tree = self.tree
        if op == "match_prefix":
            value, node = tree.match_prefix(tuple(args[0]))
            path = _path(node, tree.root_node)
            self.nodes[tuple(path)] = node
            return [[int(v) for v in value], path]
        if op == "insert":
            return tree.insert(tuple(args[0]), list(args[1]))
        if op in ("inc_lock_ref", "dec_lock_ref"):
            node = self.nodes[tuple(args[0])] if args[0] else tree.root_node
            return getattr(tree, op)(node)
        if op == "evict":
            return tree.evict(args[0])
        if op == "alloc":
            return tree.token_to_kv_pool_allocator.alloc(args[0])
        if op == "free":
            tree.token_to_kv_pool_allocator.free(list(args[0]))
            return None
        raise ValueError(f"unknown operation {op!r}")

    def state(self) -> dict:
        return tree_state(self.tree)


class _Req:
    __slots__ = ("rid", "prompt", "tokens", "kv", "protected", "last", "max_out")

    def __init__(self, rid: str, prompt: list[int], max_out: int) -> None:
        self.rid, self.prompt, self.tokens, self.max_out = rid, list(prompt), list(prompt), max_out
        self.kv: list[int] = []
        self.protected = 0
        self.last: list[int] = []


def record_radix_ops(side: RadixSide, seed: int, num_ops: int, source: str = "kvlab") -> Recording:
    """A random SGLang-like workload on ``side`` (see the module docstring)."""
    config = {"pool_tokens": side.tree.token_to_kv_pool_allocator.size,
              "page_size": getattr(side.tree, "page_size", 1)}  # fmt: skip
    page = config["page_size"]
    r = random.Random(f"radix-{seed}")
    rec = Recording("radix", config, source=source, initial=side.state())
    pool = side.tree.token_to_kv_pool_allocator
    systems = [[r.randrange(4) for _ in range(r.randint(2, 3 * page + 4))] for _ in range(3)]
    history: list[list[int]] = []
    waiting: list[_Req] = []
    running: list[_Req] = []

    def call(op: str, *args: Any) -> Any:
        args_copy = [list(a) if isinstance(a, (list, tuple)) else a for a in args]
        want = side.call(op, [list(a) if isinstance(a, list) else a for a in args_copy])
        rec.steps.append(Step(op, args_copy, want, side.state()))
        return want

    def make_room(n: int) -> bool:
        if pool.available_size() + side.tree.evictable_size() < n:
            return False
        if n > pool.available_size():
            call("evict", n - pool.available_size())  # evict_to_free_tokens: the shortfall
        return True

    def checkpoint(req: _Req, up_to: int) -> None:
        n = up_to // page * page
        key, values = req.tokens[:n], req.kv[:n]
        prefix_len = call("insert", key, values)
        num_prompt = len(req.prompt) // page * page
        if 0 < num_prompt < n:
            call("insert", key[:num_prompt], values[:num_prompt])  # split at the prompt's end
        if values[req.protected : prefix_len]:
            call("free", values[req.protected : prefix_len])
        value, path = call("match_prefix", key)
        req.kv[req.protected : len(value)] = value[req.protected :]
        req.protected = len(value)
        call("dec_lock_ref", req.last)
        call("inc_lock_ref", path)
        req.last = path

    def release(req: _Req, finished: bool) -> None:
        if finished:
            checkpoint(req, len(req.kv))
        if req.kv[req.protected :]:
            call("free", req.kv[req.protected :])
        call("dec_lock_ref", req.last)
        req.kv, req.protected, req.last = [], 0, []

    for n in range(num_ops):
        kind = r.choices(["arrive", "admit", "decode", "finish"], [2, 3, 5, 2])[0]
        if kind == "arrive" or (kind == "admit" and not waiting):
            base = r.choice(systems + history[-4:])
            prompt = base[: r.randint(1, len(base))] + [r.randrange(4) for _ in range(r.randint(0, 2 * page + 2))]
            waiting.append(_Req(f"r{n}", prompt or [0], r.randint(1, 2 * page + 2)))
        elif kind == "admit":
            req = waiting[0]
            value, path = call("match_prefix", req.tokens[:-1])
            call("inc_lock_ref", path)
            need = len(req.tokens) - len(value)
            if not make_room(need):
                call("dec_lock_ref", path)
                if not running:
                    waiting.pop(0)  # can never fit: dropped
                continue
            waiting.pop(0)
            req.kv, req.protected, req.last = list(value) + call("alloc", need), len(value), path
            running.append(req)
            checkpoint(req, len(req.tokens))  # the prefill's KV enters the tree
        elif kind == "decode" and running:
            req = r.choice(running)
            if len(req.tokens) - len(req.prompt) >= req.max_out:
                continue
            while not make_room(1):
                victim = running.pop()  # retract the newest request; its prefix stays cached
                release(victim, finished=False)  # keeps its outputs: re-prefilled later
                waiting.insert(0, victim)
                if victim is req:
                    break
            else:
                req.tokens.append(r.randrange(4))
                req.kv += call("alloc", 1)
        elif kind == "finish" and running:
            req = running.pop(r.randrange(len(running)))
            release(req, finished=True)
            history.append(req.tokens)
    return rec


@functools.cache
def load_radix_recordings() -> tuple[Recording, ...]:
    """The shipped recordings of kvlab.sglang's decisions (``kvlab/labs/data/radix.cbor.gz``)."""
    from kvlab.labs.fixtures import decode_recordings

    data = resources.files("kvlab.labs").joinpath("data", "radix.cbor.gz").read_bytes()
    return tuple(decode_recordings(data)[1])


def encode_radix_recordings(recordings: list[Recording]) -> bytes:
    """The recordings as the shipped file (``fixtures``' format; the header names its source)."""
    from kvlab.labs.fixtures import encode_recordings

    data = encode_recordings("radix", recordings, RADIX_SOURCE)
    assert gzip.decompress(data)  # NOTE: the same gzip'd CBOR the vLLM fixtures use
    return data
