#!/usr/bin/env python3
"""Record vLLM 0.22.1's decisions on the labs' workloads into ``kvlab/labs/data`` (the shipped fixtures).

Runs in the oracle environment only (vLLM 0.22.1 importable; ``../shared/oracle/``), with this
checkout first on the path so that the workloads are kvlab.labs' own (``kvlab.labs.workloads`` and
``kvlab.labs.direct`` drive vLLM's classes through the same sides that replay them)::

    PYTHONPATH=$PWD /work/ovenv/bin/python tests/labs/record_lab_fixtures.py

Writes ``queue.cbor.gz`` (FreeKVCacheBlockQueue operations), ``hash.cbor.gz`` (hash_block_tokens
chains and whole requests with LoRA, multimodal and cache_salt keys, sha256 and sha256_cbor) and
``manager.cbor.gz`` (scheduler-like workloads over every config family). ``test_lab_fixtures.py``
replays them through kvlab.core with no vLLM. Exit 0 when everything was recorded.
"""
from __future__ import annotations

import os
import sys

# vLLM seeds NONE_HASH from PYTHONHASHSEED: pin it before anything hashes.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

import random  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from vllm_namespace import vllm_namespace  # noqa: E402

from kvlab.labs.direct import HashSide, QueueSide, record_hash_cases, record_queue_ops  # noqa: E402
from kvlab.labs.fixtures import encode_recordings  # noqa: E402
from kvlab.labs.sides import ManagerSide  # noqa: E402
from kvlab.labs.workloads import manager_config, record_workload  # noqa: E402

OUT = HERE.parents[1] / "kvlab" / "labs" / "data"
SOURCE = "vLLM 0.22.1"

MANAGER_RUNS = [
    # (family, seed, overrides); every run has KV events on and 45 scheduler operations.
    ("full", 0, {}), ("full", 1, {"use_eagle": True}), ("full", 2, {"use_eagle": False}),
    ("full", 3, {"extras": True}), ("full", 4, {"extras": True, "hash_fn": "sha256_cbor"}),
    ("full", 5, {"external": True, "use_eagle": False}), ("full", 6, {"external": True, "must_fit": True}),
    ("sw", 0, {"use_eagle": False}), ("sw", 1, {"use_eagle": True}), ("sw", 2, {}),
    ("full+sw", 0, {"use_eagle": False}), ("full+sw", 1, {"use_eagle": True}), ("full+sw", 2, {"external": True}),
    ("full+2sw", 3, {"use_eagle": False}), ("full+2sw", 0, {"use_eagle": True}),
    ("mixed:full8+sw4", 0, {}), ("mixed:full8+sw4", 1, {"use_eagle": True}),
    ("mixed:full4+sw8", 0, {}), ("mixed:full4+sw8", 1, {"use_eagle": True}),
    ("full+full(heads)", 0, {}), ("full+full(heads)", 1, {"use_eagle": True}),
    ("full+chunked", 0, {}), ("chunked", 0, {"use_eagle": False}),
    # Seeds whose workloads make a lookup that skips a missing block, a window run that is not
    # contiguous, or a single round of the hybrid fixed point diverge from vLLM.
    ("full", 7, {}), ("sw", 11, {}), ("full+2sw", 4, {"use_eagle": False}),
    # ... and one where a request's hits are evictable blocks that the free blocks must cover.
    ("full+sw", 8, {}),
]  # fmt: skip


def vllm_direct(m: SimpleNamespace) -> SimpleNamespace:
    from vllm.v1.core.kv_cache_utils import FreeKVCacheBlockQueue, KVCacheBlock, hash_block_tokens

    return SimpleNamespace(**vars(m), KVCacheBlock=KVCacheBlock, FreeKVCacheBlockQueue=FreeKVCacheBlockQueue,
                           hash_block_tokens=hash_block_tokens)


def main() -> int:
    m = vllm_namespace()
    d = vllm_direct(m)
    OUT.mkdir(parents=True, exist_ok=True)
    queue = [record_queue_ops(QueueSide({"num_blocks": n}, m=d), n, seed, 36, source=SOURCE)
             for seed, n in enumerate([5, 8, 12, 20])]  # fmt: skip
    hashes = []
    for seed, fn in enumerate(["sha256", "sha256_cbor", "sha256"]):
        m.init_none_hash(m.hash_fns[fn])
        hashes.append(record_hash_cases(HashSide({"hash_fn": fn}, m=d), fn, seed, 16, source=SOURCE))
    manager = []
    for family, seed, overrides in MANAGER_RUNS:
        cfg = manager_config(family, random.Random(f"lab-{family}-{seed}"), events=True, **overrides)
        m.init_none_hash(m.hash_fns[cfg["hash_fn"]])
        manager.append(record_workload(ManagerSide(cfg, m=m), cfg, seed, 45, source=SOURCE))
    total = 0
    for kind, recs in (("queue", queue), ("hash", hashes), ("manager", manager)):
        data = encode_recordings(kind, recs, m.version)
        (OUT / f"{kind}.cbor.gz").write_bytes(data)
        total += len(data)
        steps = sum(len(r.steps) for r in recs)
        print(f"  {kind}.cbor.gz: {len(recs)} recordings, {steps} operations, {len(data) / 1e3:.0f} kB")
    print(f"record_lab_fixtures: {total / 1e3:.0f} kB from vLLM {m.version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
