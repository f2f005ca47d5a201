"""kvlab's radix policy against SGLang 0.5.23's own code, in lockstep (only where SGLang imports).

Every driver call on kvlab's ``RadixPolicy`` is replayed on SGLang's own ``RadixCache``,
``TokenToKVPoolAllocator`` and ``ReqToTokenPool`` through SGLang's own life-cycle functions
(``match_prefix``, ``lock`` / ``unlock``, ``evict_from_tree_cache`` -> ``evict_to_free_tokens``,
``checkpoint_kv_cache``, ``release_kv_cache``), and after each call both sides must hold the same
tree (every node's key, slot ids and lock_ref), the same free slots in the same order, the same
evictable / protected sizes, and have given the same answer and evicted the same tokens.

SGLang's ``Req`` needs a tokenizer and sampling configuration to build; ``_SGLangReq`` stands in
for it with the attributes the mem_cache code reads (its ``kv`` is SGLang's own ``ReqKvInfo``).
Two of SGLang's global config lookups that ``release_kv_cache`` makes (speculative decoding off,
thinking-cache stripping off) are pinned for the test.

Set up the environment with tests/sglang/setup_sglang_venv.sh, then run:
``PYTHONPATH=$PWD /work/sglang-venv/bin/python -m pytest tests/sglang/test_vs_sglang.py``.
"""

from __future__ import annotations

import importlib.metadata
from types import SimpleNamespace
from typing import Any

import pytest


def _skip_reason() -> str | None:
    # NOTE: the distribution, not find_spec: this folder (tests/sglang) is itself importable as
    # a namespace package "sglang" when tests/ is on sys.path.
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "needs the SGLang environment (SGLang 0.5.23 importable)"
    if version != "0.5.23":
        return f"needs the SGLang environment (SGLang 0.5.23, found {version})"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))

from kvlab.compare import (  # noqa: E402
    CachePolicy,
    RadixPolicy,
    Usage,
    Workload,
    WorkloadRequest,
    few_shot,
    multi_turn_chat,
    rag,
    run_workload,
    shared_system_prompt,
)


@pytest.fixture(autouse=True)
def _sglang_config(monkeypatch):
    import sglang.srt.mem_cache.common as common

    monkeypatch.setattr(common, "get_spec", lambda: SimpleNamespace(speculative_algorithm=None))
    monkeypatch.setattr(common, "get_serving", lambda: SimpleNamespace(strip_thinking_cache=False))


class _SGLangReq:
    """The attributes of SGLang's Req that its mem_cache code reads."""

    def __init__(self, rid: str, prompt: list[int], outputs: list[int]) -> None:
        from array import array

        from sglang.srt.managers.schedule_batch import ReqKvInfo

        self.rid = rid
        self.origin_input_ids = list(prompt)
        self.output_ids = list(outputs)
        self.full_untruncated_fill_ids = array("q", prompt + outputs)
        self.kv = ReqKvInfo()
        self.extra_key = self.cache_salt = self.priority = self.finished_len = None
        self.skip_radix_cache_insert = False
        self.lock: Any = None
        self.last_node: Any = None
        self.extend_end = 0
        self.prefix_len = 0
        self.done = False

    def owned_kv_len(self) -> int:
        return self.kv.kv_committed_len

    def refresh_fill_ids(self) -> None:
        pass  # NOTE: full_untruncated_fill_ids is kept current by on_token

    def finished(self) -> bool:
        return self.done


class SGLangRadix:
    """The driver's calls made on SGLang 0.5.23's own objects (page size 1, LRU)."""

    def __init__(self, pool_tokens: int, max_requests: int = 512, max_len: int = 4096) -> None:
        import torch
        from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
        from sglang.srt.mem_cache.radix_cache import RadixCache

        self.allocator = TokenToKVPoolAllocator(pool_tokens, torch.int64, "cpu", None, False)
        self.req_to_token_pool = ReqToTokenPool(max_requests, max_len, "cpu", False)
        self.tree = RadixCache(CacheInitParams(
            disable=False, req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool_allocator=self.allocator, page_size=1))  # fmt: skip
        self.reqs: dict[str, _SGLangReq] = {}
        self.num_evicted_tokens = 0

    def _room(self, num_tokens: int) -> bool:
        return self.allocator.available_size() + self.tree.evictable_size() >= num_tokens

    def _alloc(self, num_tokens: int) -> Any:
        from sglang.srt.mem_cache.common import evict_from_tree_cache

        before = self.allocator.available_size()
        evict_from_tree_cache(self.tree, num_tokens)
        self.num_evicted_tokens += self.allocator.available_size() - before
        return self.allocator.alloc(num_tokens)

    def admit(self, req: Any) -> int | None:
        from array import array

        import torch
        from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams
        from sglang.srt.mem_cache.radix_cache import RadixKey

        tokens = list(req.token_ids)
        m = self.tree.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens[:-1]))))
        hit, node = m.device_prefix_len, m.last_device_node
        lock = self.tree.lock(node)
        need = len(tokens) - hit
        if not self._room(need):
            self.tree.unlock(lock)
            return None
        n = req.num_prompt_tokens
        r = _SGLangReq(req.request_id, tokens[:n], tokens[n:])
        r.lock, r.last_node = lock, node
        r.kv.req_pool_idx = self.req_to_token_pool.alloc_rows(1)[0]
        row = torch.cat([self.tree.path_device_indices(node)[:hit], self._alloc(need)])
        self.req_to_token_pool.write((r.kv.req_pool_idx, slice(0, len(tokens))), row)
        r.kv.cache_protected_len = hit
        r.kv.kv_committed_len = r.kv.kv_allocated_len = r.extend_end = len(tokens)
        self.reqs[req.request_id] = r
        return hit

    def after_prefill(self, req: Any) -> None:
        from sglang.srt.mem_cache.common import checkpoint_kv_cache

        checkpoint_kv_cache(self.reqs[req.request_id], self.tree)

    def on_token(self, req: Any, token_id: int) -> None:
        r = self.reqs[req.request_id]
        r.output_ids.append(token_id)
        r.full_untruncated_fill_ids.append(token_id)

    def decode(self, req: Any) -> bool:
        if not self._room(1):
            return False
        r = self.reqs[req.request_id]
        n = r.kv.kv_committed_len
        self.req_to_token_pool.write((r.kv.req_pool_idx, slice(n, n + 1)), self._alloc(1))
        r.kv.kv_committed_len = r.kv.kv_allocated_len = n + 1
        return True

    def finish(self, req: Any) -> None:
        from sglang.srt.mem_cache.common import release_kv_cache

        r = self.reqs.pop(req.request_id)
        r.done = True
        release_kv_cache(r, self.tree, checkpoint=True)

    def preempt(self, req: Any) -> None:
        from sglang.srt.mem_cache.common import release_kv_cache

        release_kv_cache(self.reqs.pop(req.request_id), self.tree, checkpoint=False)


def kvlab_tree(policy: RadixPolicy) -> list[tuple]:
    cache = policy.cache
    return sorted((cache.path_key(n), tuple(n.value), n.lock_ref) for n in cache.nodes())


def sglang_tree(side: SGLangRadix) -> list[tuple]:
    out, stack = [], [((), side.tree.root_node)]
    while stack:
        path, node = stack.pop()
        for child in node.children.values():
            key = path + tuple(child.key.token_ids)
            out.append((key, tuple(child.value.tolist()), child.lock_ref))
            stack.append((key, child))
    return sorted(out)


class Lockstep(CachePolicy):
    """kvlab's RadixPolicy answering the driver, SGLang's code checked against it at each call."""

    name = "radix"

    def __init__(self, pool_tokens: int) -> None:
        super().__init__(pool_tokens, 1)
        self.ours, self.theirs = RadixPolicy(pool_tokens), SGLangRadix(pool_tokens)
        self.calls: dict[str, int] = {}

    def _both(self, method: str, *args: Any) -> Any:
        ours = getattr(self.ours, method)(*args)
        theirs = getattr(self.theirs, method)(*args)
        self.calls[method] = self.calls.get(method, 0) + 1
        where = f"{method} #{self.calls[method]} ({args[0].request_id})"
        assert ours == theirs, where
        assert kvlab_tree(self.ours) == sglang_tree(self.theirs), where
        assert list(self.ours.pool.free_slots) == self.theirs.allocator.free_pages.tolist(), where
        assert self.ours.cache.evictable_size() == self.theirs.tree.evictable_size(), where
        assert self.ours.cache.protected_size() == self.theirs.tree.protected_size(), where
        assert self.ours.num_evicted_tokens == self.theirs.num_evicted_tokens, where
        self.num_evicted_tokens = self.ours.num_evicted_tokens
        self.raw_hit_tokens = self.ours.raw_hit_tokens
        return ours

    def admit(self, req: Any) -> int | None:
        return self._both("admit", req)

    def after_prefill(self, req: Any) -> None:
        self._both("after_prefill", req)

    def on_token(self, req: Any, token_id: int) -> None:
        self._both("on_token", req, token_id)

    def decode(self, req: Any) -> bool:
        return self._both("decode", req)

    def finish(self, req: Any) -> None:
        self._both("finish", req)

    def preempt(self, req: Any) -> None:
        self._both("preempt", req)

    def usage(self) -> Usage:
        return self.ours.usage()


def _readmitted() -> Workload:
    """Two long decodes in a 24-slot pool: the newer is retracted, prefilled again with its
    outputs, and finishes; then c extends b's prompt and first output."""
    return Workload("readmit", [
        WorkloadRequest("a", tuple(range(1, 9)), 8, 0, tuple(range(100, 108))),
        WorkloadRequest("b", tuple(range(1, 5)) + (50, 51, 52, 53), 8, 0, tuple(range(200, 208))),
        WorkloadRequest("c", tuple(range(1, 5)) + (50, 51, 52, 53, 200, 201), 1, 30, (300,)),
    ])  # fmt: skip


CASES = [
    ("readmit", _readmitted, 24),
    ("system-prompt", lambda: shared_system_prompt(seed=1), 512),
    ("multi-turn", lambda: multi_turn_chat(seed=2), 512),
    ("multi-turn-large", lambda: multi_turn_chat(seed=3), 4096),
    ("rag", lambda: rag(seed=4), 1024),
    ("few-shot", lambda: few_shot(seed=5), 512),
]


@pytest.mark.parametrize("name,workload,pool_tokens", CASES, ids=[c[0] for c in CASES])
def test_radix_policy_life_cycle_matches_sglang(name: str, workload, pool_tokens: int) -> None:
    w = workload()
    lockstep = Lockstep(pool_tokens)
    run = run_workload(w, lockstep)
    plain = run_workload(w, "radix", pool_tokens=pool_tokens)
    assert [(r.first_hit_tokens, r.finish_step, r.num_preemptions) for r in run.requests.values()] \
        == [(r.first_hit_tokens, r.finish_step, r.num_preemptions) for r in plain.requests.values()]
    assert lockstep.calls["finish"] == sum(r.finish_step is not None for r in run.requests.values())
    if name == "readmit":  # the scenario does what it says
        assert run.requests["b"].num_preemptions == 1 and run.requests["c"].first_hit_tokens == 9
    if pool_tokens <= 1024:  # small pools: the runs evict
        assert lockstep.num_evicted_tokens > 0
