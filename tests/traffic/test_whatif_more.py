"""kvlab whatif's larger questions: bounds, warm-up, bytes, replicas, parallel runs, the report."""

import json
import re

from click.testing import CliRunner

from kvlab.cli import main

LINES = [
    '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]}',
    '{"timestamp": 3, "input_length": 2048, "output_length": 1, "hash_ids": [0, 1, 4, 5]}',
]


def _run(tmp_path, *args):
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(LINES) + "\n")
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["whatif", str(trace), "--json", str(out), "--no-progress",
                                    *args])  # fmt: skip
    return res, (json.loads(out.read_text()) if out.exists() else None)


def test_infinite_and_belady_are_accepted_with_the_split(tmp_path):
    res, got = _run(tmp_path, "--capacity-tokens", "1024,4096", "--caches", "vllm,belady,infinite")
    assert res.exit_code == 0, res.output
    rows = [(r["cache"], r["capacity_tokens"], r["hit_tokens"], r.get("hits_lost_to_capacity"),
             r.get("hits_lost_to_lru")) for r in got["results"]]
    # infinite: B 1024, C 512, D 1024. At 2 blocks B and D do not fit (refused): both
    # policies keep only C's hit; at 8 blocks nothing is evicted.
    assert rows == [("infinite", None, 2560, None, None), ("vllm", 1024, 512, 2048, 0),
                    ("vllm", 4096, 2560, 0, 0), ("belady", 1024, 512, 2048, 0),
                    ("belady", 4096, 2560, 0, 0)]
    assert "LRU" in res.output  # NOTE: the split's column heading (wrapped at 80 columns)
    res, got = _run(tmp_path, "--capacity-tokens", "4096", "--caches", "infinite")
    assert res.exit_code == 0 and [r["cache"] for r in got["results"]] == ["infinite"]


def test_warmup_counts_the_second_half(tmp_path):
    res, got = _run(tmp_path, "--capacity-tokens", "1e5", "--warmup", "0.5")
    assert res.exit_code == 0, res.output
    vllm = got["results"][1]
    assert (vllm["warmup_requests"], vllm["prompt_tokens"], vllm["hit_tokens"]) == (2, 2648, 1536)
    res, _ = _run(tmp_path, "--capacity-tokens", "1e5", "--warmup", "1")
    assert res.exit_code == 2 and "--warmup" in res.output


def test_model_config_sizes_the_pool_in_bytes(tmp_path):
    res, got = _run(tmp_path, "--model-config", "llama-3.1-8b", "--kv-cache-memory", "1GiB",
                    "--max-model-len", "4096")
    assert res.exit_code == 0, res.output
    row = got["results"][1]
    # 1 GiB / (32 layers x 2 x 8 heads x 128 x 2 B) = 8,192 tokens = 512 blocks of 16.
    assert (row["model"], row["num_gpu_blocks"], row["block_size"], row["capacity_tokens"]) == (
        "llama-3.1-8b", 512, 16, 511 * 16)
    assert (row["hit_tokens"], row["max_model_len"]) == (2560, 4096)
    assert "llama-3.1-8b" in res.output


def test_pool_given_twice_or_not_at_all_is_a_usage_error(tmp_path):
    for args in (["--capacity-tokens", "1e5", "--model-config", "llama-3.1-8b"], []):
        res, got = _run(tmp_path, *args)
        assert res.exit_code == 2 and got is None
        assert "give the pool either in tokens" in res.output
    res, _ = _run(tmp_path, "--model-config", "llama-3.1-8b")
    assert res.exit_code == 2 and "no KV cache budget" in res.output
    res, _ = _run(tmp_path, "--model-config", "llama-3.1-8b", "--kv-cache-memory", "1GiB",
                  "--max-model-len", "131072")
    assert res.exit_code == 1 and "the estimated maximum model length is 8192" in res.output


def test_replicas_write_fleet_rows(tmp_path):
    res, got = _run(tmp_path, "--capacity-tokens", "4096", "--replicas", "2", "--routing",
                    "round-robin,session")
    assert res.exit_code == 0, res.output
    fleet = [(r["routing"], r["hit_tokens"], r["pooled_hit_tokens"]) for r in got["fleet"]]
    # Round-robin: A, C on replica 0 (C hits 512), B, D on 1 (D hits B's 1,024). Session (the
    # first block past the shared id 0): A, B, D share id 1 (replica 1); C has no such block.
    assert fleet == [("round-robin", 1536, 2560), ("session", 2048, 2560)]
    res, _ = _run(tmp_path, "--capacity-tokens", "4096", "--replicas", "2", "--routing", "best")
    assert res.exit_code == 2 and "unknown routing 'best'" in res.output


def test_jobs_give_the_serial_rows(tmp_path):
    args = ("--capacity-tokens", "1024,4096", "--caches", "vllm,nano,radix,belady",
            "--block-size", "256,512")
    _, serial = _run(tmp_path, *args)
    res, parallel = _run(tmp_path, *args, "--jobs", "2")
    assert res.exit_code == 0 and parallel == serial


def test_html_report_is_offline_and_bilingual(tmp_path):
    html = tmp_path / "r.html"
    res, _ = _run(tmp_path, "--capacity-tokens", "1024,4096", "--caches", "vllm,belady",
                  "--replicas", "2", "--html", str(html))
    assert res.exit_code == 0, res.output
    text = html.read_text()
    assert "<svg" in text and "hit rate at each capacity" in text and "各容量下的命中率" in text
    assert "routing across replicas" in text and "多副本间的路由" in text
    assert "a few misses explained" in text and "request 3 (mc-3)" in text
    assert not re.search(r"(src|href)=.https?:", text)  # NOTE: nothing fetched from the web


def test_libcachesim_policies_beside_vllm(tmp_path):
    import pytest

    pytest.importorskip("libcachesim")  # NOTE: kvlab[policies], in kvlab[all]
    res, got = _run(tmp_path, "--capacity-tokens", "1024,4096", "--policies", "lru,s3fifo")
    assert res.exit_code == 0, res.output
    rows = {(r["cache"], r["capacity_tokens"]): r["hit_tokens"] for r in got["results"]}
    # libCacheSim's LRU driven in vLLM's freeing order gives vLLM's hits here.
    assert rows[("lru", 1024)] == rows[("vllm", 1024)] == 512
    assert rows[("lru", 4096)] == rows[("vllm", 4096)] == 2560
    # S3-FIFO admits new blocks to a small FIFO (here one block of the eight): a request's own
    # blocks push each other out of it before any is asked for twice.
    assert rows[("s3fifo", 4096)] == 0
    # NOTE: libCacheSim does not count evictions: null in the JSON, an empty cell in the table
    assert {r["evicted_blocks"] for r in got["results"] if r["cache"] in ("lru", "s3fifo")} == {
        None}
    assert re.search(r"│ s3fifo +│ +512 │ +4,096 │ +0\.000 │ +0 │ +│ +0 │", res.output)
    res, _ = _run(tmp_path, "--capacity-tokens", "1024", "--policies", "belady2")
    assert res.exit_code == 2 and "unknown policy 'belady2'; allowed: fifo, lru" in res.output


def test_tables_print_every_number_whole_into_a_pipe(tmp_path):
    # NOTE: rich squeezes a table to 80 columns off a terminal and cut these to "1,000,0…"
    res, got = _run(tmp_path, "--capacity-tokens", "1e9", "--caches", "vllm,belady",
                    "--replicas", "2", "--routing", "least-loaded")
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    lines = [ln for ln in res.output.splitlines() if "1,000,000,000" in ln]
    assert [ln.split("│")[1].strip() for ln in lines] == ["vllm", "belady", "least-loaded"]
    assert "lost to capacity" in res.output and "capacity per replica (tokens)" in res.output
    res, _ = _run(tmp_path, "--model-config", "deepseek-v2-lite", "--kv-cache-memory", "1GiB",
                  "--max-model-len", "4096")
    assert res.exit_code == 0 and "…" not in res.output, res.output
    # 1 GiB / (27 layers x 576 (MLA's latent + rope) x 2 B x 64 tokens) = 539 blocks of 64
    assert re.search(r"│ deepseek-v2-lite +│ +1\.00 │ +539 │ +64 │ +1 │ +0\.\d{3} │", res.output)


def test_sizing_errors_are_translated_under_lang_zh(tmp_path):
    res, _ = _run(tmp_path, "--model-config", "llama-3.1-8b", "--lang", "zh")
    assert res.exit_code == 2 and "没有 KV 缓存预算：请给出 --kv-cache-memory 和/或 --gpu-memory" in res.output
    res, _ = _run(tmp_path, "--model-config", "no-such-model", "--kv-cache-memory", "1GiB", "--lang", "zh")
    assert res.exit_code == 2 and "找不到模型配置 'no-such-model'：请给出 config.json 的路径" in res.output
    assert "llama-3.1-8b" in res.output
    res, _ = _run(tmp_path, "--model-config", "llama-3.1-8b", "--kv-cache-memory", "16 gigs")
    assert res.exit_code == 2 and "'16 gigs' is not a size; allowed: a number with B" in res.output
