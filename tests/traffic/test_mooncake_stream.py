"""iter_mooncake streams a Mooncake trace with the same checks as read_mooncake; read_mooncake
refuses, before reading, a file it could not hold (benchmarks/bench_mooncake_scale.py measures
the 100x conversation trace: refused whole, streamed in ~200 MB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlab.traffic import iter_mooncake, read_mooncake
from kvlab.traffic.mooncake import MAX_LINE_CHARS, READ_BYTES_PER_FILE_BYTE, _PrefixIds

DATA = Path(__file__).resolve().parents[1] / "data" / "mooncake"


def test_streamed_and_whole_reads_agree() -> None:
    path = DATA / "conversation_excerpt.jsonl"
    stream = iter_mooncake(path)
    assert next(stream).request_id == "mc-0"  # NOTE: lazy: nothing read past the first line
    assert list(iter_mooncake(path)) == read_mooncake(path)
    assert [r.request_id for r in iter_mooncake(path, limit=3)] == ["mc-0", "mc-1", "mc-2"]


def test_a_file_too_big_to_hold_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text((DATA / "synthetic_excerpt.jsonl").read_text() * 3)
    need = path.stat().st_size * READ_BYTES_PER_FILE_BYTE
    with pytest.raises(ValueError, match=r"big\.jsonl: reading this trace whole would take about "
                       r"[0-9.]+ GiB of memory \(6 bytes per byte of file\), over max_memory="
                       r".*stream it with kvlab\.traffic\.iter_mooncake"):  # fmt: skip
        read_mooncake(path, max_memory=need - 1)
    assert len(read_mooncake(path, max_memory=need)) == 900


def test_the_prefix_check_holds_sparse_and_dense_ids_alike() -> None:
    table, huge = _PrefixIds(), 10**30
    lines = [{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [5, huge, 7]},
             {"timestamp": 1, "input_length": 1000, "output_length": 1, "hash_ids": [5, huge]},
             {"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [huge, 9]}]  # fmt: skip
    from kvlab.traffic.mooncake import iter_mooncake_lines

    def read_lines(objs):
        return list(iter_mooncake_lines(json.dumps(x) for x in objs))

    with pytest.raises(ValueError, match=rf"line 2: hash id {huge} covers 488 tokens here but 512"):
        list(iter_mooncake_lines(json.dumps(x) for x in lines))
    with pytest.raises(ValueError, match=rf"line 2: hash id {huge} follows id -1 here but id 5"):
        list(iter_mooncake_lines([json.dumps(lines[0]), json.dumps(lines[2])]))
    table.check(read_lines(lines[:1])[0])
    assert table.sparse == {huge: (5, 512), 7: (huge, 76)} and len(table.parent) == 1 << 16


def test_lines_are_read_bounded(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_text('{"timestamp": 0' + " " * (MAX_LINE_CHARS + 10) + "}\n")
    with pytest.raises(ValueError, match=rf"long\.jsonl: line 1: longer than MAX_LINE_CHARS="):
        read_mooncake(path)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"deep\.jsonl: line 1: JSON nested too deeply"):
        read_mooncake(deep)
