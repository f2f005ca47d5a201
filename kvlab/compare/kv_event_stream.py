"""Rebuild a real vLLM's prefix cache from its KV events, as a kvlab trace the views can draw.

vLLM tells the outside world only which block *hashes* entered (``BlockStored``) or left
(``BlockRemoved``) its prefix cache, or that everything left (``AllBlocksCleared``); block ids
and ref counts never leave the engine. The rebuilt trace therefore shows the cached set, on
*slots* of kvlab's choosing:

* a stored hash takes the lowest free slot (a block stored twice, as vLLM can, takes two);
  a removed hash frees the slot that has held it longest; a clear frees all of them;
* ref_cnt stays 0 and every slot stays in the free queue in id order, so the pool view shows
  a cached hash as an ``evictable`` cell and an empty slot as ``free``: read it as "cached or
  not", not as usage, and the free-queue order as slot order, not vLLM's eviction order;
* each vLLM event is one call named after it (``BlockStored`` with args (num_hashes, group),
  ``BlockRemoved`` likewise, ``AllBlocksCleared``), each batch one step (its ordinal);
* hashes are kept as vLLM sent them: an int as its 8 bytes big-endian, bytes unchanged; the
  group is ``group_idx`` (None -> 0). A removal of a hash never stored (the stream was joined
  late) is counted in ``num_unknown_removed`` and skipped.

Examples:
    >>> from kvlab.core.kv_events import BlockStored, BlockRemoved, KVEventBatch
    >>> b = KVEventTraceBuilder(num_blocks=4)
    >>> b.add_batch(KVEventBatch(0.0, [BlockStored([7, 8], None, [], 16, None, "GPU", None)]))
    >>> b.add_batch(KVEventBatch(1.0, [BlockRemoved([7], "GPU")]))
    >>> t = b.trace(); sorted(c for c, n in cached_key_counts(t.state_at(len(t) - 1)).items())
    [(b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x08', 0)]
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from os import PathLike
from typing import Any

from kvlab.compare.kv_event_wire import read_kv_event_messages
from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch
from kvlab.trace import KVState, Recorder, Trace
from kvlab.trace.tables import InternTables, split_key_code

__all__ = [
    "KVEventTraceBuilder",
    "cached_key_counts",
    "external_hash_bytes",
    "manager_cached_key_counts",
    "peak_cached_blocks",
    "read_kv_event_file",
]


def external_hash_bytes(block_hash: int | bytes) -> bytes:
    """A KV-event hash as bytes: an int as 8 bytes big-endian, bytes unchanged.

    Raises:
        TypeError: If it is neither an int nor bytes.
    """
    if isinstance(block_hash, bytes):
        return block_hash
    if isinstance(block_hash, int) and not isinstance(block_hash, bool):
        return (block_hash & ((1 << 64) - 1)).to_bytes(8, "big")
    raise TypeError(f"a block hash is an int or bytes, got {type(block_hash).__name__}")


def _group(event: Any) -> int:
    return 0 if event.group_idx is None else int(event.group_idx)


class KVEventTraceBuilder:
    """Turns KV event batches into a kvlab Trace of the cached set (see the module docstring).

    Args:
        num_blocks: Slots (blocks): at least the most hashes cached at once.
        num_groups: KV cache groups (group_idx values must be below it).

    Attributes:
        num_unknown_removed: Removed hashes that were never stored (skipped).
        num_batches: Batches added.
        batch_seqs: Per batch (= step), its publisher sequence number and timestamp.

    Raises:
        ValueError: If num_blocks or num_groups is not a positive int.
    """

    def __init__(self, num_blocks: int, num_groups: int = 1) -> None:
        for name, v in (("num_blocks", num_blocks), ("num_groups", num_groups)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        state = KVState(num_blocks, num_groups, None, InternTables())
        state.free_queue = OrderedDict.fromkeys(range(num_blocks))
        config = {
            "cache": "vllm-kv-events",
            "num_gpu_blocks": num_blocks,
            "num_groups": num_groups,
            "groups": [{"kv_cache_group_id": g, "spec": "FromKVEvents"} for g in range(num_groups)],
            "enable_caching": True,
            "null_block_id": None,
        }
        self.recorder = Recorder(initial_state=state, config=config)
        self.num_blocks, self.num_groups = num_blocks, num_groups
        self._free = list(range(num_blocks))  # NOTE: a heap: the lowest free slot first
        self._slots: dict[bytes, deque[int]] = {}  # key -> slots holding it, oldest first
        self.num_unknown_removed = 0
        self.num_batches = 0
        self.batch_seqs: list[tuple[int, float]] = []

    def _key(self, block_hash: int | bytes, group: int) -> bytes:
        if not 0 <= group < self.num_groups:
            raise ValueError(f"group_idx {group} outside [0, {self.num_groups}); pass num_groups")
        return external_hash_bytes(block_hash) + group.to_bytes(4, "big")

    def add_batch(self, batch: EventBatch, seq: int | None = None) -> None:
        """Apply one batch (one step).

        Raises:
            ValueError: If more hashes would be cached than there are slots, or a group is out
                of range (the bad event changes nothing; events before it are applied).
            TypeError: If an event is not a KV cache event.
        """
        rec = self.recorder
        rec.mark_step(self.num_batches)
        self.batch_seqs.append((self.num_batches if seq is None else seq, float(batch.ts)))
        self.num_batches += 1
        for event in batch.events:
            self.add_event(event)

    def add_event(self, event: Any) -> None:
        """Apply one BlockStored / BlockRemoved / AllBlocksCleared (see add_batch)."""
        rec = self.recorder
        if isinstance(event, BlockStored):
            keys = [self._key(h, _group(event)) for h in event.block_hashes]
            if len(keys) > len(self._free):
                raise ValueError(
                    f"more than num_blocks={self.num_blocks} hashes cached at once; pass a "
                    "larger num_blocks (peak_cached_blocks computes it for a recording)"
                )
            rec.begin_call("BlockStored", None, (len(keys), _group(event)))
            for key in keys:
                self._store(key)
        elif isinstance(event, BlockRemoved):
            keys = [self._key(h, _group(event)) for h in event.block_hashes]
            rec.begin_call("BlockRemoved", None, (len(keys), _group(event)))
            for key in keys:
                self._remove(key)
        elif isinstance(event, AllBlocksCleared):
            rec.begin_call("AllBlocksCleared", None, ())
            rec.reset()
            for slots in self._slots.values():
                for s in slots:
                    heapq.heappush(self._free, s)
            self._slots.clear()
        else:
            raise TypeError(f"not a KV cache event: {type(event).__name__}")
        rec.end_call(type(event).__name__, ())

    def _store(self, key: bytes) -> None:
        slot = heapq.heappop(self._free)
        self._slots.setdefault(key, deque()).append(slot)
        self.recorder.cache_full_blocks(None, int.from_bytes(key[-4:], "big"), 0, 1, [slot], [key])

    def _remove(self, key: bytes) -> None:
        slots = self._slots.get(key)
        if not slots:
            self.num_unknown_removed += 1
            return
        slot = slots.popleft()
        if not slots:
            del self._slots[key]
        heapq.heappush(self._free, slot)
        self.recorder.evict(slot, key)

    def trace(self) -> Trace:
        """The trace so far."""
        return self.recorder.trace()


def peak_cached_blocks(batches: Iterable[EventBatch]) -> tuple[int, int]:
    """(most hashes cached at once, number of groups seen) over ``batches``."""
    live: Counter[tuple[bytes, int]] = Counter()
    total = peak = 0
    groups = 1
    for batch in batches:
        for e in batch.events:
            if isinstance(e, AllBlocksCleared):
                live.clear()
                total = 0
                continue
            g = _group(e)
            groups = max(groups, g + 1)
            for h in e.block_hashes:
                key = (external_hash_bytes(h), g)
                if isinstance(e, BlockStored):
                    live[key] += 1
                    total += 1
                elif live[key] > 0:
                    live[key] -= 1
                    total -= 1
            peak = max(peak, total)
    return peak, groups


def read_kv_event_file(
    path: str | PathLike[str], num_blocks: int | None = None
) -> KVEventTraceBuilder:
    """Rebuild the cache history recorded in a ``.kvev`` or ``.jsonl`` file.

    Args:
        path: The recording (see ``kvlab.compare.kv_event_wire``).
        num_blocks: Slots; None = the peak number of cached hashes in the file (at least 1).

    Returns:
        The builder: ``.trace()`` for the views, ``.batch_seqs`` for the publisher's numbering.

    Raises:
        ValueError: On a damaged file, or if num_blocks is too small.
        ImportError: For a .kvev file without msgspec.
    """
    messages = list(read_kv_event_messages(path))
    peak, groups = peak_cached_blocks(b for _, b in messages)
    builder = KVEventTraceBuilder(num_blocks or max(peak, 1), groups)
    for seq, batch in messages:
        builder.add_batch(batch, seq)
    return builder


def cached_key_counts(state: KVState) -> Counter[tuple[bytes, int]]:
    """(hash bytes, group) -> number of blocks cached under it, in a KVState."""
    out: Counter[tuple[bytes, int]] = Counter()
    for code, block_ids in state.cached.items():
        hash_index, group = split_key_code(code)
        out[(state.tables.hash_bytes(hash_index), group)] += len(block_ids)
    return out


def manager_cached_key_counts(kv_cache_manager: Any) -> Counter[tuple[bytes, int]]:
    """The same count for a live kvlab KVCacheManager, with hashes in KV-event form."""
    from kvlab.core.block_hash import get_block_hash, get_group_id, maybe_convert_block_hash

    out: Counter[tuple[bytes, int]] = Counter()
    cache = kv_cache_manager.block_pool.cached_block_hash_to_block._cache
    for key, blocks in cache.items():
        n = len(blocks) if isinstance(blocks, dict) else 1
        h = external_hash_bytes(maybe_convert_block_hash(get_block_hash(key)))
        out[(h, get_group_id(key))] += n
    return out
