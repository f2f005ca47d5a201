"""A what-if streamed over a Mooncake file (kvlab.traffic.stream, ``kvlab whatif --stream``)
takes exactly the decisions of the whole-list sweep, refuses what it cannot stream before
reading, and the CLI refuses a trace too big to hold up front, pointing at --stream
(benchmarks/bench_mooncake_scale.py runs it on the 1.2 M-request trace: peak memory there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.traffic import (
    prepare_blocks,
    read_mooncake,
    replay_sequence,
    sweep,
    sweep_mooncake_stream,
    sweep_rows,
)
from kvlab.traffic.stream import _SeenIds

DATA = Path(__file__).resolve().parents[1] / "data" / "mooncake"


@pytest.mark.parametrize("name", ["conversation_excerpt.jsonl", "synthetic_excerpt.jsonl"])
def test_streamed_rows_equal_the_whole_list_sweep(name: str) -> None:
    path = DATA / name
    caps, sizes = [2048, 100_000, 1_000_000], [512, 64]
    want = sweep_rows(sweep(read_mooncake(path), ["vllm", "radix"], caps, sizes))
    num, got = sweep_mooncake_stream(path, ["vllm", "radix"], caps, sizes)
    assert num == 300 and sweep_rows(got) == want
    for bs in sizes:  # NOTE: vLLM's rows are kvlab.core's manager, replayed capacity by capacity
        blocked = prepare_blocks(read_mooncake(path), bs)
        core = [replay_sequence(blocked, "vllm", c) for c in caps]
        rows = [r for r in got if r.cache == "vllm" and r.block_size == bs]
        assert [(r.hit_tokens, r.evicted_blocks, r.rejected) for r in rows] == [
            (r.hit_tokens, r.evicted_blocks, r.rejected) for r in core]
    assert [r.per_request_hit_tokens for r in got] == [[]] * 14  # NOTE: nothing per request
    assert any(r["evicted_blocks"] for r in want) and any(r["rejected"] for r in want)


def test_sparse_huge_ids_stream_like_the_sweep(tmp_path: Path) -> None:
    huge = 10**30
    lines = [{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [5, huge, 7]},
             {"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [5, huge]},
             {"timestamp": 2, "input_length": 1100, "output_length": 1, "hash_ids": [5, huge, 7]},
             {"timestamp": 3, "input_length": 300, "output_length": 1, "hash_ids": [2**40]}]  # fmt: skip
    path = tmp_path / "sparse.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    want = sweep_rows(sweep(read_mooncake(path), ["vllm", "radix"], [1024, 4096], [256]))
    num, got = sweep_mooncake_stream(path, ["vllm", "radix"], [1024, 4096], [256])
    assert num == 4 and sweep_rows(got) == want
    assert [r["hit_tokens"] for r in want] == [1792, 0, 1792, 0, 1792]


def test_seen_ids_keep_dense_ids_flat_and_the_rest_in_a_set() -> None:
    seen = _SeenIds()
    for h in (3, 70_000, 10**18, 3):
        seen.add(h)
    assert 3 in seen and 70_000 in seen and 10**18 in seen and 4 not in seen
    assert seen.num_ids == 3 and seen.sparse == {10**18} and len(seen.flags) == 1 << 17


@pytest.mark.parametrize(("args", "message"), [
    ((["nano"], [4096], [512]),
     r"cache 'nano' cannot be streamed; allowed: vllm, radix \(infinite is added\)"),
    ((["vllm"], [4096], [48]),
     r"block size 48 is not allowed for a Mooncake trace; allowed: the divisors of 512"),
    ((["vllm"], [100], [512]),
     r"capacity 100 tokens is below one block \(512 tokens\); allowed: >= 512"),
    ((["vllm"], [], [512]), r"capacities_tokens is empty; allowed: at least one"),
])  # fmt: skip
def test_what_cannot_be_streamed_is_refused_before_reading(args, message, tmp_path) -> None:
    with pytest.raises(ValueError, match=message):
        sweep_mooncake_stream(tmp_path / "not-there.jsonl", *args)


def test_a_bad_line_far_in_names_the_file_and_line_and_returns_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    lines = (DATA / "conversation_excerpt.jsonl").read_text().splitlines()
    path.write_text("\n".join([*lines[:250], '{"timestamp": 1, "input_length": 9}', *lines[250:]]))
    with pytest.raises(ValueError, match=r"bad\.jsonl: line 251: missing 'output_length', "
                       r"'hash_ids'; a Mooncake request has timestamp, input_length"):  # fmt: skip
        sweep_mooncake_stream(path, ["vllm"], [100_000], [512])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match=r"empty\.jsonl: no request in this mooncake file"):
        sweep_mooncake_stream(empty, ["vllm"], [100_000], [512])


def _whatif(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["whatif", *args])


def test_cli_stream_writes_the_rows_of_the_whole_list_run(tmp_path: Path) -> None:
    trace = str(DATA / "conversation_excerpt.jsonl")
    flags = ["--capacity-tokens", "1e5,1e6", "--caches", "vllm,radix", "--block-size", "512,128"]
    a, b = tmp_path / "whole.json", tmp_path / "stream.json"
    assert _whatif(trace, *flags, "--json", str(a)).exit_code == 0
    res = _whatif(trace, *flags, "--stream", "--json", str(b))
    assert res.exit_code == 0, res.output
    assert "conversation_excerpt.jsonl: 300 requests, block size 512, 128" in res.output
    assert json.loads(b.read_text()) == json.loads(a.read_text())
    res = _whatif(trace, "--capacity-tokens", "1e5", "--stream", "--limit", "7", "--json", str(b))
    assert res.exit_code == 0 and "7 requests" in res.output
    assert json.loads(b.read_text())["results"][0]["prompt_tokens"] == sum(
        r.num_prompt_tokens for r in read_mooncake(trace, limit=7))


@pytest.mark.parametrize(("extra", "message"), [
    (["--caches", "nano-vllm"], "Invalid value for --caches: nano-vllm cannot be streamed; "
     "allowed with --stream: vllm, radix (infinite is added)"),
    (["--caches", "vllm,belady"], "belady cannot be streamed; allowed with --stream: vllm, radix"),
    (["--format", "jsonl"], "--stream reads Mooncake traces only, got --format jsonl; allowed: "
     "mooncake"),
    (["--clock", "timed"], "--stream replays on the sequence clock only, got 'timed'; allowed: "
     "sequence"),
    (["--top-prefixes", "3", "--warmup", "0.5", "--replicas", "2"], "--stream keeps no request "
     "list, which --top-prefixes, --warmup, --replicas need; run them without --stream, with "
     "--limit N"),
    (["--trace-at", "1e5", "--explain", "0"], "which --trace-at, --explain need"),
])  # fmt: skip
def test_cli_stream_refuses_what_it_cannot_do_with_exit_2(extra, message, tmp_path) -> None:
    out = tmp_path / "r.json"
    res = _whatif(str(DATA / "conversation_excerpt.jsonl"), "--capacity-tokens", "1e5",
                  "--stream", "--json", str(out), *extra)  # fmt: skip
    assert res.exit_code == 2 and message in " ".join(res.output.split())
    assert not out.exists()


def test_cli_refuses_a_trace_too_big_to_hold_up_front(tmp_path: Path, monkeypatch) -> None:
    import kvlab.traffic.formats as formats
    import kvlab.traffic.mooncake as mooncake

    trace = DATA / "synthetic_excerpt.jsonl"
    monkeypatch.setattr(mooncake, "MAX_READ_MEMORY", 2**18)  # NOTE: the excerpt needs 0.4 MiB
    def unread(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the trace was read")

    monkeypatch.setattr(formats, "read_mooncake", unread)  # NOTE: refused before any reading
    out = tmp_path / "r.json"
    res = _whatif(str(trace), "--capacity-tokens", "1e5", "--json", str(out))
    assert res.exit_code == 1 and not out.exists()
    assert " ".join(res.output.split()) == (
        f"Error: {trace}: reading this trace whole would take about 0.0 GiB of memory, over the "
        "0.0 GiB kvlab allows; add --stream to replay it one request at a time in bounded "
        "memory (caches vllm and radix), or --limit N for its first N requests")
    res = _whatif(str(trace), "--capacity-tokens", "1e5", "--lang", "zh")
    assert res.exit_code == 1 and "整个读入这条轨迹大约需要 0.0 GiB 内存，超过了 kvlab 允许的 0.0 GiB；加上 " \
        "--stream 可以在有上界的内存里逐条回放" in res.output  # fmt: skip
    assert _whatif(str(trace), "--capacity-tokens", "1e5", "--stream").exit_code == 0
