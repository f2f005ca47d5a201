"""Scenarios that call one piece directly: the free queue's operations, block hashing.

:class:`QueueSide` builds ``FreeKVCacheBlockQueue(blocks)`` over fresh ``KVCacheBlock`` s and
performs popleft / popleft_n / remove / append / append_n / get_all_free_blocks by block id;
:class:`HashSide` calls ``hash_block_tokens`` and hashes whole requests with a
``get_request_block_hasher``. Like ``ManagerSide`` they are built from a namespace of classes:
kvlab's (a learner's piece in place) or vLLM 0.22.1's, when the fixtures are recorded.

A call that raises returns ``{"raises": "ValueError"}`` (vLLM's popleft on an empty queue does).
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from kvlab.labs.workloads import Recording, Step

__all__ = ["HashSide", "QueueSide", "kvlab_direct_namespace", "record_hash_cases", "record_queue_ops"]


def kvlab_direct_namespace() -> SimpleNamespace:
    """kvlab.core's block, queue and hashing names, as vLLM spells them."""
    from kvlab.core import kv_cache_utils
    from kvlab.core.request import Request
    from kvlab.core.request_params import LoRARequest, MultiModalFeatureSpec, PlaceholderRange, SamplingParams

    return SimpleNamespace(
        KVCacheBlock=kv_cache_utils.KVCacheBlock, FreeKVCacheBlockQueue=kv_cache_utils.FreeKVCacheBlockQueue,
        hash_block_tokens=kv_cache_utils.hash_block_tokens,
        get_request_block_hasher=kv_cache_utils.get_request_block_hasher,
        Request=Request, SamplingParams=SamplingParams, LoRARequest=LoRARequest,
        MultiModalFeatureSpec=MultiModalFeatureSpec, PlaceholderRange=PlaceholderRange,
        hash_fns={"sha256": kv_cache_utils.sha256, "sha256_cbor": kv_cache_utils.sha256_cbor},
    )  # fmt: skip


def _block_id(block: Any) -> Any:
    """A returned block as its id (anything else, e.g. None, as it is: it will be reported)."""
    return getattr(block, "block_id", block)


def raised(exc: BaseException) -> dict:
    """How a raising call is recorded."""
    return {"raises": type(exc).__name__}


class QueueSide:
    """``FreeKVCacheBlockQueue(blocks)`` over ``config["num_blocks"]`` fresh blocks (ids 0..n-1).

    Args:
        config: ``{"num_blocks": n}``.
        m: Namespace with ``KVCacheBlock`` and ``FreeKVCacheBlockQueue``.
        queue_cls: The queue class to test (default ``m.FreeKVCacheBlockQueue``).
    """

    def __init__(self, config: dict, m: SimpleNamespace | None = None, queue_cls: Any = None) -> None:
        m = m or kvlab_direct_namespace()
        self.blocks = [m.KVCacheBlock(i) for i in range(config["num_blocks"])]
        self.queue = (queue_cls or m.FreeKVCacheBlockQueue)(list(self.blocks))

    def popleft(self) -> Any:
        return _block_id(self.queue.popleft())

    def popleft_n(self, n: int) -> Any:
        blocks = self.queue.popleft_n(n)
        return [_block_id(b) for b in blocks] if isinstance(blocks, (list, tuple)) else _block_id(blocks)

    def remove(self, block_id: int) -> None:
        self.queue.remove(self.blocks[block_id])

    def append(self, block_id: int) -> None:
        self.queue.append(self.blocks[block_id])

    def append_n(self, block_ids: list[int]) -> None:
        self.queue.append_n([self.blocks[i] for i in block_ids])

    def get_all_free_blocks(self) -> Any:
        blocks = self.queue.get_all_free_blocks()
        return [_block_id(b) for b in blocks] if isinstance(blocks, (list, tuple)) else _block_id(blocks)

    def state(self) -> dict:
        return {"free queue": self.get_all_free_blocks(), "num_free_blocks": self.queue.num_free_blocks}

    def call(self, op: str, args: list) -> Any:
        if op not in ("popleft", "popleft_n", "remove", "append", "append_n", "get_all_free_blocks"):
            raise ValueError(f"unknown operation {op!r}")
        try:
            return getattr(self, op)(*args)
        except (ValueError, AssertionError) as exc:
            if op == "popleft" and not self.queue.num_free_blocks:
                return raised(exc)  # vLLM: "No free blocks available"
            raise


def record_queue_ops(side: QueueSide, num_blocks: int, seed: int, num_ops: int,
                     source: str = "kvlab") -> Recording:
    """Random valid queue operations on ``side``, ending with a popleft of an empty queue."""
    r = random.Random(f"queue-{seed}")
    rec = Recording("queue", {"num_blocks": num_blocks}, source=source, initial=side.state())
    queued = list(range(num_blocks))
    outside: list[int] = []

    def call(op: str, *args: Any) -> Any:
        want = side.call(op, list(args))
        rec.steps.append(Step(op, list(args), want, side.state()))
        return want

    for _ in range(num_ops):
        kind = r.choices(["popleft", "popleft_n", "remove", "append", "append_n", "all"],
                         [3, 3, 4, 3, 3, 1])[0]  # fmt: skip
        if kind in ("popleft", "popleft_n", "remove") and not queued:
            kind = "append_n"
        if kind in ("append", "append_n") and not outside:
            kind = "remove"
        if kind == "popleft":
            outside.append(queued.pop(0))
            call("popleft")
        elif kind == "popleft_n":
            n = r.randint(0, min(4, len(queued)))
            outside += queued[:n]
            del queued[:n]
            call("popleft_n", n)
        elif kind == "remove":
            block_id = r.choice(queued)
            queued.remove(block_id)
            outside.append(block_id)
            call("remove", block_id)
        elif kind == "append":
            block_id = outside.pop(r.randrange(len(outside)))
            queued.append(block_id)
            call("append", block_id)
        elif kind == "append_n":
            ids = r.sample(outside, r.randint(0, min(4, len(outside))))
            for i in ids:
                outside.remove(i)
            queued += ids
            call("append_n", ids)
        else:
            call("get_all_free_blocks")
    if queued:
        call("popleft_n", len(queued))
    call("popleft")  # empty: vLLM raises ValueError
    return rec


def _extra_keys(value: Any) -> tuple | None:
    if value is None:
        return None
    return tuple(tuple(k) if isinstance(k, list) else k for k in value)


class HashSide:
    """Calls ``hash_block_tokens`` and hashes requests with a ``get_request_block_hasher``.

    Args:
        config: ``{"hash_fn": "sha256" | "sha256_cbor"}``.
        m: Namespace with hash functions, ``hash_block_tokens``, ``get_request_block_hasher``,
            ``Request`` and friends.
        hash_block_tokens: The function to test (default ``m.hash_block_tokens``).
        get_request_block_hasher: The hasher factory to test (default ``m``'s).
    """

    def __init__(self, config: dict, m: SimpleNamespace | None = None, hash_block_tokens: Any = None,
                 get_request_block_hasher: Any = None) -> None:  # fmt: skip
        self.m = m or kvlab_direct_namespace()
        self.hash_fn = self.m.hash_fns[config["hash_fn"]]
        self.hash_block_tokens = hash_block_tokens or self.m.hash_block_tokens
        self.get_request_block_hasher = get_request_block_hasher or self.m.get_request_block_hasher

    def call(self, op: str, args: list) -> Any:
        if op == "hash_block_tokens":
            parent, tokens, extra = args
            return self.hash_block_tokens(self.hash_fn, parent, tokens, _extra_keys(extra))
        if op == "request":
            return self.request(*args)
        raise ValueError(f"unknown operation {op!r}")

    def request(self, block_size: int, tokens: list[int], extra: dict | None, appends: list[list[int]]) -> list:
        """Block hashes of a new request, then after each list of appended tokens."""
        m, kwargs, extra = self.m, {}, extra or {}
        if extra.get("lora"):
            kwargs["lora_request"] = m.LoRARequest(extra["lora"][0], extra["lora"][1], "/lora")
        if extra.get("cache_salt"):
            kwargs["cache_salt"] = extra["cache_salt"]
        if extra.get("mm"):
            kwargs["mm_features"] = [
                m.MultiModalFeatureSpec(data=None, modality="image", identifier=i,
                                        mm_position=m.PlaceholderRange(offset=o, length=n))
                for i, o, n in extra["mm"]]  # fmt: skip
        hasher = self.get_request_block_hasher(block_size, self.hash_fn)
        req = m.Request("q", list(tokens), m.SamplingParams(max_tokens=64), None, block_hasher=hasher, **kwargs)
        out = [list(req.block_hashes)]
        for toks in appends:
            req.append_output_token_ids(list(toks))
            out.append(list(req.block_hashes))
        return out

    def state(self) -> dict:
        return {}


def record_hash_cases(side: HashSide, hash_fn: str, seed: int, num_cases: int,
                      source: str = "kvlab") -> Recording:
    """Chains of ``hash_block_tokens`` calls and whole requests with extra keys."""
    r = random.Random(f"hash-{seed}")
    rec = Recording("hash", {"hash_fn": hash_fn}, source=source)

    def call(op: str, *args: Any) -> Any:
        want = side.call(op, list(args))
        rec.steps.append(Step(op, list(args), want, {}))
        return want

    parent = None
    for _ in range(num_cases):
        tokens = [r.randrange(50) for _ in range(r.choice([2, 4, 4, 16]))]
        extra = None
        if r.random() < 0.3:
            extra = r.choice([["sql-lora"], [["img-cat", r.randint(-3, 3)]], ["salt-1"],
                              ["sql-lora", ["img-dog", 0], "salt-2"]])  # fmt: skip
        parent = call("hash_block_tokens", parent if r.random() < 0.7 else None, tokens, extra)
    for _ in range(num_cases // 2):
        bs = r.choice([2, 4, 8])
        tokens = [r.randrange(5) for _ in range(r.randint(1, 5 * bs))]
        extra: dict = {}
        if r.random() < 0.4:
            extra["lora"] = ["sql-lora", 3]
        if r.random() < 0.4:
            extra["cache_salt"] = r.choice(["tenant-a", "tenant-b"])
        if r.random() < 0.6:
            pos, items = r.randrange(len(tokens)), []
            while pos < len(tokens) and len(items) < 3:
                n = r.randint(1, 2 * bs)
                items.append([r.choice(["img-cat", "img-dog"]), pos, min(n, len(tokens) - pos)])
                pos += n + r.randint(0, bs)
            extra["mm"] = items
        appends = [[r.randrange(5) for _ in range(r.randint(1, bs + 1))] for _ in range(r.randint(0, 3))]
        call("request", bs, tokens, extra or None, appends)
    return rec
