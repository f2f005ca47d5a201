"""vLLM's KV-event wire format: msgpack payloads and recorded-message files.

vLLM's ``ZmqEventPublisher`` sends every ``KVEventBatch`` as a three-frame ZMQ message::

    [topic (utf-8), seq (8 bytes big-endian), payload (msgpack)]

The payload is msgspec's encoding of vLLM's structs; its events are tagged arrays up to vLLM
0.23 and tagged maps from 0.24.0 (``kvlab.kv_events.format`` reads, checks and writes
both, and lists which release added which field). Block hashes are ints (the low 64 bits of
vLLM's hash, the default) or bytes (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``). The live socket
is ``kvlab.kv_events.subscriber.KVEventSubscriber``.

msgspec (to read or write payloads) is optional: importing this module does not need it, the
functions that use it say so when it is missing.

Recorded messages are kept in a ``.kvev`` file: the magic ``b"KVEV1\\n"``, then per message
``u32 len(topic) | topic | u64 seq | u32 len(payload) | payload`` (big-endian), i.e. the three
ZMQ frames as they arrived. A ``.jsonl`` file with one ``{"topic", "seq", "ts", "events",
"data_parallel_rank"}`` object per line (events in the map form) needs no msgspec.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Iterator
from os import PathLike
from typing import Any, BinaryIO

from kvlab.core.kv_events import EventBatch, KVEventBatch
from kvlab.kv_events.format import (
    BASE_VERSION,
    DecodedPayload,
    KVEventFormatError,
    check_kv_event_batch,
    decode_kv_event_payload,
    encode_kv_event_payload,
)

__all__ = [
    "MAGIC",
    "decode_kv_event_batch",
    "encode_kv_event_batch",
    "read_kv_event_messages",
    "write_kv_event_messages",
]

MAGIC = b"KVEV1\n"
"""First bytes of a ``.kvev`` recording."""

MAX_TOPIC_BYTES = 1 << 16
"""Longest topic frame a recording may hold (bytes)."""

Message = tuple[bytes, int, Any]
"""(topic, seq, payload bytes, an already decoded KVEventBatch or a DecodedPayload)."""


def encode_kv_event_batch(
    batch: EventBatch,
    version: str = BASE_VERSION,
    newer_fields: list[dict[str, Any] | None] | None = None,
) -> bytes:
    """Encode a kvlab ``KVEventBatch`` exactly as vLLM ``version``'s publisher does (msgpack).

    Mirrors: vllm/distributed/kv_events.py::ZmqEventPublisher._publisher_thread (the encoding).

    Args:
        batch: The batch.
        version: The vLLM release whose layout to write ("0.22.1": array form; >= "0.24.0": map).
        newer_fields: Per event, fields newer than 0.22.1 (see ``encode_kv_event_payload``).

    Raises:
        ImportError: Without msgspec.
        KVEventFormatError: (a ValueError) If an event is not a BlockStored / BlockRemoved /
            AllBlocksCleared, or a field is not allowed.
    """
    return encode_kv_event_payload(batch, version, newer_fields)


def decode_kv_event_batch(payload: bytes) -> KVEventBatch:
    """Decode one vLLM msgpack payload (either form) into kvlab's KVEventBatch.

    Fields newer than vLLM 0.22.1 are dropped here; ``decode_kv_event_payload`` keeps them.

    Raises:
        ImportError: Without msgspec.
        KVEventFormatError: (a ValueError) If the payload is not a valid KV event batch.
    """
    return decode_kv_event_payload(payload).batch


# ---------------------------------------------------------------------------- recordings
def write_kv_event_messages(path: str | PathLike[str], messages: Iterable[Message]) -> int:
    """Write messages to a ``.kvev`` (frames) or ``.jsonl`` (readable) recording.

    Args:
        path: Output file; its suffix picks the format.
        messages: ``(topic, seq, payload)``; payload is msgpack bytes (kept as is in .kvev,
            decoded for .jsonl: needs msgspec), a KVEventBatch (encoded in 0.22.1's layout for
            .kvev) or a DecodedPayload (its newer fields kept in .jsonl).

    Returns:
        Messages written.

    Raises:
        KVEventFormatError: (a ValueError) If a seq or payload does not fit the format.
    """
    n = 0
    jsonl = str(path).endswith(".jsonl")
    with open(path, "wb") as f:
        if not jsonl:
            f.write(MAGIC)
        for topic, seq, payload in messages:
            if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 1 << 64:
                raise KVEventFormatError(f"message {n}: seq must be an int in [0, 2**64), "
                                         f"got {seq!r:.40}")  # fmt: skip
            if jsonl:
                f.write((json.dumps(_json_line(topic, seq, payload), default=_json_bytes)
                         + "\n").encode())  # fmt: skip
            else:
                if isinstance(payload, DecodedPayload):
                    payload = payload.batch
                if isinstance(payload, EventBatch):
                    payload = encode_kv_event_batch(payload)
                f.write(struct.pack(">I", len(topic)) + topic + struct.pack(">Q", seq))
                f.write(struct.pack(">I", len(payload)) + payload)
            n += 1
    return n


def _json_line(topic: bytes, seq: int, payload: Any) -> dict[str, Any]:
    if isinstance(payload, bytes | bytearray | memoryview):
        payload = decode_kv_event_payload(bytes(payload), f"seq {seq}")
    newer: tuple[dict[str, Any], ...] = ()
    if isinstance(payload, DecodedPayload):
        payload, newer = payload.batch, payload.newer_fields
    body = payload.to_dict()
    for event, extra in zip(body["events"], newer, strict=False):
        event.update(extra)
    return {"topic": topic.decode("utf-8", "replace"), "seq": seq, **body}


def _json_bytes(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _from_json_value(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"hex"} and isinstance(value["hex"], str):
        return bytes.fromhex(value["hex"])
    if isinstance(value, list):
        return [_from_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_json_value(v) for k, v in value.items()}
    return value


MAX_LINE_BYTES = 64 << 20
"""Longest line of a ``.jsonl`` recording (bytes): longer lines are refused unread."""


def read_kv_event_messages(path: str | PathLike[str], decoded: bool = False
                           ) -> Iterator[tuple[int, Any]]:  # fmt: skip
    """Yield ``(seq, batch)`` from a ``.kvev`` or ``.jsonl`` recording, in file order.

    The file is read one message (or line) at a time; every length it states is checked against
    what is left of the file (and MAX_TOPIC_BYTES, MAX_LINE_BYTES) before it is read.

    Args:
        path: The recording.
        decoded: Yield DecodedPayload (wire form, fields newer than 0.22.1) instead of the batch.

    Raises:
        KVEventFormatError: (a ValueError) On a truncated, foreign or invalid file, naming the
            file, the byte offset or line, and the field.
        ImportError: For a .kvev file without msgspec.
    """
    if str(path).endswith(".jsonl"):
        with open(path, "rb") as f:
            for n, line in enumerate(_lines(f, path), start=1):
                if line.strip():
                    seq, payload = _jsonl_batch(line, n, f"{path}: line {n}")
                    yield seq, payload if decoded else payload.batch
        return
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise KVEventFormatError(f"{path}: not a .kvev recording (missing magic {MAGIC!r})")
        size = os.fstat(f.fileno()).st_size
        while True:
            try:
                frame = _read_frame(f, size)
            except KVEventFormatError as exc:
                raise KVEventFormatError(f"{path}: {exc}") from None
            if frame is None:
                return
            payload = decode_kv_event_payload(frame[2], f"{path}: seq {frame[1]}")
            yield frame[1], payload if decoded else payload.batch


def _lines(f: BinaryIO, path: Any) -> Iterator[str]:
    """The file's lines as text, each read bounded (MAX_LINE_BYTES) and decoded as UTF-8."""
    n = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        n += 1
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES:
            raise KVEventFormatError(f"{path}: line {n}: longer than MAX_LINE_BYTES="
                                     f"{MAX_LINE_BYTES} bytes (not read further)")  # fmt: skip
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise KVEventFormatError(f"{path}: line {n}: not UTF-8 text ({exc.reason} at byte "
                                     f"{exc.start}); a .jsonl recording is UTF-8 JSON") from None  # fmt: skip


def _jsonl_batch(line: str, n: int, where: str) -> tuple[int, DecodedPayload]:
    try:
        obj = _from_json_value(json.loads(line))
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise KVEventFormatError(f"{where}: not a JSON KV event batch ({exc})") from None
    if not isinstance(obj, dict) or "ts" not in obj or "events" not in obj:
        raise KVEventFormatError(
            f"{where}: not a KV event batch: expected an object with 'ts' and 'events' "
            f"(and 'seq', 'topic', 'data_parallel_rank'), got {line.strip()[:60]!r}"
        )
    seq = obj.get("seq", n - 1)
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 1 << 64:
        raise KVEventFormatError(f"{where}: 'seq' must be an int in [0, 2**64), got {seq!r:.40}")
    return seq, check_kv_event_batch(obj["ts"], obj["events"], obj.get("data_parallel_rank"),
                                     where)  # fmt: skip


def _read_exact(f: BinaryIO, n: int, what: str, size: int) -> bytes:
    at = f.tell()
    if n > size - at:
        raise KVEventFormatError(f"truncated .kvev recording: {what} of {n} bytes at byte {at}, "
                                 f"{size - at} left")  # fmt: skip
    return f.read(n)


def _read_frame(f: BinaryIO, size: int) -> tuple[bytes, int, bytes] | None:
    head = f.read(4)
    if not head:
        return None
    if len(head) != 4:
        raise KVEventFormatError(f"truncated .kvev recording at byte {f.tell() - len(head)}")
    num_topic = struct.unpack(">I", head)[0]
    if num_topic > MAX_TOPIC_BYTES:
        raise KVEventFormatError(f"damaged .kvev recording at byte {f.tell() - 4}: topic of "
                                 f"{num_topic} bytes (at most {MAX_TOPIC_BYTES})")  # fmt: skip
    topic = _read_exact(f, num_topic, "topic", size)
    seq = struct.unpack(">Q", _read_exact(f, 8, "seq", size))[0]
    num_payload = struct.unpack(">I", _read_exact(f, 4, "payload length", size))[0]
    return topic, seq, _read_exact(f, num_payload, "payload", size)
