"""Write the recorded KV-event streams in this folder, one per wire form.

    PYTHONPATH=. python tests/data/kv_events/make_fixtures.py      # from the repository root

Each file is a ``.kvev`` recording (kvlab.kv_events.wire) of the same small server
history, encoded by ``encode_kv_event_payload`` byte for byte as vLLM's publisher does:

* ``vllm-0.22.1.kvev``: the array form (events as tagged arrays, every field written);
* ``vllm-0.33.0.kvev``: the map form, with what 0.33 adds: a CPU offloading tier (locality,
  ownership), a STORAGE tier, ``session_id`` and ``lookahead_token_ids`` on GPU stores.

The history (block_size 4, hashes as vLLM's default 64-bit ints, topic "kv-events"):
seq 0 stores prompt A's blocks 0xA1, 0xA2 on the GPU; seq 1 evicts 0xA2 from the GPU and stores
B's 0xB1 after 0xA1 (0.33: it is offloaded to CPU first, and 0xA1 to STORAGE); seq 2 resets the
prefix cache (AllBlocksCleared: GPU only) and stores 0xC1; seq 3 drops 0xA2 from CPU.
tests/kv_events/test_fixtures.py checks that this script reproduces the files and that
kvlab rebuilds the history from them exactly.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
from kvlab.kv_events.format import encode_kv_event_payload
from kvlab.kv_events.wire import write_kv_event_messages

HERE = Path(__file__).resolve().parent
TOPIC = b"kv-events"
VERSIONS = ("0.22.1", "0.33.0")


def _stored(hashes, parent, tokens, medium="GPU"):
    return BlockStored(hashes, parent, tokens, 4, None, medium, None, [None] * len(hashes), 0,
                       "full_attention", None)  # fmt: skip


def history(version: str) -> list[tuple[KVEventBatch, list[dict]]]:
    """The batches (ts, events, dp rank 0) and per event the fields newer than 0.22.1."""
    new = version != "0.22.1"
    b0 = [_stored([0xA1, 0xA2], None, list(range(8)))]
    x0 = [{"session_id": "chat-1", "lookahead_token_ids": [[4], [8]]} if new else {}]
    # NOTE: vLLM evicts (BlockRemoved) while allocating, before the new blocks are cached
    b1 = [BlockRemoved([0xA2], "GPU", 0), _stored([0xB1], 0xA1, [50, 51, 52, 53])]
    x1 = [{}, {"session_id": "chat-2", "lookahead_token_ids": [[54]]} if new else {}]
    if new:  # 0.33's offloading connector reports the CPU and STORAGE tiers
        b1 += [_stored([0xA2], 0xA1, [4, 5, 6, 7], "CPU"), _stored([0xA1], None, [0, 1, 2, 3],
                                                                   "STORAGE")]  # fmt: skip
        x1 += [{"locality": "LOCAL", "ownership": "offloading"}, {"locality": "REMOTE"}]
    b2 = [AllBlocksCleared(), _stored([0xC1], None, [9, 9, 9, 9])]
    x2 = [{}, {"session_id": "chat-3"} if new else {}]
    b3 = [BlockRemoved([0xA2], "CPU", 0)] if new else []
    x3 = [{"locality": "LOCAL"}] if new else []
    batches = [(b0, x0), (b1, x1), (b2, x2), (b3, x3)]
    return [(KVEventBatch(1_700_000_000.0 + i, ev, 0), ex) for i, (ev, ex) in enumerate(batches)]


def messages(version: str) -> list[tuple[bytes, int, bytes]]:
    """(topic, seq, payload) as the publisher sends them."""
    return [(TOPIC, seq, encode_kv_event_payload(batch, version, extras))
            for seq, (batch, extras) in enumerate(history(version))]  # fmt: skip


def main(out: Path = HERE) -> list[Path]:
    paths = []
    for version in VERSIONS:
        path = out / f"vllm-{version}.kvev"
        write_kv_event_messages(path, messages(version))
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(p, p.stat().st_size, "bytes")
