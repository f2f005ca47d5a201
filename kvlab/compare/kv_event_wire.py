"""vLLM's KV-event wire format: msgpack batches, recorded-message files, and a ZMQ subscriber.

vLLM's ``ZmqEventPublisher`` sends every ``KVEventBatch`` as a three-frame ZMQ message::

    [topic (utf-8), seq (8 bytes big-endian), payload (msgpack)]

The payload is msgspec's encoding of ``array_like`` structs: a batch is
``[ts, events, data_parallel_rank]``, an event an array tagged by its class name followed by
*every* field in declaration order (msgspec's ``omit_defaults`` does not shorten array-like
structs): ``["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id,
medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]``,
``["BlockRemoved", block_hashes, medium, group_idx]``, ``["AllBlocksCleared"]``. The decoder
also accepts arrays that stop early (missing trailing fields take their defaults) and ignores
fields a newer vLLM appends. Block hashes are ints (the low 64 bits of vLLM's hash, the
default) or bytes (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``).

msgspec (to read or write payloads) and pyzmq (for a live socket) are optional: importing this
module needs neither, the functions that use them say so when they are missing.

Recorded messages are kept in a ``.kvev`` file: the magic ``b"KVEV1\\n"``, then per message
``u32 len(topic) | topic | u64 seq | u32 len(payload) | payload`` (big-endian), i.e. the three
ZMQ frames as they arrived. A ``.jsonl`` file with one ``{"seq", "ts", "events"}`` object per
line (``EventBatch.to_dict``) needs no msgspec.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import fields
from functools import cache
from os import PathLike
from typing import Any, BinaryIO

from kvlab.core.kv_events import EventBatch, KVCacheEvent, KVEventBatch

__all__ = [
    "MAGIC",
    "KVEventSubscriber",
    "decode_kv_event_batch",
    "encode_kv_event_batch",
    "read_kv_event_messages",
    "write_kv_event_messages",
]

MAGIC = b"KVEV1\n"
"""First bytes of a ``.kvev`` recording."""

Message = tuple[bytes, int, Any]
"""(topic, seq, payload bytes or an already decoded KVEventBatch)."""


def _require(module: str, purpose: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        pkg = {"msgspec": "msgspec", "zmq": "pyzmq"}[module]
        raise ImportError(
            f"{purpose} needs the optional package {pkg!r}: pip install {pkg}"
        ) from None


@cache
def _wire_types() -> dict[str, Any]:
    """msgspec Structs with vLLM's field names, order, defaults and struct options."""
    msgspec = _require("msgspec", "encoding KV events in vLLM's wire format")
    Hash = int | bytes
    opts = {"array_like": True, "omit_defaults": True, "gc": False}

    class WireEvent(msgspec.Struct, tag=True, **opts):
        pass

    class BlockStored(WireEvent):
        block_hashes: list[Hash]
        parent_block_hash: Hash | None
        token_ids: list[int]
        block_size: int
        lora_id: int | None
        medium: str | None
        lora_name: str | None
        extra_keys: list[tuple[Any, ...] | None] | None = None
        group_idx: int | None = None
        kv_cache_spec_kind: str | None = None
        kv_cache_spec_sliding_window: int | None = None

    class BlockRemoved(WireEvent):
        block_hashes: list[Hash]
        medium: str | None
        group_idx: int | None = None

    class AllBlocksCleared(WireEvent):
        pass

    class WireBatch(msgspec.Struct, **opts):
        ts: float
        events: list[BlockStored | BlockRemoved | AllBlocksCleared]
        data_parallel_rank: int | None = None

    return {
        "BlockStored": BlockStored,
        "BlockRemoved": BlockRemoved,
        "AllBlocksCleared": AllBlocksCleared,
        "batch": WireBatch,
        "encoder": msgspec.msgpack.Encoder(),
        "msgspec": msgspec,
    }


def encode_kv_event_batch(batch: EventBatch) -> bytes:
    """Encode a kvlab ``KVEventBatch`` exactly as vLLM's publisher does (msgpack).

    Raises:
        ImportError: Without msgspec.
        ValueError: If an event is not a BlockStored / BlockRemoved / AllBlocksCleared.
    """
    wire = _wire_types()
    events = []
    for e in batch.events:
        cls = wire.get(type(e).__name__) if isinstance(e, KVCacheEvent) else None
        if cls is None:
            raise ValueError(f"cannot encode {type(e).__name__}: not a vLLM KV cache event")
        values = {f.name: getattr(e, f.name) for f in fields(e)}
        if values.get("extra_keys") is not None:
            values["extra_keys"] = [None if k is None else tuple(k) for k in values["extra_keys"]]
        events.append(cls(**{k: list(v) if k in ("block_hashes", "token_ids") else v
                             for k, v in values.items()}))  # fmt: skip
    return wire["encoder"].encode(wire["batch"](batch.ts, events, batch.data_parallel_rank))


def decode_kv_event_batch(payload: bytes) -> KVEventBatch:
    """Decode one vLLM msgpack payload into kvlab's KVEventBatch.

    Fields a newer vLLM appends to an event are ignored (counted nowhere).

    Raises:
        ImportError: Without msgspec.
        ValueError: If the payload is not a KV event batch.
    """
    msgspec = _require("msgspec", "decoding vLLM KV event payloads")
    try:
        raw = msgspec.msgpack.decode(payload)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a msgpack KV event batch: {exc}") from None
    if not isinstance(raw, list) or len(raw) not in (2, 3) or not isinstance(raw[1], list):
        raise ValueError(f"not a KV event batch: expected [ts, events(, dp_rank)], got {raw!r:.80}")
    events = [_event_from_array(e) for e in raw[1]]
    return KVEventBatch(
        ts=raw[0], events=events, data_parallel_rank=raw[2] if len(raw) == 3 else None
    )


def _event_from_array(arr: Any) -> KVCacheEvent:
    if not isinstance(arr, list) or not arr or not isinstance(arr[0], str):
        raise ValueError(f"not a tagged KV event array: {arr!r:.80}")
    cls = KVCacheEvent._lookup(arr[0])
    names = [f.name for f in fields(cls)]
    return KVCacheEvent.from_dict([arr[0], *arr[1 : len(names) + 1]])


# ---------------------------------------------------------------------------- recordings
def write_kv_event_messages(path: str | PathLike[str], messages: Iterable[Message]) -> int:
    """Write messages to a ``.kvev`` (frames) or ``.jsonl`` (readable) recording.

    Args:
        path: Output file; its suffix picks the format.
        messages: ``(topic, seq, payload)``; payload is msgpack bytes (.kvev; a KVEventBatch is
            encoded, which needs msgspec) or a KVEventBatch (.jsonl).

    Returns:
        Messages written.

    Raises:
        ValueError: If a payload does not fit the format.
    """
    n = 0
    jsonl = str(path).endswith(".jsonl")
    with open(path, "wb") as f:
        if not jsonl:
            f.write(MAGIC)
        for topic, seq, payload in messages:
            if jsonl:
                if not isinstance(payload, EventBatch):
                    payload = decode_kv_event_batch(payload)
                obj = {"topic": topic.decode(), "seq": seq, **payload.to_dict()}
                f.write((json.dumps(obj, default=_json_bytes) + "\n").encode())
            else:
                if isinstance(payload, EventBatch):
                    payload = encode_kv_event_batch(payload)
                f.write(struct.pack(">I", len(topic)) + topic + struct.pack(">Q", seq))
                f.write(struct.pack(">I", len(payload)) + payload)
            n += 1
    return n


def _json_bytes(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _from_json_value(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"hex"}:
        return bytes.fromhex(value["hex"])
    if isinstance(value, list):
        return [_from_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_json_value(v) for k, v in value.items()}
    return value


def read_kv_event_messages(path: str | PathLike[str]) -> Iterator[tuple[int, KVEventBatch]]:
    """Yield ``(seq, batch)`` from a ``.kvev`` or ``.jsonl`` recording, in file order.

    Raises:
        ValueError: On a truncated or foreign file (naming the byte offset or line).
        ImportError: For a .kvev file without msgspec.
    """
    if str(path).endswith(".jsonl"):
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if line.strip():
                    yield _jsonl_batch(line, n)
        return
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError(f"{path}: not a .kvev recording (missing magic {MAGIC!r})")
        while True:
            frame = _read_frame(f)
            if frame is None:
                return
            yield frame[1], decode_kv_event_batch(frame[2])


def _jsonl_batch(line: str, n: int) -> tuple[int, KVEventBatch]:
    try:
        obj = _from_json_value(json.loads(line))
        batch = KVEventBatch.from_dict(obj)
    except (json.JSONDecodeError, ValueError, TypeError) as exc:
        raise ValueError(f"line {n}: not a KV event batch ({exc})") from None
    return int(obj.get("seq", n - 1)), KVEventBatch(
        batch.ts, batch.events, batch.data_parallel_rank
    )


def _read_exact(f: BinaryIO, n: int, what: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ValueError(f"truncated .kvev recording: {what} at byte {f.tell() - len(data)}")
    return data


def _read_frame(f: BinaryIO) -> tuple[bytes, int, bytes] | None:
    head = f.read(4)
    if not head:
        return None
    if len(head) != 4:
        raise ValueError(f"truncated .kvev recording at byte {f.tell() - len(head)}")
    topic = _read_exact(f, struct.unpack(">I", head)[0], "topic")
    seq = struct.unpack(">Q", _read_exact(f, 8, "seq"))[0]
    size = struct.unpack(">I", _read_exact(f, 4, "payload length"))[0]
    return topic, seq, _read_exact(f, size, "payload")


# ---------------------------------------------------------------------------- live socket
class KVEventSubscriber:
    """A ZMQ SUB socket on a vLLM KV-event publisher (``--kv-events-config`` endpoint).

    Connects at construction (so no message sent afterwards is missed once the subscription
    reached the publisher). Iterate ``messages()`` or ``batches()``.

    Args:
        endpoint: The publisher's address, e.g. ``"tcp://127.0.0.1:5557"``.
        topic: Topic prefix to subscribe to ("" = all).
        context: A zmq.Context (default: the process-wide instance).

    Raises:
        ImportError: Without pyzmq.
    """

    def __init__(self, endpoint: str, topic: str = "", context: Any = None) -> None:
        zmq = _require("zmq", "reading a live KV event socket")
        self._zmq = zmq
        self.socket = (context or zmq.Context.instance()).socket(zmq.SUB)
        self.socket.connect(endpoint)
        self.socket.setsockopt(zmq.SUBSCRIBE, topic.encode())

    def messages(
        self, timeout_ms: int = 1000, max_messages: int | None = None
    ) -> Iterator[Message]:
        """Yield ``(topic, seq, payload bytes)`` until ``timeout_ms`` passes with no message
        (or ``max_messages`` were read).

        Raises:
            ValueError: On a message that is not three frames.
        """
        n = 0
        while max_messages is None or n < max_messages:
            if not self.socket.poll(timeout_ms):
                return
            frames = self.socket.recv_multipart()
            if len(frames) != 3:
                raise ValueError(f"expected [topic, seq, payload] frames, got {len(frames)}")
            yield frames[0], int.from_bytes(frames[1], "big"), frames[2]
            n += 1

    def batches(self, timeout_ms: int = 1000, max_messages: int | None = None
                ) -> Iterator[tuple[int, KVEventBatch]]:  # fmt: skip
        """Yield ``(seq, decoded batch)`` (needs msgspec); see ``messages``."""
        for _, seq, payload in self.messages(timeout_ms, max_messages):
            yield seq, decode_kv_event_batch(payload)

    def close(self) -> None:
        """Close the socket."""
        self.socket.close(linger=0)
