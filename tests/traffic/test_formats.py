"""load_traffic and kvlab whatif --format: jsonl, kvtrace, kvevents (exact hits), bad input."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    sha256,
)
from kvlab.core.kv_events import BlockRemoved, BlockStored, KVEventBatch
from kvlab.core.request import RequestStatus
from kvlab.kv_events import write_kv_event_messages
from kvlab.trace import save_trace
from kvlab.traffic import (
    FORMATS,
    load_traffic,
    prepare_blocks,
    read_mooncake_lines,
    replay_sequence,
)

JSONL = [  # NOTE: c arrives first (step 0), then a, then b
    {"request_id": "a", "prompt_token_ids": [1, 2, 3, 4, 5], "max_tokens": 1, "arrival_step": 1},
    {"request_id": "b", "prompt_token_ids": [1, 2, 3, 4, 9], "max_tokens": 1, "arrival_step": 2},
    {"request_id": "c", "prompt_token_ids": [1, 2, 7], "max_tokens": 3, "arrival_step": 0},
]


def _write(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def _stored(hashes, parent, bs=16, medium="GPU", group=None):
    return BlockStored(hashes, parent, [], bs, None, medium, None, group_idx=group)


def _events(tmp_path, batches):
    path = tmp_path / "ev.jsonl"
    write_kv_event_messages(path, [(b"kv", i, b) for i, b in enumerate(batches)])
    return path


def test_jsonl_sorted_by_arrival_and_hits_counted(tmp_path):
    reqs = load_traffic(_write(tmp_path / "w.jsonl", JSONL), "jsonl")
    assert [(r.request_id, r.arrival_ms, r.num_prompt_tokens) for r in reqs] == [
        ("c", 0.0, 3), ("a", 1.0, 5), ("b", 2.0, 5)]
    res = replay_sequence(prepare_blocks(reqs, 2), "vllm", 100)
    # c stores [1,2]; a hits [1,2] and stores [3,4]; b hits [1,2][3,4] (cap: 2 blocks of 5 tokens)
    assert res.per_request_hit_tokens == [0, 2, 4]


def test_kvtrace_replays_the_recorded_sharing(tmp_path):
    lines = [
        '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
        '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
        '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]}',
    ]
    rec = replay_sequence(prepare_blocks(read_mooncake_lines(lines), 512), "vllm", 4096,
                          record=True)
    save_trace(rec.trace, tmp_path / "t.kvtrace")
    reqs = load_traffic(tmp_path / "t.kvtrace", "kvtrace")
    assert [(r.request_id, r.num_prompt_tokens) for r in reqs] == [
        ("mc-0", 1024), ("mc-1", 1100), ("mc-2", 600)]
    again = replay_sequence(prepare_blocks(reqs, 512), "vllm", 4096)
    assert again.per_request_hit_tokens == rec.per_request_hit_tokens == [0, 1024, 512]
    assert replay_sequence(prepare_blocks(reqs, 256), "vllm", 4096).per_request_hit_tokens == [
        0, 1024, 512]


def test_kvevents_chains_become_requests(tmp_path):
    path = _events(tmp_path, [
        KVEventBatch(100.0, [_stored([10, 11], None)]),
        KVEventBatch(100.5, [_stored([12], 11), _stored([20], 10), BlockRemoved([12], "GPU")]),
        KVEventBatch(101.0, [_stored([30], None, group=1), _stored([31], None, medium="CPU")]),
    ])
    reqs = load_traffic(path, "kvevents")
    assert [(r.request_id, r.arrival_ms, r.hash_ids, r.num_prompt_tokens, r.hash_block_size)
            for r in reqs] == [("ev-0", 0.0, (0, 1), 32, 16), ("ev-1", 500.0, (0, 1, 2), 48, 16),
                               ("ev-2", 500.0, (0, 3), 32, 16)]
    assert replay_sequence(prepare_blocks(reqs, 16), "vllm", 1600).per_request_hit_tokens == [
        0, 32, 16]
    assert replay_sequence(prepare_blocks(reqs, 8), "vllm", 1600).per_request_hit_tokens == [
        0, 32, 16]


def test_kvevents_block_size_change_named(tmp_path):
    path = _events(tmp_path, [KVEventBatch(0.0, [_stored([1], None)]),
                              KVEventBatch(1.0, [_stored([2], None, bs=32)])])
    with pytest.raises(ValueError, match=r"ev.jsonl: batch 2 \(seq 1\): block_size 32 after 16; "
                                         "allowed: one block size per recording"):
        load_traffic(path, "kvevents")


def test_bad_inputs_name_line_and_allowed(tmp_path):
    with pytest.raises(ValueError, match="unknown format 'csv'; allowed: " + ", ".join(FORMATS)):
        load_traffic(tmp_path / "x", "csv")
    bad = tmp_path / "w.jsonl"
    bad.write_text(json.dumps(JSONL[0]) + "\n{\"max_tokens\": 1, \"prompt_token_ids\": [-1]}\n")
    with pytest.raises(ValueError, match=r"w.jsonl: line 2: prompt_token_ids must hold token ids"):
        load_traffic(bad, "jsonl")
    with pytest.raises(ValueError, match="not a kvlab trace"):
        load_traffic(bad, "kvtrace")
    with pytest.raises(ValueError, match=r"ev.jsonl: no request in this kvevents file"):
        load_traffic(_events(tmp_path, [KVEventBatch(0.0, [BlockRemoved([1], "GPU")])]),
                     "kvevents")
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        load_traffic(bad, "jsonl", limit=0)


def test_whatif_formats_on_the_command_line(tmp_path):
    out = tmp_path / "r.json"
    w = _write(tmp_path / "w.jsonl", JSONL)
    res = CliRunner().invoke(main, ["whatif", str(w), "--format", "jsonl", "--block-size", "2",
                                    "--capacity-tokens", "100", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())["results"]
    assert [(r["cache"], r["hit_tokens"], r["prompt_tokens"]) for r in rows] == [
        ("infinite", 6, 13), ("vllm", 6, 13)]


def test_whatif_bad_format_input_writes_nothing(tmp_path):
    out = tmp_path / "r.json"
    ev = _events(tmp_path, [KVEventBatch(0.0, [_stored([1, 2], None)])])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt_token_ids": [1], "max_tokens": 1}\nnot json\n')
    for args, code, text in (
        ([str(ev), "--format", "kvevents", "--block-size", "5"], 1,
         "block_size 5 does not divide the trace's hash block size 16"),
        ([str(bad), "--format", "jsonl"], 1, "line 2: not JSON"),
        ([str(bad), "--format", "mooncake", "--block-size", "48"], 2, "the divisors of 512"),
        ([str(bad), "--format", "kvev"], 2, "allowed: mooncake, jsonl, kvtrace, kvevents"),
    ):
        res = CliRunner().invoke(main, ["whatif", *args, "--capacity-tokens", "1e4",
                                        "--json", str(out)])
        assert res.exit_code == code and text in res.output, (args, res.output)
    assert not out.exists()


def test_kvevents_from_kvlab_manager_round_trip(tmp_path):
    """A KV-event stream from kvlab's own KVCacheManager replays to the hits it recorded."""
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = KVCacheManager(KVCacheConfig(32, [], [KVCacheGroupSpec(["l"], spec)]), max_model_len=64,
                         hash_block_size=4, enable_kv_cache_events=True)  # fmt: skip
    hasher = get_request_block_hasher(4, sha256)
    prompts = {"A": list(range(10)), "B": [*range(8), 50, 51, 52, 53, 54],
               "C": [*range(4), *range(60, 68), 70]}  # fmt: skip
    hits, batches = [], []
    for i, (rid, prompt) in enumerate(prompts.items()):
        r = Request(rid, prompt, SamplingParams(max_tokens=1), None, block_hasher=hasher)
        blocks, hit = mgr.get_computed_blocks(r)
        mgr.allocate_slots(r, r.num_tokens - hit, hit, blocks)
        r.status = RequestStatus.FINISHED_LENGTH_CAPPED
        mgr.free(r)
        hits.append(hit)
        batches.append(KVEventBatch(float(i), mgr.take_events()))
    reqs = load_traffic(_events(tmp_path, batches), "kvevents")
    assert [r.hash_ids for r in reqs] == [(0, 1), (0, 1, 2), (0, 3, 4)]
    assert hits == [0, 8, 4]
    assert replay_sequence(prepare_blocks(reqs, 4), "vllm", 128).per_request_hit_tokens == hits


def test_kvevents_both_wire_forms_give_the_same_traffic():
    """The recorded streams of vLLM 0.22.1 (arrays) and 0.33.0 (maps, CPU tier events too)."""
    data = Path(__file__).parents[1] / "data" / "kv_events"
    got = {}
    for version in ("0.22.1", "0.33.0"):
        reqs = load_traffic(data / f"vllm-{version}.kvev", "kvevents")
        hits = replay_sequence(prepare_blocks(reqs, 4), "vllm", 64).per_request_hit_tokens
        got[version] = ([(r.hash_ids, r.num_prompt_tokens, r.arrival_ms) for r in reqs], hits)
    assert got["0.22.1"] == got["0.33.0"] == (
        [((0, 1), 8, 0.0), ((0, 2), 8, 1000.0), ((3,), 4, 2000.0)], [0, 4, 0])
