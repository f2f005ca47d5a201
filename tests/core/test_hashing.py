"""The four hash functions, and block hashes equal to those of the real vLLM 0.22.1.

The constants below were printed by tests/core/oracle_hash_check.py, which builds the same
requests in kvlab and in vLLM 0.22.1 (the oracle virtualenv, PYTHONHASHSEED=0) and checks every
block hash byte for byte for the four hash functions; the hex strings are vLLM's output.
"""

from __future__ import annotations

import hashlib
import pickle

import cbor2
import pytest

from kvlab.core import kv_cache_utils as bh
from kvlab.core import hashing, kv_cache_utils
from kvlab.core.request import (
    LoRARequest,
    MultiModalFeatureSpec,
    PlaceholderRange,
    Request,
    SamplingParams,
)

xxhash_mod = pytest.importorskip("xxhash")

# From vLLM 0.22.1 with PYTHONHASHSEED=0: NONE_HASH, then (first, last) block hash of the
# 18 prompt tokens 100..117 + output tokens [7, 8], block_size 4 (5 blocks).
VLLM_CONSTANTS = {
    "sha256": {
        "none": "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c",
        "plain": (
            "e14b227484d5c5ee19f2ab704da668ca2ce046ae6138052ad6477e9610f8b1e4",
            "e9bcc46a302e4128510ae3a4d38e52de608c297bcb86c00871cff45e9f3789fd",
        ),
        "lora": (
            "1137961956c17202454f2fdb1a5ba9ca2f713295cd3db6a49ede1cf9692ad28a",
            "ab28821629f7322222e68fb0a4b80e654f70f34bd16a4f09ee523b8a24452267",
        ),
        "salt": (
            "df60b14c6b07eef727014804052b2cda9654c13514c5460c6800eb8ae69aef90",
            "b3d0e70cbf57292406861c7b974bad41534313f0623b36755cfeac82ce2d1630",
        ),
        "mm": (
            "ecb9f901471ddfe91b8a01e59bdb98e1ecabfd4d4be825b7980218c89cb3ceaa",
            "ec9ee8703533c4975d8b7520c3568ae9ffdb0dcbfde87df3196c85f53b897b0b",
        ),
    },
    "sha256_cbor": {
        "none": "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e",
        "plain": (
            "71f40f563a7a259f47b9267c311bf00d383743b642efb532825c8227cad5456f",
            "19bac788f6c033c14860500bffb71db935c9fa08939800c5140de23b1afaa511",
        ),
        "lora": (
            "10c5857318811f0a74392410ed4a3614e4afa79c42adb0773dfddf30e5433463",
            "8c833730de12e74f794adc6fd0b8b384428c05e7ac5d47a39822dec407014f17",
        ),
        "salt": (
            "0111ee2144a8bff96d2aa4e5132053a87637bfec2f0f2443c0928d43f42138de",
            "03dc5c5824ddc6796064e64588521d53d10b0dd2143d16db20cfff01d16d788e",
        ),
        "mm": (
            "b06a0daa4521391e7aa0d250124de35eb9ea4c7ae838698cd3290b32e1db7302",
            "5d628aa0bc0372c56a7919039c5c7f79b550263704563b22dcf614e12f816e25",
        ),
    },
    "xxhash": {
        "none": "6fb31cc38bba6066183f7f2104b9c051",
        "plain": ("a329a1b873d1d9c37622f11c1a27b4ef", "1b0b667960c9c2825e771442d6727691"),
        "lora": ("a84fdccf8b35bf1e0c3e351b72b6633f", "e1d821cdd02f977d07e4bcdb0bf2bc0d"),
        "salt": ("41a5d3ffecdf8601b31dade2c35d3169", "2fc5c504727241ccf558c0f5982f03f8"),
        "mm": ("f6ef78f1e4bdca2288747b64d8210fc4", "8fd89a24e2ce20714ac9ec71f958ba1a"),
    },
    "xxhash_cbor": {
        "none": "1ebe36576dcb573f26b99533a20aaeca",
        "plain": ("5cad46403a4570aead4ccf75cda32b55", "23a8532fd1fc63b9b92a17810942669d"),
        "lora": ("105b7dac9e8297bc24d2a05d28551532", "b0b6f15c1cbd5892d54aebd1f08f1f0e"),
        "salt": ("3e4dd148f926f77070c700586ae1d67c", "23726294225f02ff08da8574f5a709a5"),
        "mm": ("5a7c7c790281a332cf614f3e0e081188", "359c592c2bf1fcbd5d07c378e6438bc2"),
    },
}

CASE_KWARGS = {
    "plain": {},
    "lora": {"lora_request": LoRARequest("sql", 3)},
    "salt": {"cache_salt": "tenant-a"},
    "mm": {
        "mm_features": [
            MultiModalFeatureSpec(identifier="imgA", mm_position=PlaceholderRange(2, 5)),
            MultiModalFeatureSpec(identifier="imgB", mm_position=PlaceholderRange(9, 3)),
        ]
    },
}


@pytest.fixture
def seed0(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    old = getattr(bh, "NONE_HASH", None)
    yield
    if old is not None:
        bh.NONE_HASH = old


@pytest.mark.parametrize("name", list(VLLM_CONSTANTS))
@pytest.mark.parametrize("case", list(CASE_KWARGS))
def test_block_hashes_equal_vllm_0_22_1(seed0, name, case):
    hash_fn = kv_cache_utils.get_hash_fn_by_name(name)
    kv_cache_utils.init_none_hash(hash_fn)
    assert kv_cache_utils.NONE_HASH.hex() == VLLM_CONSTANTS[name]["none"]
    req = Request(
        "r",
        list(range(100, 118)),
        SamplingParams(max_tokens=8),
        None,
        block_hasher=kv_cache_utils.get_request_block_hasher(4, hash_fn),
        **CASE_KWARGS[case],
    )
    req.append_output_token_ids([7, 8])
    assert len(req.block_hashes) == 5
    assert (req.block_hashes[0].hex(), req.block_hashes[-1].hex()) == VLLM_CONSTANTS[name][case]


def test_hash_functions_match_their_definitions():
    obj = (b"parent", (1, 2, 3), ("lora", ("img", -2)))
    assert (
        hashing.sha256(obj)
        == hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()
    )
    assert hashing.sha256_cbor(obj) == hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()
    assert hashing.xxhash(obj) == xxhash_mod.xxh3_128_digest(
        pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    )
    assert hashing.xxhash_cbor(obj) == xxhash_mod.xxh3_128_digest(cbor2.dumps(obj, canonical=True))
    assert [
        len(f(obj))
        for f in (hashing.sha256, hashing.sha256_cbor, hashing.xxhash, hashing.xxhash_cbor)
    ] == [32, 32, 16, 16]


def test_cbor_hash_is_canonical():
    assert hashing.sha256_cbor({"a": 1, "b": 2}) == hashing.sha256_cbor({"b": 2, "a": 1})


def test_get_hash_fn_by_name_and_reexports():
    for name in hashing.HASH_FN_NAMES:
        assert (
            hashing.get_hash_fn_by_name(name)
            is getattr(hashing, name)
            is getattr(kv_cache_utils, name)
        )
    with pytest.raises(ValueError, match="Unsupported hash function: 'md5'.*sha256_cbor"):
        hashing.get_hash_fn_by_name("md5")


def test_xxhash_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(hashing, "_xxhash", None)
    with pytest.raises(ModuleNotFoundError, match="pip install xxhash"):
        hashing.xxhash_cbor(1)
