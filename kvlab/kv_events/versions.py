"""Which vLLM release put what on the KV-event wire: fields, media, forms, publisher changes.

Read from each release's ``vllm/distributed/kv_events.py`` (0.22.1, 0.23.0, 0.24.0, 0.25.1,
0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0 wheels); tests check the tables
against the layouts kvlab's encoder writes. kvlab reads nothing older than 0.22.1 (its spec
release).

Mirrors: vllm/distributed/kv_events.py (BlockStored, BlockRemoved, AllBlocksCleared field
declarations, MEDIUM_* constants, ZmqEventPublisher) across releases.

Examples:
    >>> FIELDS_SINCE["BlockStored"]["lookahead_token_ids"], form_of("0.23.0"), form_of("0.24.0")
    ('0.33.0', 'array', 'map')
    >>> fields_in("BlockRemoved", "0.29.0")
    ('block_hashes', 'medium', 'group_idx', 'locality', 'ownership')
"""

from __future__ import annotations

__all__ = [
    "BASE_VERSION", "FIELDS", "FIELDS_SINCE", "MEDIA_SINCE", "MEDIUM_CPU", "MEDIUM_FS",
    "MEDIUM_GPU", "MEDIUM_OBJ", "MEDIUM_STORAGE", "NUM_REQUIRED", "WIRE_CHANGES",
    "KVEventFormatError", "fields_in", "form_of",
]  # fmt: skip


class KVEventFormatError(ValueError):
    """A KV-event payload, field, frame or file that does not follow vLLM's format."""


BASE_VERSION = "0.22.1"
"""The vLLM release kvlab mirrors; the array form's field layout is this release's."""

MEDIUM_GPU, MEDIUM_CPU, MEDIUM_STORAGE = "GPU", "CPU", "STORAGE"
MEDIUM_FS, MEDIUM_OBJ = "FS", "OBJ"  # 0.26.x only: merged into MEDIUM_STORAGE in 0.27.0

MEDIA_SINCE: dict[str, str] = {
    MEDIUM_GPU: "0.22.1",
    MEDIUM_CPU: "0.26.0",  # the constant; 0.22.1's CPU offloading manager already sent "CPU"
    MEDIUM_FS: "0.26.0",
    MEDIUM_OBJ: "0.26.0",
    MEDIUM_STORAGE: "0.27.0",
}
"""The release whose kv_events.py first defines each MEDIUM_* constant."""

FIELDS: dict[str, tuple[str, ...]] = {
    "BlockStored": (
        "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
        "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
        "kv_cache_spec_sliding_window", "locality", "ownership", "session_id",
        "lookahead_token_ids",
    ),
    "BlockRemoved": ("block_hashes", "medium", "group_idx", "locality", "ownership"),
    "AllBlocksCleared": (),
}  # fmt: skip
"""Each event's fields in vLLM 0.33.0's declaration order (0.22.1's are a prefix)."""

NUM_REQUIRED = {"BlockStored": 7, "BlockRemoved": 2, "AllBlocksCleared": 0}
"""Leading fields without a default (always on the wire, in both forms)."""

FIELDS_SINCE: dict[str, dict[str, str]] = {
    "BlockStored": {"locality": "0.26.0", "ownership": "0.29.0", "session_id": "0.30.0",
                    "lookahead_token_ids": "0.33.0"},
    "BlockRemoved": {"locality": "0.26.0", "ownership": "0.29.0"},
    "AllBlocksCleared": {},
}  # fmt: skip
"""Fields added after BASE_VERSION -> the first release that sends them."""

WIRE_CHANGES: tuple[tuple[str, str], ...] = (
    ("0.24.0", ("events are maps tagged by 'type' (KVCacheEvent drops array_like), fields "
                "at their default left out; the batch stays [ts, events, data_parallel_rank]")),
    ("0.26.0", "MEDIUM_CPU, MEDIUM_FS, MEDIUM_OBJ; BlockStored/BlockRemoved.locality"),
    ("0.26.0", ("replay replies [topic, seq, payload] (were [seq, payload]); "
                "end marker [b'', END_SEQ, b'']")),
    ("0.27.0", "MEDIUM_STORAGE replaces MEDIUM_FS and MEDIUM_OBJ"),
    ("0.29.0", "BlockStored/BlockRemoved.ownership"),
    ("0.30.0", "BlockStored.session_id"),
    ("0.31.0", ("the publisher's bind rule becomes _is_bind_endpoint, unchanged ('*', '::', "
                "ipc://, inproc:// bind; other endpoints connect); tcp://*:0 binds the node IP")),
    ("0.33.0", "BlockStored.lookahead_token_ids; replay ROUTER SNDHWM 2 * (buffer_steps + 1)"),
)
"""(release, what changed on the wire or in the publisher), oldest first."""


def _release(version: str) -> tuple[int, ...]:
    try:
        parts = tuple(int(p) for p in version.split("."))
    except (AttributeError, ValueError):
        parts = ()
    if len(parts) != 3 or parts < (0, 22, 1):
        raise KVEventFormatError(f"version must be a vLLM release 'X.Y.Z' >= {BASE_VERSION}, "
                                 f"got {version!r:.40}")  # fmt: skip
    return parts


def fields_in(name: str, version: str) -> tuple[str, ...]:
    """The fields of event ``name`` in vLLM ``version``, in declaration order.

    Raises:
        KVEventFormatError: On an unknown event or a version before 0.22.1.
    """
    if name not in FIELDS:
        raise KVEventFormatError(f"unknown KV cache event type {name!r}; known: "
                                 f"{', '.join(sorted(FIELDS))}")  # fmt: skip
    release = _release(version)
    since = FIELDS_SINCE[name]
    return tuple(f for f in FIELDS[name] if f not in since or _release(since[f]) <= release)


def form_of(version: str) -> str:
    """"array" for vLLM <= 0.23, "map" from 0.24.0 (KVCacheEvent without array_like)."""
    return "array" if _release(version) < (0, 24, 0) else "map"
