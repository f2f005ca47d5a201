"""Differential check: kvlab's Scheduler against vLLM 0.22.1's, step by step (dev oracle).

Skipped unless vLLM 0.22.1 is importable (the oracle environment of ../shared/oracle, with
kvlab on PYTHONPATH), from the project root:
``PYTHONPATH=. ORACLE_VENV/bin/python -m pytest tests/core/sched/test_scheduler_vs_vllm.py``.
Random FCFS workloads (shared prefixes, chunked prefill on/off, long-prefill thresholds,
prefix caching on/off, tiny pools that preempt, stop tokens, aborts) run through both
schedulers in lockstep; after every schedule() and update_from_output() the outputs
(scheduled tokens, new/cached request data, block ids, preempted/finished ids, common-prefix
blocks), the token outputs, finish reasons and first-output prefill stats (prompt /
computed / cached tokens), the free-block queue order and the queues and
per-request state must be identical. 501 seeds matched when this was written.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass

import pytest

try:
    import vllm
except ImportError:
    pytest.skip("needs the vLLM environment (vLLM 0.22.1 not importable)", allow_module_level=True)
if not vllm.__version__.startswith("0.22.1"):
    pytest.skip(f"needs the vLLM environment (vLLM 0.22.1, found {vllm.__version__})",
                allow_module_level=True)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from vllm.config import CacheConfig, DeviceConfig, ModelConfig, ParallelConfig, VllmConfig
from vllm.config import SchedulerConfig as VSchedulerConfig
from vllm.sampling_params import SamplingParams as VSP
from vllm.utils.hashing import sha256 as vsha
from vllm.v1.core.kv_cache_utils import get_request_block_hasher as vhasher
from vllm.v1.core.kv_cache_utils import init_none_hash as vinit
from vllm.v1.core.sched.scheduler import Scheduler as VScheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec as VFull
from vllm.v1.kv_cache_interface import KVCacheConfig as VKC
from vllm.v1.kv_cache_interface import KVCacheGroupSpec as VG
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request as VRequest
from vllm.v1.request import RequestStatus as VStatus
from vllm.v1.structured_output import StructuredOutputManager

from kvlab.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request, SamplingParams
from kvlab.core.sched import Scheduler, SchedulerConfig

BS = 4  # block size (tokens)

MODEL_DIR: list[str] = []
_TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


@dataclass
class GP(SamplingParams):
    """kvlab SamplingParams plus vLLM's stop_token_ids (read by check_stop)."""

    stop_token_ids: list | None = None


def model(tokens):
    """Fake model: next token from the whole context, over a 9-token vocabulary (stops happen)."""
    h = 7
    for t in tokens:
        h = (h * 131 + t) % 1000003
    return 3 + h % 9  # tiny vocab: stop tokens get hit


def make_vllm(cfg):
    mc = ModelConfig(
        model=MODEL_DIR[0],
        dtype="float32",
        seed=0,
        skip_tokenizer_init=True,
        max_model_len=cfg["max_model_len"],
    )
    sc = VSchedulerConfig(
        max_num_seqs=cfg["max_num_seqs"],
        max_num_batched_tokens=cfg["budget"],
        max_model_len=cfg["max_model_len"],
        enable_chunked_prefill=cfg["chunked"],
        long_prefill_token_threshold=cfg["threshold"],
        is_encoder_decoder=False,
    )
    cc = CacheConfig(
        block_size=BS,
        gpu_memory_utilization=0.9,
        cache_dtype="auto",
        enable_prefix_caching=cfg["caching"],
    )
    vc = VllmConfig(
        scheduler_config=sc,
        model_config=mc,
        cache_config=cc,
        parallel_config=ParallelConfig(),
        device_config=DeviceConfig(device="cpu"),
    )
    # VllmConfig's post-init may adjust these; pin them to the values under test.
    sc.long_prefill_token_threshold = cfg["threshold"]
    sc.max_num_batched_tokens = cfg["budget"]
    sc.max_num_scheduled_tokens = cfg["budget"]
    sc.enable_chunked_prefill = cfg["chunked"]
    kv = VKC(
        num_blocks=cfg["num_blocks"],
        kv_cache_tensors=[],
        kv_cache_groups=[
            VG(["layer"], VFull(block_size=BS, num_kv_heads=1, head_size=1, dtype=torch.float32))
        ],
    )
    cc.num_gpu_blocks = cfg["num_blocks"]
    return VScheduler(
        vllm_config=vc,
        kv_cache_config=kv,
        block_size=BS,
        log_stats=True,
        structured_output_manager=StructuredOutputManager(vc),
    )


def make_kvlab(cfg):
    spec = FullAttentionSpec(block_size=BS, num_kv_heads=1, head_size=1, dtype="float32")
    kv = KVCacheConfig(
        num_blocks=cfg["num_blocks"],
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
    )
    sc = SchedulerConfig(
        max_num_seqs=cfg["max_num_seqs"],
        max_num_batched_tokens=cfg["budget"],
        max_model_len=cfg["max_model_len"],
        enable_chunked_prefill=cfg["chunked"],
        long_prefill_token_threshold=cfg["threshold"],
        enable_prefix_caching=cfg["caching"],
        log_stats=True,
    )
    return Scheduler(kv, sc)


def free_queue(s):
    return [
        b.block_id for b in s.kv_cache_manager.block_pool.free_block_queue.get_all_free_blocks()
    ]


def snapshot_out(o):
    c = o.scheduled_cached_reqs
    return {
        "nst": list(o.num_scheduled_tokens.items()),
        "new": [
            (n.req_id, n.block_ids, n.num_computed_tokens, list(n.prompt_token_ids))
            for n in o.scheduled_new_reqs
        ],
        "cached": (
            c.req_ids,
            sorted(c.resumed_req_ids),
            c.new_block_ids,
            c.num_computed_tokens,
            c.num_output_tokens,
            {k: list(v) for k, v in c.all_token_ids.items()},
        ),
        "total": o.total_num_scheduled_tokens,
        "common": list(o.num_common_prefix_blocks),
        "preempted": sorted(o.preempted_req_ids or ()),
        "finished": sorted(o.finished_req_ids),
    }


def prefill(stats):
    """The first output's prefill split (prompt, computed, cached tokens), or None."""
    if stats is None:
        return None
    return (stats.num_prompt_tokens, stats.num_computed_tokens, stats.num_cached_tokens)


def stats_tuple(st):
    p = st.prefix_cache_stats
    return (
        st.num_running_reqs,
        st.num_waiting_reqs,
        round(st.kv_cache_usage, 9),
        p.reset,
        p.requests,
        p.queries,
        p.hits,
        p.preempted_requests,
        p.preempted_queries,
        p.preempted_hits,
    )


def state(s):
    return {
        "free": free_queue(s),
        "running": [r.request_id for r in s.running],
        "waiting": [r.request_id for r in s.waiting],
        "reqs": {
            rid: (r.num_computed_tokens, list(r.all_token_ids), int(r.status), r.num_preemptions)
            for rid, r in s.requests.items()
        },
    }


def run(seed):
    """One random workload through both schedulers; the first difference as text, else None."""
    rng = random.Random(seed)
    cfg = {
        "max_model_len": rng.choice([48, 64, 128]),
        "max_num_seqs": rng.choice([2, 3, 4, 8]),
        "budget": rng.choice([8, 12, 16, 32]),
        "chunked": rng.random() < 0.8,
        "threshold": rng.choice([0, 0, 3, 5]),
        "caching": rng.random() < 0.85,
        "num_blocks": rng.choice([8, 10, 12, 20, 64]),
    }
    if not cfg["chunked"]:
        cfg["budget"] = max(cfg["budget"], cfg["max_model_len"])
    V, K = make_vllm(cfg), make_kvlab(cfg)
    vh, kh = vhasher(BS, vsha), get_request_block_hasher(BS, sha256)
    systems = [[rng.randrange(100, 110) for _ in range(rng.randrange(3, 14))] for _ in range(2)]
    arrivals = {}
    n_req = rng.randrange(3, 9)
    for i in range(n_req):
        prefix = rng.choice(systems) if rng.random() < 0.7 else []
        prompt = prefix + [rng.randrange(100, 110) for _ in range(rng.randrange(1, 10))]
        prompt = prompt[: cfg["max_model_len"] - 2] or [5]
        max_tokens = rng.randrange(1, 12)
        stop = [rng.randrange(3, 12)] if rng.random() < 0.3 else None
        arrivals.setdefault(rng.randrange(0, 12), []).append((f"q{i}", prompt, max_tokens, stop))
    step = 0
    while step < 400:
        for rid, prompt, mt, stop in arrivals.pop(step, []):
            V.add_request(
                VRequest(
                    rid, prompt, VSP(max_tokens=mt, stop_token_ids=stop), None, block_hasher=vh
                )
            )
            K.add_request(
                Request(rid, prompt, GP(max_tokens=mt, stop_token_ids=stop), None, block_hasher=kh)
            )
        if rng.random() < 0.05 and K.requests:
            victim = rng.choice(sorted(K.requests))
            a = V.finish_requests(victim, VStatus.FINISHED_ABORTED)
            b = K.finish_requests(victim)
            assert [x[0] for x in a] == b, (a, b)
        if not arrivals and not K.has_unfinished_requests():
            assert V.get_num_unfinished_requests() == 0
            break
        vo, ko = V.schedule(), K.schedule()
        sv, sk = snapshot_out(vo), snapshot_out(ko)
        if sv != sk:
            k = next(k for k in sv if sv[k] != sk[k])
            return f"seed {seed} step {step} cfg {cfg}: output {k}\n vllm  {sv[k]}\n kvlab {sk[k]}"
        sampled = {}
        for rid in ko.num_scheduled_tokens:
            r = K.requests[rid]
            if r.num_computed_tokens >= r.num_tokens:
                sampled[rid] = [model(list(r.all_token_ids))]
        req_ids = list(vo.num_scheduled_tokens)
        mro = ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=[list(sampled.get(r, [])) for r in req_ids],
        )
        vres = V.update_from_output(vo, mro)
        kres = K.update_from_output(ko, sampled)
        vouts = [
            (
                o.request_id,
                list(o.new_token_ids),
                str(o.finish_reason) if o.finish_reason is not None else None,
                prefill(o.prefill_stats),
            )
            for eco in vres.values()
            for o in eco.outputs
        ]
        kouts = [
            (o.request_id, o.new_token_ids, o.finish_reason, prefill(o.prefill_stats))
            for o in kres.outputs
        ]
        if vouts != kouts:
            return f"seed {seed} step {step} cfg {cfg}: tokens\n vllm  {vouts}\n kvlab {kouts}"
        vstats = next(e.scheduler_stats for e in vres.values() if e.scheduler_stats is not None)
        if stats_tuple(vstats) != stats_tuple(kres.scheduler_stats):
            return (
                f"seed {seed} step {step} cfg {cfg}: stats\n vllm  {stats_tuple(vstats)}\n"
                f" kvlab {stats_tuple(kres.scheduler_stats)}"
            )
        vs, ks = state(V), state(K)
        if vs != ks:
            k = next(k for k in vs if vs[k] != ks[k])
            return f"seed {seed} step {step} cfg {cfg}: state {k}\n vllm  {vs[k]}\n kvlab {ks[k]}"
        step += 1
    return None


@pytest.fixture(scope="module", autouse=True)
def _tiny_model_dir(tmp_path_factory):
    """vLLM's ModelConfig needs a model directory: a config.json is enough offline."""
    path = tmp_path_factory.mktemp("tinyllama")
    (path / "config.json").write_text(json.dumps(_TINY_LLAMA))
    MODEL_DIR[:] = [str(path)]
    vinit(vsha)
    init_none_hash(sha256)


@pytest.mark.parametrize("chunk", range(6))
def test_scheduler_matches_vllm(chunk):
    mismatches = [m for seed in range(chunk * 20, chunk * 20 + 20) if (m := run(seed)) is not None]
    assert not mismatches, mismatches[0]
