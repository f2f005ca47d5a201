"""The recorded streams in tests/data/kv_events (one per wire form): the generator reproduces them
byte for byte, and kvlab rebuilds the same server history from either form."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import msgspec
import pytest

from kvlab.kv_events.stream import cached_key_counts, read_kv_event_file
from kvlab.kv_events.wire import read_kv_event_messages

DATA = Path(__file__).resolve().parents[1] / "data" / "kv_events"


def _generator():
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def key(h: int) -> tuple[bytes, int]:
    return h.to_bytes(8, "big"), 0


def test_generator_reproduces_the_files(tmp_path) -> None:
    paths = _generator().main(tmp_path)
    assert [p.name for p in paths] == ["vllm-0.22.1.kvev", "vllm-0.33.0.kvev"]
    for p in paths:
        assert p.read_bytes() == (DATA / p.name).read_bytes(), f"rerun make_fixtures.py: {p.name}"


@pytest.mark.parametrize("version", ["0.22.1", "0.33.0"])
def test_rebuilt_history_is_exact(version: str) -> None:
    path = DATA / f"vllm-{version}.kvev"
    decoded = list(read_kv_event_messages(path, decoded=True))
    assert [seq for seq, _ in decoded] == [0, 1, 2, 3]
    forms = {d.form for _, d in decoded if d.batch.events}
    assert forms == {"array" if version == "0.22.1" else "map"}
    raw = msgspec.msgpack.decode(_generator().messages(version)[0][2])
    first = raw[1][0]
    assert (first[0], len(first)) == ("BlockStored", 12) if version == "0.22.1" else (
        first["type"] == "BlockStored" and first["session_id"] == "chat-1")
    builder = read_kv_event_file(path)
    trace = builder.trace()
    steps = trace.steps()
    after = [cached_key_counts(trace.state_at(int((steps <= i).nonzero()[0][-1])))
             for i in range(3)]  # fmt: skip
    assert after == [{key(0xA1): 1, key(0xA2): 1}, {key(0xA1): 1, key(0xB1): 1}, {key(0xC1): 1}]
    assert builder.num_blocks == 2 and builder.num_unknown_removed == 0
    assert [s for s, _ in builder.batch_seqs] == [0, 1, 2, 3]
    if version == "0.22.1":
        assert builder.tiers == {} and all(d.newer_fields == ({},) * len(d.batch.events)
                                           for _, d in decoded)  # fmt: skip
        return
    # 0xA2 went to CPU (and left it at seq 3), 0xA1 to STORAGE; neither took a GPU slot
    assert {t: dict(c) for t, c in builder.tiers.items()} == {"CPU": {}, "STORAGE": {key(0xA1): 1}}
    assert decoded[1][1].newer_fields == (
        {}, {"session_id": "chat-2", "lookahead_token_ids": [[54]]},
        {"locality": "LOCAL", "ownership": "offloading"}, {"locality": "REMOTE"})  # fmt: skip
