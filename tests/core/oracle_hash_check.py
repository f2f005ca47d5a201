"""Compare kvlab's block hashes with vLLM 0.22.1's (development tool, not collected by pytest).

Run in the oracle environment (vLLM 0.22.1 importable; see /work/shared/oracle/README.md),
from the project root:

    PYTHONHASHSEED=0 PYTHONPATH=. ORACLE_VENV/bin/python tests/core/oracle_hash_check.py

It builds the same requests (plain, LoRA, cache_salt, two images, generated tokens appended)
in both packages for each of the four hash functions, compares every block hash byte for byte,
and prints the constants pinned in tests/core/test_hashing.py. Exit status 0 = all equal.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    sys.exit("run with PYTHONHASHSEED=0 (NONE_HASH is seeded from it)")

from vllm.lora.request import LoRARequest as VLoRA  # noqa: E402
from vllm.multimodal.inputs import MultiModalFeatureSpec as VFeat  # noqa: E402
from vllm.multimodal.inputs import PlaceholderRange as VRange  # noqa: E402
from vllm.sampling_params import SamplingParams as VSP  # noqa: E402
from vllm.utils import hashing as vh  # noqa: E402
from vllm.v1.core import kv_cache_utils as vku  # noqa: E402
from vllm.v1.request import Request as VRequest  # noqa: E402

from kvlab.core import kv_cache_utils as kku  # noqa: E402
from kvlab.core import request as kreq  # noqa: E402

BLOCK_SIZE = 4
TOKENS = list(range(100, 118))  # 18 tokens: 4 full blocks of 4


def _cases():
    yield "plain", {}, {}
    yield (
        "lora",
        {"lora_request": VLoRA("sql", 3, lora_path="/x")},
        {"lora_request": kreq.LoRARequest("sql", 3)},
    )
    yield "salt", {"cache_salt": "tenant-a"}, {"cache_salt": "tenant-a"}
    v_mm = [
        VFeat(
            data=None, modality="image", identifier="imgA", mm_position=VRange(offset=2, length=5)
        ),
        VFeat(
            data=None, modality="image", identifier="imgB", mm_position=VRange(offset=9, length=3)
        ),
    ]
    k_mm = [
        kreq.MultiModalFeatureSpec(identifier="imgA", mm_position=kreq.PlaceholderRange(2, 5)),
        kreq.MultiModalFeatureSpec(identifier="imgB", mm_position=kreq.PlaceholderRange(9, 3)),
    ]
    yield "mm", {"mm_features": v_mm}, {"mm_features": k_mm}


def main() -> int:
    failures = 0
    for name in ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor"):
        v_fn, k_fn = vh.get_hash_fn_by_name(name), kku.get_hash_fn_by_name(name)
        vku.init_none_hash(v_fn)
        kku.init_none_hash(k_fn)
        assert vku.NONE_HASH == kku.NONE_HASH, name
        print(f"{name} NONE_HASH {kku.NONE_HASH.hex()}")
        for case, v_kw, k_kw in _cases():
            v_req = VRequest(
                "r",
                list(TOKENS),
                VSP(max_tokens=8),
                None,
                block_hasher=vku.get_request_block_hasher(BLOCK_SIZE, v_fn),
                **v_kw,
            )
            k_req = kreq.Request(
                "r",
                list(TOKENS),
                kreq.SamplingParams(max_tokens=8),
                None,
                block_hasher=kku.get_request_block_hasher(BLOCK_SIZE, k_fn),
                **k_kw,
            )
            for req in (v_req, k_req):
                req.append_output_token_ids([7, 8])  # completes block 4 (tokens 16..19)
            ok = [bytes(h) for h in v_req.block_hashes] == [bytes(h) for h in k_req.block_hashes]
            failures += not ok
            print(
                f"  {case:6s} {'OK ' if ok else 'DIFF'} n={len(k_req.block_hashes)} "
                f"first={k_req.block_hashes[0].hex()} last={k_req.block_hashes[-1].hex()}"
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
