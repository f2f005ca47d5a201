"""Small real traces for the kvlab.viz tests (not a test module).

Every trace here is recorded from a real ``KVCacheManager`` with a ``Recorder`` attached, driven
by a tiny stand-in for the scheduler (``admit`` / ``decode`` / ``finish``). Hashes are
reproducible: NONE_HASH is seeded from a fixed PYTHONHASHSEED while the requests are built.

Scenarios:
    shared_prefix_trace: one full-attention group, 10 blocks of 4 tokens; two requests share a
        two-block prefix, both are freed, a long request evicts a cached block, and a later
        lookup hits block 1 (touched out of the free queue) but misses the evicted hash.
    hybrid_trace: full attention + sliding window (8 tokens), 32 blocks; a sliding-window
        block is evicted so the next lookup's fixed point is shortened by the sliding-window
        group; decoding then nulls blocks that left the window.
    serving_trace: a seeded random workload of any size (benchmarks and the JS replay test).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

from kvlab.core.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request, SamplingParams
from kvlab.trace import Recorder, Trace

BLOCK_SIZE = 4
PREFIX = list(range(100, 112))  # 12 tokens = 3 full blocks


@contextlib.contextmanager
def seeded_hashes(seed: str = "0") -> Iterator[None]:
    """NONE_HASH = sha256(seed) inside the block (PYTHONHASHSEED restored afterwards)."""
    old = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = seed
    try:
        init_none_hash(sha256)
        yield
    finally:
        if old is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = old


def make_manager(num_blocks: int, sliding_window: int | None = None, **kw: Any) -> KVCacheManager:
    """A KVCacheManager with one full-attention group (+ one sliding-window group if given)."""
    common = {"block_size": BLOCK_SIZE, "num_kv_heads": 1, "head_size": 1, "dtype": "float32"}
    specs: list[Any] = [FullAttentionSpec(**common)]
    if sliding_window is not None:
        specs.append(SlidingWindowSpec(**common, sliding_window=sliding_window))
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    cfg = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    kw.setdefault("max_model_len", 4096)
    return KVCacheManager(cfg, hash_block_size=BLOCK_SIZE, **kw)


def make_request(request_id: str, tokens: list[int]) -> Request:
    """A request whose block hashes use BLOCK_SIZE (build inside ``seeded_hashes``)."""
    hasher = get_request_block_hasher(BLOCK_SIZE, sha256)
    return Request(
        request_id, list(tokens), SamplingParams(max_tokens=1000), None, block_hasher=hasher
    )


def admit(manager: KVCacheManager, req: Request) -> bool:
    """Prefix lookup + allocate_slots for the whole prompt; True when it fit."""
    blocks, num_hit = manager.get_computed_blocks(req)
    n = max(req.num_tokens - num_hit, 1)
    if manager.allocate_slots(req, n, num_hit, blocks) is None:
        return False
    req.num_computed_tokens = num_hit + n
    return True


def decode(manager: KVCacheManager, req: Request, token: int) -> bool:
    """Append one sampled token and allocate its slot; True when it fit."""
    req.append_output_token_ids(token)
    if manager.allocate_slots(req, 1) is None:
        return False
    req.num_computed_tokens += 1
    return True


def shared_prefix_trace() -> Trace:
    """The one-group scenario of the module docstring (10 blocks, 4 steps)."""
    with seeded_hashes():
        m = make_manager(10)
        rec = Recorder().attach(m)
        a = make_request("a", PREFIX[:10])
        b = make_request("b", PREFIX[:8] + [900, 901, 902])
        c = make_request("c", list(range(500, 530)))  # 8 blocks: evicts b's cached block 2
        d = make_request("d", PREFIX[:9])
        rec.mark_step(1)
        assert admit(m, a) and admit(m, b)
        rec.mark_step(2)
        m.free(a)
        rec.mark_step(3)
        m.free(b)
        assert admit(m, c)
        rec.mark_step(4)
        m.free(c)
        assert admit(m, d)
        rec.detach()
    return rec.trace()


def hybrid_trace() -> Trace:
    """The full + sliding-window scenario of the module docstring (32 blocks)."""
    with seeded_hashes():
        m = make_manager(32, sliding_window=8)
        rec = Recorder().attach(m)
        a = make_request("a", PREFIX + [112, 113, 114, 115])  # 16 tokens, 4 blocks per group
        b = make_request("b", PREFIX + [112, 113, 114, 115, 1, 2, 3, 4])
        rec.mark_step(1)
        assert admit(m, a)
        rec.mark_step(2)
        sw_blocks = m.get_block_ids("a")[1]
        m.free(a)
        m.evict_blocks({sw_blocks[3]})
        rec.mark_step(3)
        assert admit(m, b)
        for step, token in enumerate((7, 8, 9, 10, 11), start=4):
            rec.mark_step(step)
            assert decode(m, b, token)
        rec.detach()
    return rec.trace()


def serving_trace(num_blocks: int, num_events: int, seed: int = 0) -> Trace:
    """A random serving workload recorded until it holds at least ``num_events`` events.

    Requests draw prompts from a few shared prefixes (so lookups hit and miss), decode a few
    tokens per step, and are freed at random; admission stops when the pool is full.
    """
    rng = random.Random(seed)
    prefixes = [
        [rng.randrange(1000) for _ in range(BLOCK_SIZE * rng.randint(2, 12))] for _ in range(8)
    ]
    with seeded_hashes():
        m = make_manager(num_blocks)
        rec = Recorder().attach(m)
        running: list[Request] = []
        step = n = 0
        while len(rec) < num_events:
            step += 1
            rec.mark_step(step)
            if rng.random() < 0.6:
                tail = [rng.randrange(1000) for _ in range(rng.randint(1, 40))]
                req = make_request(f"r{n}", rng.choice(prefixes) + tail)
                n += 1
                if admit(m, req):
                    running.append(req)
            for req in list(running):
                if rng.random() < 0.08 or not decode(m, req, rng.randrange(1000)):
                    m.free(req)
                    running.remove(req)
        rec.detach()
    return rec.trace()
