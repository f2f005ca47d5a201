"""vLLM's KV cache events (BlockStored, BlockRemoved, AllBlocksCleared) as plain dataclasses.

Mirrors: vllm/distributed/kv_events.py (KVCacheEvent, BlockStored, BlockRemoved,
AllBlocksCleared, EventBatch, KVEventBatch, MEDIUM_GPU): same names, fields, field order,
defaults and ``__hash__``. vLLM's are msgspec Structs (``array_like``, ``omit_defaults``,
tagged by class name); kvlab core may not depend on msgspec, so these are dataclasses with
``to_dict`` / ``from_dict``. ``from_dict`` also reads what a msgpack decoder gives for a
recorded vLLM stream: the tagged array ``["BlockStored", block_hashes, parent, ...]`` (msgspec
0.22 writes every field of an ``array_like`` struct; shorter arrays are read too, the missing
trailing fields taking their defaults) and, for a batch, ``[ts, [events...], data_parallel_rank]``.

Examples:
    >>> ev = BlockRemoved(block_hashes=[7], medium=MEDIUM_GPU, group_idx=0)
    >>> ev.to_dict()
    {'type': 'BlockRemoved', 'block_hashes': [7], 'medium': 'GPU', 'group_idx': 0}
    >>> KVCacheEvent.from_dict(["BlockRemoved", [7], "GPU"]) == BlockRemoved([7], "GPU")
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

__all__ = [
    "MEDIUM_GPU",
    "AllBlocksCleared",
    "BlockRemoved",
    "BlockStored",
    "EventBatch",
    "KVCacheEvent",
    "KVEventBatch",
]

MEDIUM_GPU = "GPU"
"""The ``medium`` of events about the GPU prefix cache."""

ExternalBlockHash = bytes | int


def _as_tuple(value: Any) -> Any:
    """Lists (at any depth) as tuples; other values unchanged."""
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    return value


@dataclass
class KVCacheEvent:
    """Base of the KV cache events. Mirrors vllm/distributed/kv_events.py::KVCacheEvent."""

    _registry: ClassVar[dict[str, type[KVCacheEvent]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        KVCacheEvent._registry[cls.__name__] = cls

    def to_dict(self) -> dict[str, Any]:
        """``{"type": class name, field: value, ...}`` in field order (lists copied shallowly)."""
        out: dict[str, Any] = {"type": type(self).__name__}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, list) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Sequence[Any]) -> KVCacheEvent:
        """Rebuild an event from ``to_dict`` output or from msgspec's tagged-array form.

        Args:
            data: ``{"type": name, **fields}`` or ``[name, field0, field1, ...]``.

        Returns:
            The event (of the class named by the tag).

        Raises:
            ValueError: If the tag is unknown, a required field is missing or there are too
                many values.
        """
        if isinstance(data, Mapping):
            name, values = data.get("type"), {k: v for k, v in data.items() if k != "type"}
        else:
            if not data:
                raise ValueError("an event array needs at least its type tag")
            name, positional = data[0], list(data[1:])
            event_cls = cls._lookup(name)
            names = [f.name for f in fields(event_cls)]
            if len(positional) > len(names):
                raise ValueError(f"{name} has {len(names)} fields, got {len(positional)} values")
            values = dict(zip(names, positional, strict=False))
        event_cls = cls._lookup(name)
        if values.get("extra_keys") is not None:
            # NOTE: msgpack/JSON turn tuples into lists; extra keys are tuples (hashable).
            values["extra_keys"] = [_as_tuple(k) for k in values["extra_keys"]]
        try:
            return event_cls(**values)
        except TypeError as exc:
            raise ValueError(f"cannot build {name} from {sorted(values)}: {exc}") from None

    @classmethod
    def _lookup(cls, name: Any) -> type[KVCacheEvent]:
        try:
            return KVCacheEvent._registry[name]
        except (KeyError, TypeError):
            raise ValueError(
                f"unknown KV cache event type {name!r}; known: "
                f"{', '.join(sorted(KVCacheEvent._registry))}"
            ) from None


@dataclass(eq=True)
class BlockStored(KVCacheEvent):
    """Blocks entered the prefix cache. Mirrors vllm/distributed/kv_events.py::BlockStored.

    Attributes:
        block_hashes: The new cached blocks' hashes (int by default, see maybe_convert_block_hash).
        parent_block_hash: Hash of the block before the first one, None at the prompt start.
        token_ids: The tokens of all blocks in the range (including skipped null/masked ones).
        block_size: Tokens per block (tokens).
        lora_id: Deprecated LoRA int id (use lora_name).
        medium: Where the blocks live (MEDIUM_GPU).
        lora_name: The LoRA adapter's name, or None.
        extra_keys: Per stored block, its extra hash keys (or None); None if no block stored.
        group_idx: The kv_cache_group_id.
        kv_cache_spec_kind: Set by KVCacheManager.take_events (a KVCacheSpecKind value).
        kv_cache_spec_sliding_window: Set by KVCacheManager.take_events (tokens) or None.
    """

    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None

    def __hash__(self) -> int:
        # NOTE: as vLLM: lora_name is not part of the hash.
        return hash(
            (
                tuple(self.block_hashes),
                self.parent_block_hash,
                tuple(self.token_ids),
                self.block_size,
                self.lora_id,
                self.medium,
                tuple(self.extra_keys) if self.extra_keys else None,
                self.group_idx,
                self.kv_cache_spec_kind,
                self.kv_cache_spec_sliding_window,
            )
        )


@dataclass(eq=True)
class BlockRemoved(KVCacheEvent):
    """Blocks left the prefix cache (evicted). Mirrors vllm/distributed/kv_events.py::BlockRemoved.

    Attributes:
        block_hashes: Hashes of the removed blocks.
        medium: Where the blocks lived (MEDIUM_GPU).
        group_idx: The kv_cache_group_id.
    """

    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None

    def __hash__(self) -> int:
        return hash((tuple(self.block_hashes), self.medium, self.group_idx))


@dataclass(eq=True)
class AllBlocksCleared(KVCacheEvent):
    """The whole prefix cache was reset. Mirrors vllm/distributed/kv_events.py::AllBlocksCleared."""

    def __hash__(self) -> int:
        return hash(type(self).__name__)


@dataclass
class EventBatch:
    """Events published together. Mirrors vllm/distributed/kv_events.py::EventBatch.

    Attributes:
        ts: Publication time (seconds since the epoch).
        events: The events, in order.
        data_parallel_rank: The DP rank that emitted them, or None.
    """

    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"ts", "events": [event.to_dict()...], "data_parallel_rank"}``."""
        return {
            "ts": self.ts,
            "events": [e.to_dict() if isinstance(e, KVCacheEvent) else e for e in self.events],
            "data_parallel_rank": self.data_parallel_rank,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Sequence[Any]) -> EventBatch:
        """Rebuild from ``to_dict`` output or msgspec's array form ``[ts, events, dp_rank?]``.

        Raises:
            ValueError: If the batch or one of its events is malformed.
        """
        if isinstance(data, Mapping):
            ts, events, rank = data.get("ts"), data.get("events"), data.get("data_parallel_rank")
        else:
            if len(data) not in (2, 3):
                raise ValueError(f"an event batch array has 2 or 3 items, got {len(data)}")
            ts, events, rank = data[0], data[1], (data[2] if len(data) == 3 else None)
        if ts is None or events is None:
            raise ValueError("an event batch needs 'ts' and 'events'")
        return cls(
            ts=ts, events=[KVCacheEvent.from_dict(e) for e in events], data_parallel_rank=rank
        )


@dataclass
class KVEventBatch(EventBatch):
    """A batch of BlockStored / BlockRemoved / AllBlocksCleared. Mirrors vLLM's KVEventBatch."""

    events: list[KVCacheEvent]
