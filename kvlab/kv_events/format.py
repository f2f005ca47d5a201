"""vLLM's KV-event payloads in both wire forms: validated decoding, encoding, and which vLLM
release added what.

A payload is msgspec's msgpack encoding of a ``KVEventBatch``. The batch is always an array
``[ts, events, data_parallel_rank]`` (``EventBatch`` keeps ``array_like=True``); the events
changed form in vLLM 0.24.0, when ``KVCacheEvent`` dropped ``array_like``:

* **array form** (vLLM <= 0.23): ``["BlockRemoved", block_hashes, medium, group_idx]``: the tag,
  then every field in declaration order (msgspec writes the defaults of array-like structs too);
* **map form** (vLLM >= 0.24): ``{"type": "BlockRemoved", "block_hashes": [...], "medium":
  "GPU"}``: fields equal to their default are left out (``omit_defaults=True``).

Decoding checks every field (type, and bounds where a value sizes an allocation: ``group_idx``
at most ``MAX_GROUP_IDX``) and raises ``KVEventFormatError`` naming the batch, the event, the
field and what is allowed. Fields newer than vLLM 0.22.1 (``FIELDS_SINCE``) are read in either
form and returned beside the 0.22.1 event (``DecodedPayload.newer_fields``); map keys no vLLM
sends are ignored and listed (``DecodedPayload.unknown_fields``).

Mirrors: vllm/distributed/kv_events.py (KVCacheEvent, BlockStored, BlockRemoved,
AllBlocksCleared, EventBatch, the MEDIUM_* constants), 0.22.1 to 0.33.0, each read from the
release's wheel. Decoding and encoding need msgspec (the ``events`` extra); importing does not.

Examples:
    >>> import msgspec
    >>> raw = msgspec.msgpack.encode([1.5, [{"type": "BlockRemoved", "block_hashes": [7],
    ...                                      "medium": "CPU", "locality": "LOCAL"}], 0])
    >>> d = decode_kv_event_payload(raw)
    >>> d.form, d.newer_fields
    ('map', ({'locality': 'LOCAL'},))
    >>> d.batch.events
    [BlockRemoved(block_hashes=[7], medium='CPU', group_idx=None)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
from kvlab.kv_events.versions import (
    BASE_VERSION,
    FIELDS,
    FIELDS_SINCE,
    MEDIA_SINCE,
    MEDIUM_CPU,
    MEDIUM_FS,
    MEDIUM_GPU,
    MEDIUM_OBJ,
    MEDIUM_STORAGE,
    NUM_REQUIRED,
    WIRE_CHANGES,
    KVEventFormatError,
    _release,
    fields_in,
    form_of,
)

__all__ = [
    "BASE_VERSION", "END_SEQ", "FIELDS", "FIELDS_SINCE", "MAX_GROUP_IDX", "MEDIA_SINCE",
    "MEDIUM_CPU", "MEDIUM_FS", "MEDIUM_GPU", "MEDIUM_OBJ", "MEDIUM_STORAGE", "WIRE_CHANGES",
    "DecodedPayload", "KVEventFormatError", "check_kv_event_batch", "decode_kv_event_payload",
    "decode_seq_frame", "encode_kv_event_payload", "encode_seq_frame", "fields_in", "form_of",
]  # fmt: skip

MAX_GROUP_IDX = 4095
"""Largest group_idx accepted: consumers size per-group tables by it (vLLM has a handful)."""

END_SEQ = (-1).to_bytes(8, "big", signed=True)
"""The seq frame of the replay reply's end marker (ZmqEventPublisher.END_SEQ)."""

_MAX_INT64 = 1 << 64


@dataclass(frozen=True)
class DecodedPayload:
    """One decoded, checked payload.

    Attributes:
        batch: The batch with vLLM 0.22.1's fields (kvlab.core's event classes).
        form: "array" (vLLM <= 0.23), "map" (>= 0.24) or None (no events).
        newer_fields: Per event, the fields newer than 0.22.1 that it sets (name -> value).
        unknown_fields: "Event.field" names no vLLM release sends (ignored).
    """

    batch: KVEventBatch
    form: str | None
    newer_fields: tuple[dict[str, Any], ...]
    unknown_fields: frozenset[str] = frozenset()


# ---------------------------------------------------------------------------- field checks
class _Bad(Exception):
    """A value outside what is allowed; its argument says what is allowed."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _hash(v: Any) -> Any:
    if isinstance(v, bytes) or (_is_int(v) and -(1 << 63) <= v < _MAX_INT64):
        return v
    raise _Bad("a block hash: a 64-bit int or bytes")


def _opt_hash(v: Any) -> Any:
    return None if v is None else _hash(v)


def _list_of(check: Any, allowed: str) -> Any:
    def run(v: Any) -> list[Any]:
        if not isinstance(v, list | tuple):
            raise _Bad(f"a list of {allowed}")
        try:
            return [check(x) for x in v]
        except _Bad:
            raise _Bad(f"a list of {allowed}") from None

    return run


def _token(v: Any) -> int:
    if _is_int(v) and 0 <= v < _MAX_INT64:
        return v
    raise _Bad("a token id (int >= 0)")


def _opt(check: Any, allowed: str) -> Any:
    def run(v: Any) -> Any:
        if v is None:
            return None
        try:
            return check(v)
        except _Bad:
            raise _Bad(f"{allowed} or None") from None

    return run


def _int_in(lo: int, hi: int, allowed: str) -> Any:
    def run(v: Any) -> int:
        if _is_int(v) and lo <= v <= hi:
            return v
        raise _Bad(allowed)

    return run


def _str(v: Any) -> str:
    if isinstance(v, str):
        return v
    raise _Bad("a str")


def _extra_key(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, list | tuple):
        return _as_tuple(v)
    raise _Bad("a list of per-block key tuples (or None entries)")


def _as_tuple(v: Any) -> Any:
    return tuple(_as_tuple(x) for x in v) if isinstance(v, list | tuple) else v


_HASHES = _list_of(_hash, "block hashes (64-bit ints or bytes)")
_TOKENS = _list_of(_token, "token ids (ints >= 0)")
_OPT_STR = _opt(_str, "a str")
_GROUP = _opt(_int_in(0, MAX_GROUP_IDX, f"an int in [0, {MAX_GROUP_IDX}]"),
              f"an int in [0, {MAX_GROUP_IDX}]")  # fmt: skip
_CHECKS: dict[str, Any] = {
    "block_hashes": _HASHES,
    "parent_block_hash": _opt_hash,
    "token_ids": _TOKENS,
    "block_size": _int_in(1, 1 << 31, "a block size in tokens (int >= 1)"),
    "lora_id": _opt(_int_in(-(1 << 63), _MAX_INT64, "an int"), "an int"),
    "medium": _OPT_STR,
    "lora_name": _OPT_STR,
    "extra_keys": _opt(_list_of(_extra_key, "per-block key tuples or None"),
                       "a list of per-block key tuples"),
    "group_idx": _GROUP,
    "kv_cache_spec_kind": _OPT_STR,
    "kv_cache_spec_sliding_window": _opt(_int_in(0, 1 << 62, "an int >= 0 (tokens)"),
                                         "an int >= 0 (tokens)"),
    "locality": _OPT_STR,
    "ownership": _OPT_STR,
    "session_id": _OPT_STR,
    "lookahead_token_ids": _opt(_list_of(_TOKENS, "token-id lists"), "a list of token-id lists"),
}  # fmt: skip
_EVENT_CLASSES = {"BlockStored": BlockStored, "BlockRemoved": BlockRemoved,
                  "AllBlocksCleared": AllBlocksCleared}  # fmt: skip


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _event_values(raw: Any, where: str) -> tuple[str, str, dict[str, Any], set[str]]:
    """(type, form, {field: raw value}, unknown map keys) of one raw event."""
    if isinstance(raw, list | tuple) and raw and isinstance(raw[0], str):
        name, form = raw[0], "array"
    elif isinstance(raw, Mapping) and isinstance(raw.get("type"), str):
        name, form = raw["type"], "map"
    else:
        raise KVEventFormatError(
            f"{where}: not a KV cache event: expected a tagged array ['BlockStored', ...] "
            f"(vLLM <= 0.23) or a map {{'type': 'BlockStored', ...}} (vLLM >= 0.24), got "
            f"{_show(raw)}"
        )
    if name not in FIELDS:
        raise KVEventFormatError(
            f"{where}: unknown KV cache event type {name!r}; known: {', '.join(sorted(FIELDS))}"
        )
    names, unknown = FIELDS[name], set()
    if form == "array":
        # NOTE: values past the known fields (no release sends them) are ignored.
        values = dict(zip(names, raw[1:], strict=False))
    else:
        values = {}
        for key, v in raw.items():
            if key in names:
                values[key] = v
            elif key != "type":
                unknown.add(f"{name}.{key}" if isinstance(key, str) else f"{name}.{key!r}")
    missing = [f for f in names[: NUM_REQUIRED[name]] if f not in values]
    if missing:
        raise KVEventFormatError(
            f"{where} ({name}): missing required field(s) {', '.join(missing)}; a {name} "
            f"needs {', '.join(names[: NUM_REQUIRED[name]])}"
        )
    return name, form, values, unknown


def _check_fields(name: str, values: Mapping[str, Any], where: str) -> dict[str, Any]:
    checked = {}
    for field, v in values.items():
        try:
            checked[field] = _CHECKS[field](v)
        except _Bad as bad:
            raise KVEventFormatError(
                f"{where} ({name}): field {field!r} must be {bad.args[0]}, got {_show(v)}"
            ) from None
    return checked


def _check_event(raw: Any, where: str) -> tuple[Any, str, dict[str, Any], set[str]]:
    """(kvlab.core event, form, newer fields set, unknown keys) of one raw event."""
    name, form, values, unknown = _event_values(raw, where)
    checked = _check_fields(name, values, where)
    since = FIELDS_SINCE[name]
    newer = {f: checked.pop(f) for f in list(checked) if f in since}
    event = _EVENT_CLASSES[name](**checked)
    return event, form, {f: v for f, v in newer.items() if v is not None}, unknown


def check_kv_event_batch(ts: Any, events: Any, data_parallel_rank: Any = None,
                         where: str = "batch") -> DecodedPayload:  # fmt: skip
    """Check an already decoded batch (array or map events) and build kvlab's objects.

    Args:
        ts: Publication time (seconds; int or float, finite).
        events: The raw events (tagged arrays or maps; one form per batch).
        data_parallel_rank: None or an int >= 0.
        where: How error messages name this batch (e.g. "line 4").

    Returns:
        The DecodedPayload.

    Raises:
        KVEventFormatError: Naming the field and what is allowed.
    """
    if not (_is_int(ts) or isinstance(ts, float)) or not math.isfinite(ts):
        raise KVEventFormatError(
            f"{where}: 'ts' must be a finite number (seconds), got {_show(ts)}"
        )
    if data_parallel_rank is not None and not (_is_int(data_parallel_rank)
                                               and 0 <= data_parallel_rank < 1 << 31):  # fmt: skip
        raise KVEventFormatError(
            f"{where}: 'data_parallel_rank' must be an int >= 0 or None, got "
            f"{_show(data_parallel_rank)}"
        )
    if not isinstance(events, list | tuple):
        raise KVEventFormatError(f"{where}: 'events' must be a list, got {_show(events)}")
    out, forms, newer, unknown = [], set(), [], set()
    for i, raw in enumerate(events):
        event, form, extra, unk = _check_event(raw, f"{where}, event {i}")
        out.append(event)
        forms.add(form)
        newer.append(extra)
        unknown |= unk
    if len(forms) > 1:
        raise KVEventFormatError(
            f"{where}: events mix the array and the map form; a vLLM release sends one "
            "(arrays up to 0.23, maps from 0.24)"
        )
    batch = KVEventBatch(ts=ts, events=out, data_parallel_rank=data_parallel_rank)
    return DecodedPayload(batch, forms.pop() if forms else None, tuple(newer), frozenset(unknown))


def decode_kv_event_payload(payload: bytes, where: str = "payload") -> DecodedPayload:
    """Decode and check one msgpack payload of either wire form.

    Args:
        payload: The third ZMQ frame (msgpack bytes).
        where: How error messages name it (e.g. "seq 12").

    Returns:
        The DecodedPayload.

    Raises:
        KVEventFormatError: If it is not msgpack, not a batch, or a field is not allowed.
        ImportError: Without msgspec.
    """
    msgspec = _msgspec("decoding vLLM KV event payloads")
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise KVEventFormatError(f"{where}: a payload is bytes, got {type(payload).__name__}")
    try:
        raw = msgspec.msgpack.decode(payload)
    except (msgspec.DecodeError, RecursionError, ValueError) as exc:
        # NOTE: a str that is not UTF-8 raises UnicodeDecodeError (a ValueError), not DecodeError.
        raise KVEventFormatError(f"{where}: not a msgpack KV event batch ({exc})") from None
    if not isinstance(raw, list) or len(raw) not in (2, 3):
        raise KVEventFormatError(
            f"{where}: not a KV event batch: expected the array [ts, events, "
            f"data_parallel_rank], got {_show(raw)}"
        )
    return check_kv_event_batch(raw[0], raw[1], raw[2] if len(raw) == 3 else None, where)


def decode_seq_frame(frame: bytes) -> int:
    """The publisher's sequence number: exactly 8 bytes, big-endian, unsigned.

    Raises:
        KVEventFormatError: If the frame is not 8 bytes.
    """
    if not isinstance(frame, bytes | bytearray | memoryview) or len(frame) != 8:
        size = len(frame) if isinstance(frame, bytes | bytearray | memoryview) else "not bytes"
        raise KVEventFormatError(f"a seq frame is 8 bytes (big-endian), got {size}")
    return int.from_bytes(frame, "big")


def encode_seq_frame(seq: int) -> bytes:
    """``seq`` as the publisher sends it (8 bytes big-endian).

    Raises:
        KVEventFormatError: If seq is not an int in [0, 2**64).
    """
    if not _is_int(seq) or not 0 <= seq < _MAX_INT64:
        raise KVEventFormatError(f"a seq is an int in [0, 2**64), got {_show(seq)}")
    return seq.to_bytes(8, "big")


# ---------------------------------------------------------------------------- encoding
def _msgspec(purpose: str) -> Any:
    try:
        import msgspec
    except ImportError:
        raise ImportError(
            f"{purpose} needs the optional package 'msgspec': pip install msgspec"
        ) from None
    return msgspec


@cache
def _wire_types(version: str) -> dict[str, Any]:
    """msgspec Structs with ``version``'s fields, order, defaults and struct options.

    NOTE: msgspec sizes a map header by the struct's field count (a map16 header past 15),
    so byte-exact output needs exactly the release's fields, not a superset.
    """
    msgspec = _msgspec("encoding KV events in vLLM's wire format")
    opts: dict[str, Any] = {"omit_defaults": True, "gc": False}
    array_like = form_of(version) == "array"
    base = msgspec.defstruct("KVCacheEvent", [], tag=True, array_like=array_like, **opts)
    classes = {}
    for name in FIELDS:
        spec = [(f, Any) if i < NUM_REQUIRED[name] else (f, Any, None)
                for i, f in enumerate(fields_in(name, version))]  # fmt: skip
        classes[name] = msgspec.defstruct(name, spec, bases=(base,), tag=True,
                                          array_like=array_like, **opts)  # fmt: skip
    batch = msgspec.defstruct("KVEventBatch", [("ts", Any), ("events", Any),
                                               ("data_parallel_rank", Any, None)],
                              array_like=True, **opts)  # fmt: skip
    return {"classes": classes, "batch": batch, "encoder": msgspec.msgpack.Encoder()}


def encode_kv_event_payload(batch: KVEventBatch, version: str = BASE_VERSION,
                            newer_fields: Sequence[Mapping[str, Any] | None] | None = None
                            ) -> bytes:  # fmt: skip
    """Encode a batch byte for byte as vLLM ``version``'s publisher does.

    Args:
        batch: kvlab.core events (checked first, as decoding would).
        version: The vLLM release, e.g. "0.22.1" (array form, up to 0.23) or "0.33.0" (map
            form, from 0.24.0): it fixes the form and the fields on the wire.
        newer_fields: Per event, fields newer than 0.22.1, e.g. ``[{"locality": "LOCAL"},
            None, ...]``; each must exist in ``version`` (``FIELDS_SINCE``).

    Returns:
        The msgpack payload, byte for byte what that release's msgspec structs give.

    Raises:
        KVEventFormatError: On a bad version, a field not allowed, or a field ``version`` lacks.
        ImportError: Without msgspec.
    """
    wire = _wire_types(".".join(map(str, _release(version))))
    extras = list(newer_fields or [])
    if len(extras) > len(batch.events):
        raise KVEventFormatError(f"newer_fields has {len(extras)} entries for "
                                 f"{len(batch.events)} events")  # fmt: skip
    check_kv_event_batch(batch.ts, [], batch.data_parallel_rank)
    events = []
    for i, event in enumerate(batch.events):
        name = type(event).__name__
        if name not in _EVENT_CLASSES or not isinstance(event, _EVENT_CLASSES[name]):
            raise KVEventFormatError(f"event {i}: cannot encode {name}: not a vLLM KV cache event")
        extra = dict(extras[i] or {}) if i < len(extras) else {}
        for key, value in extra.items():
            if key not in FIELDS_SINCE[name]:
                known = ", ".join(FIELDS_SINCE[name]) or "none"
                raise KVEventFormatError(f"event {i}: {key!r} is not a field {name} gained after "
                                         f"{BASE_VERSION}; those are: {known}")  # fmt: skip
            if value is not None and key not in fields_in(name, version):
                raise KVEventFormatError(
                    f"event {i}: vLLM {version} has no field {key!r} (sent since "
                    f"{FIELDS_SINCE[name][key]})"
                )
        extra = {k: v for k, v in extra.items() if v is not None}
        values = {k: v for k, v in {**event.to_dict(), **extra}.items() if k != "type"}
        events.append(wire["classes"][name](**_check_fields(name, values, f"event {i}")))
    return wire["encoder"].encode(wire["batch"](batch.ts, events, batch.data_parallel_rank))
