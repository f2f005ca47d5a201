"""The radix_cache lab's workloads on SGLang 0.5.23's own RadixCache (only where SGLang imports).

The lab's randomized scenarios with page sizes above 1 are decided by kvlab's paged model
(``kvlab.labs.radix_model``; kvlab.sglang has page size 1 only), those with page size 1 by
kvlab.sglang. Here every call of such workloads (page sizes 1, 2, 3, 4, 8) is replayed on
SGLang's own tree (``RadixCache.create_simulated`` over kvlab's pool) and after each call SGLang
must give the same answer and hold the same tree (every node's tokens, slots and lock_ref), the
same evictable / protected sizes and the same free slots in the same order (eviction order).
node_id and last_access_time are not compared (SGLang: a global counter and time.monotonic()).

Run: ``PYTHONPATH=$PWD /work/sglang-venv/bin/python -m pytest tests/sglang/test_radix_lab_vs_sglang.py``
(environment: tests/sglang/setup_sglang_venv.sh).
"""

from __future__ import annotations

import importlib.metadata

import pytest


def _skip_reason() -> str | None:
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "needs the SGLang environment (SGLang 0.5.23 importable)"
    return None if version == "0.5.23" else f"needs the SGLang environment (SGLang 0.5.23, found {version})"


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))

if _skip_reason() is None:
    from array import array

    import torch
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
    from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

    from kvlab.labs.radix import RadixSide, record_radix_ops
    from kvlab.sglang import TokenToKVPoolAllocator

    class Pool(TokenToKVPoolAllocator):
        device = "cpu"
        def free_segment(self, values, start_pos=0):
            self.free([int(v) for v in values])

    def path_of(node, root):
        parts = []
        while node is not root:
            parts.append(list(node.key.token_ids)); node = node.parent
        return [t for p in reversed(parts) for t in p]

    class SG:
        def __init__(self, cfg):
            self.pool = Pool(cfg["pool_tokens"])
            self.tree = RadixCache.create_simulated(mock_allocator=self.pool, page_size=cfg["page_size"])
            self.nodes = {}
        def call(self, op, args):
            t = self.tree
            if op == "match_prefix":
                m = t.match_prefix(MatchPrefixParams(key=RadixKey(array("q", args[0]))))
                node = m.last_device_node
                path = path_of(node, t.root_node)
                self.nodes[tuple(path)] = node
                return [t.path_device_indices(node).tolist(), path]
            if op == "insert":
                return t.insert(InsertParams(key=RadixKey(array("q", args[0])), value=torch.tensor(args[1], dtype=torch.int64))).prefix_len
            if op in ("inc_lock_ref", "dec_lock_ref"):
                return getattr(t, op)(self.nodes[tuple(args[0])] if args[0] else t.root_node).delta
            if op == "evict":
                return t.evict(EvictParams(num_tokens=args[0])).num_tokens_evicted
            if op == "alloc":
                return self.pool.alloc(args[0])
            if op == "free":
                self.pool.free(args[0]); return None
        def state(self):
            out, stack = [], [((), self.tree.root_node)]
            while stack:
                path, node = stack.pop()
                for c in node.children.values():
                    p = path + tuple(c.key.token_ids)
                    out.append((list(p), [int(v) for v in c.value.tolist()], c.lock_ref))
                    stack.append((p, c))
            out.sort()
            return {"tree": [[p, v] for p, v, _ in out], "lock_ref": [l for *_, l in out],
                    "evictable_size_": self.tree.evictable_size_, "protected_size_": self.tree.protected_size_,
                    "free slots": list(self.pool.free_slots)}


@pytest.mark.parametrize("page_size", [1, 2, 3, 4, 8])
def test_sglang_makes_every_decision_of_the_labs_reference(page_size: int) -> None:
    for seed in range(8):
        cfg = {"pool_tokens": 8 + page_size * (3 + seed % 4), "page_size": page_size}
        rec = record_radix_ops(RadixSide(cfg), 1000 + seed, 150)
        assert sum(st.op == "evict" for st in rec.steps) >= 3
        sg = SG(cfg)
        for i, st in enumerate(rec.steps):
            want_state = {k: v for k, v in st.state.items() if k not in ("node_id", "last_access_time")}
            assert (sg.call(st.op, st.args), sg.state()) == (st.want, want_state), (seed, i, st.op, st.args)
