"""KVState: the replayable state of a KV-cache manager, as plain Python structures.

What replay rebuilds at any event, and what ``KVState.from_manager`` snapshots from a live
``kvlab.core.kv_cache_manager.KVCacheManager`` so the two can be compared:

=================  ==============================================  ==========================
field              holds                                           live source
=================  ==============================================  ==========================
free_queue         OrderedDict block_id -> None, head -> tail      BlockPool.free_block_queue
ref_cnt            list[int] per block_id (null block included)    KVCacheBlock.ref_cnt
block_hash         list[int] per block_id: key code or -1          KVCacheBlock.block_hash
cached             dict key code -> tuple of block_ids, insertion  cached_block_hash_to_block
                   order (the first is what a lookup returns)
req_to_blocks      per group: dict request index -> block_ids      SingleTypeKVCacheManager
null_block_id      the null block's id                             BlockPool.null_block
=================  ==============================================  ==========================

A key code packs (hash index, kv_cache_group_id); see ``kvlab.trace.tables``. Not captured:
``num_cached_block`` per request (it changes without an event in allocate_new_computed_blocks).
An empty block list is part of the state: core reports the creation of an empty
``req_to_blocks`` entry as an empty ``req_blocks_add``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kvlab.core.kv_cache_utils import (
    get_block_hash,
    get_group_id,
    make_block_hash_with_group_id,
)
from kvlab.trace.tables import FrozenTables, InternTables, key_code, split_key_code

__all__ = ["KVState"]

Tables = InternTables | FrozenTables


class KVState:
    """One moment of the KV-cache state (see the module docstring for the fields).

    Args:
        num_blocks: Blocks in the pool (num_gpu_blocks).
        num_groups: KV cache groups.
        null_block_id: The null block's id, or None when the pool has none.
        tables: Intern tables that decode request indexes and key codes.
    """

    __slots__ = (
        "block_hash",
        "cached",
        "free_queue",
        "null_block_id",
        "num_blocks",
        "num_free_blocks",
        "num_groups",
        "ref_cnt",
        "req_to_blocks",
        "tables",
    )

    def __init__(
        self,
        num_blocks: int,
        num_groups: int,
        null_block_id: int | None,
        tables: Tables | None = None,
    ) -> None:
        if num_blocks <= 0 or num_groups < 0:
            raise ValueError(
                f"need num_blocks > 0 and num_groups >= 0, got {num_blocks}, {num_groups}"
            )
        self.num_blocks = num_blocks
        self.num_groups = num_groups
        self.null_block_id = null_block_id
        self.free_queue: OrderedDict[int, None] = OrderedDict()
        self.ref_cnt: list[int] = [0] * num_blocks
        self.block_hash: list[int] = [-1] * num_blocks
        # NOTE: values are tuples (immutable) so a checkpoint copy can share them.
        self.cached: dict[int, tuple[int, ...]] = {}
        self.req_to_blocks: list[dict[int, list[int]]] = [{} for _ in range(num_groups)]
        self.tables: Tables = tables if tables is not None else InternTables()
        # NOTE: the live counter (FreeKVCacheBlockQueue.num_free_blocks) when snapshotted from a
        # manager; None for replayed states, where the queue length is the count.
        self.num_free_blocks: int | None = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def fresh(cls, num_blocks: int, num_groups: int = 1, tables: Tables | None = None) -> KVState:
        """The state of a new BlockPool: block 0 is the null block, 1..n-1 queued in id order.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.__init__ (the null block is the first
        block popped from a fresh queue).

        Args:
            num_blocks: num_gpu_blocks (blocks), >= 1.
            num_groups: Number of KV cache groups.
            tables: Intern tables to use (a fresh InternTables by default).

        Raises:
            ValueError: If num_blocks < 1 or num_groups < 0.
        """
        state = cls(num_blocks, num_groups, 0, tables)
        state.free_queue = OrderedDict.fromkeys(range(1, num_blocks))
        return state

    @classmethod
    def from_manager(cls, kv_cache_manager: Any, tables: Tables | None = None) -> KVState:
        """Snapshot a live KVCacheManager (or a bare BlockPool) into a KVState.

        Args:
            kv_cache_manager: A ``KVCacheManager`` (``.block_pool``, ``.coordinator``) or a
                ``BlockPool`` (then no request has blocks).
            tables: InternTables to intern request ids and hashes into (a new one by default);
                pass the recorder's to get codes that match its trace.

        Returns:
            The snapshot; ``num_free_blocks`` holds the queue's own counter.

        Raises:
            TypeError: If the object has neither ``block_pool`` nor ``free_block_queue``.
        """
        pool = getattr(kv_cache_manager, "block_pool", kv_cache_manager)
        if not hasattr(pool, "free_block_queue"):
            raise TypeError(
                f"expected a KVCacheManager or BlockPool, got {type(kv_cache_manager).__name__}"
            )
        managers = _single_type_managers(kv_cache_manager)
        tables = tables if tables is not None else InternTables()
        if not isinstance(tables, InternTables):
            raise TypeError("from_manager needs InternTables (it may add new ids and hashes)")
        null = getattr(pool, "null_block", None)
        state = cls(
            len(pool.blocks), len(managers), None if null is None else null.block_id, tables
        )
        queue = pool.free_block_queue
        state.free_queue = OrderedDict.fromkeys(b.block_id for b in queue.get_all_free_blocks())
        state.num_free_blocks = queue.num_free_blocks
        state.ref_cnt = [b.ref_cnt for b in pool.blocks]
        state.block_hash = [
            -1 if b.block_hash is None else _code(tables, b.block_hash) for b in pool.blocks
        ]
        for key, blocks in pool.cached_block_hash_to_block._cache.items():
            ids = tuple(blocks) if isinstance(blocks, dict) else (blocks.block_id,)
            state.cached[_code(tables, key)] = ids
        for group, mgr in enumerate(managers):
            state.req_to_blocks[group] = {
                tables.request_index(r): [b.block_id for b in blks]
                for r, blks in mgr.req_to_blocks.items()
            }
        return state

    def apply(
        self,
        kind: int,
        group: int = 0,
        request: int = -1,
        a: int = 0,
        b: int = 0,
        payload: Any = (),
    ) -> None:
        """Apply one raw event in place, checking its preconditions (``Trace.row(i)`` gives one).

        For example, ``state.apply(*trace.row(i))`` steps a state over event i.

        Raises:
            kvlab.trace.ReplayError: If the event does not fit this state.
        """
        from kvlab.trace.replay import apply_event  # NOTE: replay builds on this module

        apply_event(self, kind, group, request, a, b, payload)

    # ------------------------------------------------------------------ copies and views
    def copy(self) -> KVState:
        """An independent copy (the cached-map tuples are shared; they are immutable)."""
        new = KVState.__new__(KVState)
        new.num_blocks, new.num_groups = self.num_blocks, self.num_groups
        new.null_block_id, new.tables = self.null_block_id, self.tables
        new.num_free_blocks = self.num_free_blocks
        new.free_queue = OrderedDict(self.free_queue)
        new.ref_cnt = self.ref_cnt.copy()
        new.block_hash = self.block_hash.copy()
        new.cached = self.cached.copy()
        new.req_to_blocks = [{r: blks.copy() for r, blks in g.items()} for g in self.req_to_blocks]
        return new

    def free_queue_order(self) -> list[int]:
        """Block ids in the free queue, head (evicted first) to tail."""
        return list(self.free_queue)

    def key_bytes(self, code: int) -> bytes:
        """The BlockHashWithGroupId bytes of a key code (hash + 4-byte big-endian group)."""
        hash_index, group = split_key_code(code)
        return make_block_hash_with_group_id(self.tables.hash_bytes(hash_index), group)

    def block_hash_bytes(self, block_id: int) -> bytes | None:
        """The block's BlockHashWithGroupId, or None when it is not cached."""
        code = self.block_hash[block_id]
        return None if code < 0 else self.key_bytes(code)

    def blocks_of(self, request_id: str, kv_cache_group_id: int = 0) -> list[int]:
        """``req_to_blocks[request_id]`` of one group (empty when the request holds none)."""
        idx = _find_request(self.tables, request_id)
        return list(self.req_to_blocks[kv_cache_group_id].get(idx, ()))

    def canonical(self) -> dict[str, Any]:
        """Everything as plain values (bytes keys, str request ids), independent of tables.

        Two states are equal iff their canonical forms are equal.
        """
        kb = self.key_bytes
        return {
            "null_block_id": self.null_block_id,
            "free_queue": list(self.free_queue),
            "ref_cnt": list(self.ref_cnt),
            "block_hash": [None if c < 0 else kb(c) for c in self.block_hash],
            "cached": {kb(c): list(ids) for c, ids in self.cached.items()},
            "req_to_blocks": [
                {self.tables.request_id(r): list(b) for r, b in g.items()}
                for g in self.req_to_blocks
            ],
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KVState):
            return NotImplemented
        return self.canonical() == other.canonical()

    __hash__ = None  # type: ignore[assignment]

    def diff(self, other: KVState, limit: int = 5) -> list[str]:
        """Readable differences from ``other`` (empty when equal), at most ``limit`` per field."""
        mine, theirs = self.canonical(), other.canonical()
        out: list[str] = []
        for field, value in mine.items():
            o = theirs[field]
            if value == o:
                continue
            if isinstance(value, list) and field in ("ref_cnt", "block_hash"):
                bad = [i for i, (x, y) in enumerate(zip(value, o)) if x != y][:limit]
                out.append(
                    f"{field} differs at block_ids {bad}: "
                    + ", ".join(f"{i}: {value[i]!r} != {o[i]!r}" for i in bad)
                )
            elif isinstance(value, dict):
                keys = [k for k in value.keys() | o.keys() if value.get(k) != o.get(k)][:limit]
                out.append(
                    f"{field} differs at {len(keys)}+ keys: "
                    + "; ".join(f"{_short(k)}: {value.get(k)} != {o.get(k)}" for k in keys)
                )
            else:
                out.append(f"{field}: {_clip(value)} != {_clip(o)}")
        return out

    def __repr__(self) -> str:
        nreq = sum(len(g) for g in self.req_to_blocks)
        return (
            f"KVState(num_blocks={self.num_blocks}, free={len(self.free_queue)}, "
            f"cached_keys={len(self.cached)}, requests={nreq}, groups={self.num_groups})"
        )


def _code(tables: InternTables, key: bytes) -> int:
    return key_code(tables.hash_index(get_block_hash(key)), get_group_id(key))


def _find_request(tables: Tables, request_id: str) -> int:
    if isinstance(tables, InternTables):
        return tables._request_index.get(request_id, -1)
    return tables.find_request(request_id)


def _single_type_managers(obj: Any) -> tuple[Any, ...]:
    coordinator = getattr(obj, "coordinator", None)
    if coordinator is None:
        return ()
    return tuple(coordinator.single_type_managers)


def _short(value: Any) -> str:
    if isinstance(value, bytes):
        return value[:4].hex() + ".." + f"g{int.from_bytes(value[-4:], 'big')}"
    return repr(value)


def _clip(value: Any, n: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."
