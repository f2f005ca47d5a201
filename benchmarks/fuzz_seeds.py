"""Write the seed inputs of every fuzz target into tests/fuzz_corpus/<target>/seed-*.

Seeds come from real files: traces recorded from kvlab's KVCacheManager (the viz test
scenarios), the recorded vLLM 0.22.1 / 0.33.0 KV-event streams (tests/data/kv_events), the
KV events vLLM 0.22.1 itself emitted in the oracle fixtures (tests/oracle/fixtures), the
Mooncake trace excerpts (tests/data/mooncake), and SmolLM2's GGUF metadata (its vocabulary cut
to the first 400 tokens so the seed stays small). Rerun after a format change:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/fuzz_seeds.py
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fuzz_corpus"
sys.path.insert(0, str(ROOT / "tests" / "viz"))
sys.path.insert(0, str(ROOT / "tests" / "oracle"))


def _write(target: str, name: str, data: bytes) -> None:
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data)


def _traces() -> dict[str, object]:
    from _viz_traces import hybrid_trace, shared_prefix_trace

    from kvlab.kv_events import read_kv_event_file

    kvev = ROOT / "tests" / "data" / "kv_events" / "vllm-0.33.0.kvev"
    return {"shared-prefix": shared_prefix_trace(), "hybrid": hybrid_trace(),
            "kv-events": read_kv_event_file(kvev).trace()}  # fmt: skip


def player_seeds() -> None:
    """encode_trace's JSON (what an exported page embeds) of the same traces."""
    from kvlab.viz import encode_trace

    for name, trace in _traces().items():
        _write("player-js", name, json.dumps(encode_trace(trace)).encode())


def _entries(raw: bytes) -> bytes:
    """A trace file as the kvtrace-entries target's input: name\\0size\\0bytes per entry."""
    out = b""
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            out += info.filename.encode() + b"\0" + str(len(data)).encode() + b"\0" + data
    return out


def trace_seeds(tmp: Path) -> None:
    from kvlab.trace import save_trace

    for name, trace in _traces().items():
        path = tmp / f"{name}.kvtrace"
        save_trace(trace, path)
        _write("kvtrace", name, path.read_bytes())
        _write("kvtrace-entries", name, _entries(path.read_bytes()))


def _oracle_batches(limit: int = 6) -> list[object]:
    """KVEventBatches of the events vLLM 0.22.1 emitted (take_events) in the oracle fixtures."""
    from oracle_replay import load_fixture

    from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch

    doc = load_fixture(sorted((ROOT / "tests" / "oracle" / "fixtures").glob("*.cbor.gz"))[0])
    batches = []
    for rec in doc["records"]:
        def h(v: object, table: list = rec["hashes"]) -> object:
            return bytes(table[int(v[1:])]) if isinstance(v, str) and v.startswith("#") else v

        for step in rec["steps"]:
            if step[0] != "c" or step[1] != "take_events" or not step[3]:
                continue
            events = []
            for e in step[3]:
                if e[0] == "BlockStored":
                    events.append(BlockStored([h(x) for x in e[1]], h(e[2]), list(e[3]), *e[4:12]))
                elif e[0] == "BlockRemoved":
                    events.append(BlockRemoved([h(x) for x in e[1]], e[2], e[3]))
                else:
                    events.append(AllBlocksCleared())
            batches.append(KVEventBatch(float(len(batches)), events, 0))
            if len(batches) >= limit:
                return batches
    return batches


def kv_event_seeds(tmp: Path) -> None:
    from kvlab.kv_events import encode_kv_event_payload, write_kv_event_messages
    from kvlab.kv_events.wire import _read_frame

    data = ROOT / "tests" / "data" / "kv_events"
    for rec in ("vllm-0.22.1", "vllm-0.33.0"):
        raw = (data / f"{rec}.kvev").read_bytes()
        _write("kvev", rec, raw)
        with open(data / f"{rec}.kvev", "rb") as f:
            f.seek(6)
            frames, size = [], len(raw)
            while (frame := _read_frame(f, size)) is not None:
                frames.append(frame)
        for i, (_, _, payload) in enumerate(frames):
            _write("kv-event-payload", f"{rec}-{i}", payload)
        jsonl = tmp / f"{rec}.jsonl"
        write_kv_event_messages(jsonl, frames)
        _write("kvev-jsonl", rec, jsonl.read_bytes())
    batches = _oracle_batches()
    for i, batch in enumerate(batches):
        for version in ("0.22.1", "0.33.0"):
            _write("kv-event-payload", f"oracle-{i}-{version}", encode_kv_event_payload(batch, version))
    path = tmp / "oracle.kvev"
    write_kv_event_messages(path, [(b"kv", i, b) for i, b in enumerate(batches)])
    _write("kvev", "oracle-0.22.1", path.read_bytes())


def workload_seeds() -> None:
    from kvlab.compare.workloads import shared_system_prompt

    data = ROOT / "tests" / "data" / "mooncake"
    for name in ("conversation", "synthetic"):
        lines = (data / f"{name}_excerpt.jsonl").read_text().splitlines()
        _write("mooncake", name, ("\n".join(lines[:6]) + "\n").encode())
        _write("mooncake", f"{name}-shared", ("\n".join(lines[20:26]) + "\n").encode())
    w = shared_system_prompt(num_requests=3, system_len=12, user_len=4, max_tokens=3, seed=0)
    lines = [json.dumps({"request_id": r.request_id, "prompt_token_ids": list(r.prompt_token_ids),
                         "max_tokens": r.max_tokens, "arrival_step": r.arrival_step})
             for r in w.requests]  # fmt: skip
    _write("workload-jsonl", "shared-system-prompt", ("\n".join(lines) + "\n").encode())
    _write("workload-jsonl", "outputs-depends", (
        '{"request_id": "a", "prompt_token_ids": [1, 2, 3, 4], "max_tokens": 2, '
        '"arrival_step": 0, "output_token_ids": [5, 6]}\n'
        '{"request_id": "b", "prompt_token_ids": [1, 2, 3, 4, 5, 6, 7], "max_tokens": 1, '
        '"arrival_step": 3, "depends_on": "a"}\n').encode())  # fmt: skip


def gguf_seeds(tmp: Path) -> None:
    """SmolLM2's metadata (vocab cut to 400 tokens, the merges among them), tiny tensors."""
    import gguf
    import numpy as np

    from kvlab.model.gguf_loader import default_gguf_path, gguf_field, open_gguf

    src = open_gguf(default_gguf_path())
    tokens = gguf_field(src, "tokenizer.ggml.tokens")[:400]
    vocab = set(tokens)
    merges = [m for m in gguf_field(src, "tokenizer.ggml.merges")
              if "".join(m.split(" ")) in vocab and all(p in vocab for p in m.split(" "))]  # fmt: skip
    for name, arch, extra in (("smollm2-llama", "llama", {}),
                              ("qwen2-window", "qwen2", {"sliding": True})):  # fmt: skip
        w = gguf.GGUFWriter(tmp / f"{name}.gguf", arch)
        w.add_block_count(2)
        w.add_context_length(8192)
        w.add_embedding_length(64)
        w.add_feed_forward_length(128)
        w.add_head_count(4)
        w.add_head_count_kv(2)
        w.add_rope_freq_base(100000.0)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(len(tokens))
        if extra.get("sliding"):
            w.add_uint32(f"{arch}.attention.sliding_window", 16)
            w.add_array(f"{arch}.attention.sliding_window_pattern", [True, False])
            w.add_string(f"{arch}.rope.scaling.type", "linear")
            w.add_float32(f"{arch}.rope.scaling.factor", 2.0)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("smollm")
        w.add_token_list(tokens)
        w.add_token_types(gguf_field(src, "tokenizer.ggml.token_type")[:400])
        w.add_token_merges(merges)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(False)
        w.add_chat_template(gguf_field(src, "tokenizer.chat_template"))
        w.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
        w.add_tensor("blk.0.attn_q.weight", np.zeros((4, 4), dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        _write("gguf", name, (tmp / f"{name}.gguf").read_bytes())


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        trace_seeds(Path(tmp))
        player_seeds()
        kv_event_seeds(Path(tmp))
        workload_seeds()
        gguf_seeds(Path(tmp))
    for d in sorted(OUT.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
