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
  late) is counted in ``num_unknown_removed`` and skipped;
* only the GPU tier (medium "GPU" or None) is drawn: blocks vLLM reports on offloaded tiers
  (medium "CPU", "STORAGE", ...) are counted per tier in ``tiers``, never in the GPU view;
* a batch is applied whole or not at all: a bad event refuses the batch and changes nothing.

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
import math
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from os import PathLike
from typing import Any

from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch
from kvlab.kv_events.format import MAX_GROUP_IDX, MEDIUM_GPU, KVEventFormatError
from kvlab.kv_events.wire import read_kv_event_messages
from kvlab.trace import KVState, Recorder, Trace
from kvlab.trace.fileformat_checks import MAX_GROUPS
from kvlab.trace.tables import InternTables, split_key_code

__all__ = [
    "KVEventTraceBuilder",
    "cached_key_counts",
    "external_hash_bytes",
    "manager_cached_key_counts",
    "medium_tier",
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


def _group(event: Any, num_groups: int = MAX_GROUP_IDX + 1, where: str = "event") -> int:
    g = 0 if event.group_idx is None else event.group_idx
    if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < num_groups:
        hint = "; pass num_groups" if num_groups <= MAX_GROUP_IDX else ""
        raise KVEventFormatError(
            f"{where}: group_idx must be None or an int in [0, {num_groups - 1}]{hint}, "
            f"got {g!r:.40}"
        )
    return g


def medium_tier(medium: Any) -> str:
    """The tier a KV event's ``medium`` names: "GPU" for None or "GPU", else the medium upper-cased
    ("CPU", "STORAGE", ...; a connector's "cpu" joins "CPU").

    Raises:
        KVEventFormatError: If medium is not a str or None.
    """
    if medium is None:
        return MEDIUM_GPU
    if not isinstance(medium, str):
        raise KVEventFormatError(f"medium must be a str or None, got {medium!r:.40}")
    return medium.upper()


class KVEventTraceBuilder:
    """Turns KV event batches into a kvlab Trace of the cached set (see the module docstring).

    Only GPU events (medium "GPU" or None) enter the trace; events about offloaded tiers (CPU,
    STORAGE, ...; vLLM >= 0.26 publishes them from its offloading connectors) are kept apart in
    ``tiers`` and never take a slot. ``AllBlocksCleared`` carries no medium: it is vLLM's GPU
    ``BlockPool.reset_prefix_cache`` and clears the GPU view only.

    Args:
        num_blocks: Slots (blocks): at least the most GPU hashes cached at once.
        num_groups: KV cache groups (group_idx values must be below it; at most MAX_GROUPS, 1024,
            so that the trace saves and loads).

    Attributes:
        num_unknown_removed: Removed hashes that were never stored (skipped), all tiers.
        unknown_removed: The same per tier.
        num_batches: Batches added.
        batch_seqs: Per batch (= step), its publisher sequence number and timestamp.
        tiers: Offloaded tier ("CPU", "STORAGE", ...) -> (hash bytes, group) -> times stored.

    Raises:
        ValueError: If num_blocks or num_groups is not a positive int, or num_groups is too large.
    """

    def __init__(self, num_blocks: int, num_groups: int = 1) -> None:
        for name, v in (("num_blocks", num_blocks), ("num_groups", num_groups)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if num_groups > MAX_GROUPS:
            raise ValueError(f"num_groups must be at most {MAX_GROUPS} (the most groups a kvlab "
                             f"trace file holds), got {num_groups}")  # fmt: skip
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
        self.unknown_removed: Counter[str] = Counter()
        self.num_batches = 0
        self.batch_seqs: list[tuple[int, float]] = []
        self.tiers: dict[str, Counter[tuple[bytes, int]]] = {}

    @property
    def num_unknown_removed(self) -> int:
        """Removed hashes never stored (skipped), summed over tiers."""
        return sum(self.unknown_removed.values())

    def _keys(self, event: Any, where: str) -> tuple[int, list[bytes]]:
        group = _group(event, self.num_groups, where)
        hashes = event.block_hashes
        if not isinstance(hashes, list | tuple):
            raise KVEventFormatError(f"{where}: block_hashes must be a list, got {hashes!r:.40}")
        try:
            return group, [external_hash_bytes(h) + group.to_bytes(4, "big") for h in hashes]
        except TypeError as exc:
            raise KVEventFormatError(f"{where}: block_hashes: {exc}") from None

    def _plan(self, events: Any) -> list[tuple[Any, ...]]:
        """Check every event and play the batch on counts; changes nothing.

        Returns:
            (op, tier, group, keys) per event, op in "store" / "remove" / "clear".

        Raises:
            KVEventFormatError: On a bad event, or more GPU hashes than slots at some point.
        """
        if not isinstance(events, list | tuple):
            raise KVEventFormatError(f"a batch's events must be a list, got {events!r:.40}")
        free, held, cleared, ops = len(self._free), {}, False, []
        for i, event in enumerate(events):
            where = f"event {i} ({type(event).__name__})"
            if isinstance(event, AllBlocksCleared):
                free, held, cleared = self.num_blocks, {}, True
                ops.append(("clear", MEDIUM_GPU, 0, []))
                continue
            if not isinstance(event, BlockStored | BlockRemoved):
                raise KVEventFormatError(f"{where}: not a KV cache event; allowed: BlockStored, "
                                         "BlockRemoved, AllBlocksCleared")  # fmt: skip
            tier = medium_tier(event.medium)
            group, keys = self._keys(event, where)
            op = "store" if isinstance(event, BlockStored) else "remove"
            ops.append((op, tier, group, keys))
            if tier != MEDIUM_GPU:
                continue
            for key in keys:
                n = held.get(key, 0 if cleared else len(self._slots.get(key, ())))
                if op == "store":
                    if free == 0:
                        raise KVEventFormatError(
                            f"{where}: more than num_blocks={self.num_blocks} hashes cached at "
                            "once; pass a larger num_blocks (peak_cached_blocks computes it for "
                            "a recording)"
                        )
                    free, held[key] = free - 1, n + 1
                elif n:
                    free, held[key] = free + 1, n - 1
        return ops

    def add_batch(self, batch: EventBatch, seq: int | None = None) -> None:
        """Apply one batch (one step), all of it or nothing.

        Args:
            batch: The batch (kvlab.core events).
            seq: The publisher's sequence number (default: the batch ordinal).

        Raises:
            KVEventFormatError: (a ValueError) If an event is bad, a group is out of range, more
                GPU hashes would be cached than there are slots, or ts / seq is not a number;
                the builder is then unchanged (no step, no seq recorded).
        """
        if not isinstance(batch, EventBatch):
            raise KVEventFormatError(f"not an event batch: {type(batch).__name__}")
        ts = batch.ts
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            raise KVEventFormatError(f"a batch's ts must be a finite number, got {ts!r:.40}")
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 0):
            raise KVEventFormatError(f"seq must be an int >= 0 or None, got {seq!r:.40}")
        ops = self._plan(batch.events)
        self.recorder.mark_step(self.num_batches)
        self.batch_seqs.append((self.num_batches if seq is None else seq, float(ts)))
        self.num_batches += 1
        for op in ops:
            self._apply(*op)

    def add_event(self, event: Any) -> None:
        """Apply one BlockStored / BlockRemoved / AllBlocksCleared in the current step (see
        add_batch; a refused event changes nothing)."""
        for op in self._plan([event]):
            self._apply(*op)

    def _apply(self, op: str, tier: str, group: int, keys: list[bytes]) -> None:
        if tier != MEDIUM_GPU:
            counts = self.tiers.setdefault(tier, Counter())
            for key in keys:
                k = (key[:-4], group)
                if op == "store":
                    counts[k] += 1
                elif counts[k] > 0:
                    counts[k] -= 1
                    if not counts[k]:
                        del counts[k]
                else:
                    self.unknown_removed[tier] += 1
            return
        rec = self.recorder
        name = {"store": "BlockStored", "remove": "BlockRemoved", "clear": "AllBlocksCleared"}[op]
        rec.begin_call(name, None, () if op == "clear" else (len(keys), group))
        if op == "clear":
            rec.reset()
            for slots in self._slots.values():
                for s in slots:
                    heapq.heappush(self._free, s)
            self._slots.clear()
        for key in keys:
            (self._store if op == "store" else self._remove)(key)
        rec.end_call(name, ())

    def _store(self, key: bytes) -> None:
        slot = heapq.heappop(self._free)
        self._slots.setdefault(key, deque()).append(slot)
        self.recorder.cache_full_blocks(None, int.from_bytes(key[-4:], "big"), 0, 1, [slot], [key])

    def _remove(self, key: bytes) -> None:
        slots = self._slots.get(key)
        if not slots:
            self.unknown_removed[MEDIUM_GPU] += 1
            return
        slot = slots.popleft()
        if not slots:
            del self._slots[key]
        heapq.heappush(self._free, slot)
        self.recorder.evict(slot, key)

    def trace(self) -> Trace:
        """The trace so far (GPU tier only)."""
        return self.recorder.trace()


def peak_cached_blocks(batches: Iterable[EventBatch]) -> tuple[int, int]:
    """(most GPU hashes cached at once, number of groups seen) over ``batches``.

    Raises:
        KVEventFormatError: If a group_idx is not an int in [0, MAX_GROUP_IDX] or a medium not a
            str (before anything is sized by it).
    """
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
            if medium_tier(e.medium) != MEDIUM_GPU:
                continue
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

    The file is streamed: with ``num_blocks`` None it is read twice (the peak, then the trace),
    so memory holds the rebuilt trace, never every decoded batch at once.

    Args:
        path: The recording (see ``kvlab.kv_events.wire``).
        num_blocks: Slots; None = the peak number of cached hashes in the file (at least 1).

    Returns:
        The builder: ``.trace()`` for the views, ``.batch_seqs`` for the publisher's numbering.

    Raises:
        KVEventFormatError: (a ValueError) On a damaged file, more groups than a trace holds
            (MAX_GROUPS), or a num_blocks too small; the message names the file.
        ImportError: For a .kvev file without msgspec.
    """
    try:
        groups = 1
        if num_blocks is None:
            peak, groups = peak_cached_blocks(b for _, b in read_kv_event_messages(path))
            num_blocks = max(peak, 1)
        else:
            groups = peak_cached_blocks(b for _, b in read_kv_event_messages(path))[1]
        if groups > MAX_GROUPS:
            raise KVEventFormatError(f"group_idx {groups - 1} seen; a rebuilt trace holds at "
                                     f"most MAX_GROUPS={MAX_GROUPS} groups")  # fmt: skip
        builder = KVEventTraceBuilder(num_blocks, groups)
        for n, (seq, batch) in enumerate(read_kv_event_messages(path)):
            try:
                builder.add_batch(batch, seq)
            except KVEventFormatError as exc:
                raise KVEventFormatError(f"batch {n} (seq {seq}): {exc}") from None
    except (KVEventFormatError, ValueError) as exc:
        msg = str(exc)
        raise KVEventFormatError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
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
    from kvlab.core.kv_cache_utils import get_block_hash, get_group_id, maybe_convert_block_hash

    out: Counter[tuple[bytes, int]] = Counter()
    cache = kv_cache_manager.block_pool.cached_block_hash_to_block._cache
    for key, blocks in cache.items():
        n = len(blocks) if isinstance(blocks, dict) else 1
        h = external_hash_bytes(maybe_convert_block_hash(get_block_hash(key)))
        out[(h, get_group_id(key))] += n
    return out
