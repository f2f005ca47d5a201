"""Record a NanoBlockManager with kvlab.trace, and snapshot it as a KVState.

nano-vllm's pool has no null block: every block starts in ``free_block_ids`` in id order. Its
state maps onto ``kvlab.trace.KVState`` field for field::

    free_queue      <- free_block_ids (head = free_block_ids[0])
    ref_cnt         <- Block.ref_count
    block_hash      <- Block.hash, where the map entry of that hash points back at the block
    cached          <- hash_to_block_id, valid entries only (stale ones: NanoBlockManager.stale_entries)
    req_to_blocks   <- each allocated sequence's block_table (group 0)

so ``Trace.state_at(i)`` of a recorded run equals ``nano_state(manager)`` after event i, and
the pool, free-queue and block-table views draw it unchanged.

Stale entries are not state a KVState holds, but ``kvlab.trace.explain_nano`` rebuilds them
from the events (an entry is the last block its hash was stored to), which is how the views
tell a token-id mismatch from a first missing hash. Entries already stale when recording
starts have no event, so ``nano_config`` lists them (``stale_entries_at_start``).

What the manager records, through the same recorder as kvlab.core
(``kvlab.core.recorder.KVRecorder``): what counts as "cached" is the *valid* part of the map,
``hash_to_block_id[h] == b and blocks[b].hash == h``. A block leaving it is one
``evict(b, key)`` event (its hash reset by reuse, or its map entry overwritten); entering it is
one ``cache_full_blocks`` event. Hashes are recorded as 8 bytes big-endian (``hash_key``),
group 0. Calls (``begin_call`` / ``end_call``), args and results:

==========  ===========================  ===================================================
name        args                         result
==========  ===========================  ===================================================
allocate    (num_tokens, num_blocks)     (num_cached_tokens,)
may_append  (num_tokens,)                (case,): 0 room left, 1 new block, 2 last block hashed
deallocate  ()                           (num_blocks_freed,)  blocks whose ref_count reached 0
==========  ===========================  ===================================================

Lookups are recorded for the full blocks nano-vllm probes before its first miss (after it, a
probe's answer is ignored, so it is not recorded).

Examples:
    >>> from kvlab.nanovllm.engine.block_manager import NanoSequence
    >>> mgr = NanoBlockManager(num_blocks=4, block_size=2)
    >>> rec = record_nano(mgr)
    >>> mgr.allocate(NanoSequence("a", [1, 2, 3], block_size=2))
    >>> rec.trace().state_at(-1 + len(rec)) == nano_state(mgr)
    True
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kvlab.nanovllm.engine.block_manager import NanoBlockManager
from kvlab.nanovllm.instrument import hash_key
from kvlab.trace import KVState, Recorder
from kvlab.trace.tables import InternTables, key_code

__all__ = ["NANO_CALLS", "nano_config", "nano_state", "record_nano"]

NANO_CALLS = ("allocate", "may_append", "deallocate")
"""Call names a recorded NanoBlockManager brackets its events with."""


def nano_config(manager: NanoBlockManager) -> dict[str, Any]:
    """Trace metadata for a NanoBlockManager (the keys ``kvlab.trace`` and the views read).

    Args:
        manager: The manager.

    Returns:
        A JSON-serialisable dict: one full-attention-like group, no null block,
        ``"cache": "nano-vllm"`` so a viewer can tell the design apart, and
        ``"stale_entries_at_start"`` (16-hex-digit hash -> block_id): the map entries already
        stale now, which no event will show (``kvlab.trace.explain_nano`` reads them).
    """
    return {
        "cache": "nano-vllm",
        "num_gpu_blocks": manager.num_blocks,
        "num_groups": 1,
        "groups": [
            {
                "kv_cache_group_id": 0,
                "spec": "FullAttentionSpec",
                "manager": "NanoBlockManager",
                "block_size": manager.block_size,
                "sliding_window": None,
                "attention_chunk_size": None,
            }
        ],
        "enable_caching": True,
        "use_eagle": False,
        "max_model_len": None,
        "hash_block_size": manager.block_size,
        "null_block_id": None,
        "coordinator": None,
        "eagle_group_ids": [],
        "hash": "xxhash64 (nano-vllm)",
        "stale_entries_at_start": {
            f"{h:016x}": b for h, b in sorted(manager.stale_entries().items())
        },
    }


def nano_state(manager: NanoBlockManager, tables: InternTables | None = None) -> KVState:
    """Snapshot a NanoBlockManager as a KVState (see the module docstring for the mapping).

    Args:
        manager: The manager.
        tables: Intern tables to add request ids and hashes to (new ones by default).

    Returns:
        The state; ``num_free_blocks`` is the deque's length.

    Raises:
        TypeError: If ``manager`` is not a NanoBlockManager.
    """
    if not isinstance(manager, NanoBlockManager):
        raise TypeError(f"expected a NanoBlockManager, got {type(manager).__name__}")
    tables = tables if tables is not None else InternTables()
    state = KVState(manager.num_blocks, 1, None, tables)
    state.free_queue = OrderedDict.fromkeys(manager.free_block_ids)
    state.num_free_blocks = len(manager.free_block_ids)
    state.ref_cnt = [b.ref_count for b in manager.blocks]
    for h, block_id in manager.cached_hashes().items():
        code = key_code(tables.hash_index(hash_key(h)[:-4]), 0)
        state.block_hash[block_id] = code
        state.cached[code] = (block_id,)
    state.req_to_blocks[0] = {
        tables.request_index(rid): list(seq.block_table) for rid, seq in manager.seqs.items()
    }
    return state


def record_nano(manager: NanoBlockManager, chunk_size: int = 8192) -> Recorder:
    """Attach a new kvlab Recorder to ``manager``, starting from its current state.

    Args:
        manager: The manager (without a recorder).
        chunk_size: Passed to Recorder (events buffered before columnarising).

    Returns:
        The recorder; ``recorder.trace()`` gives a Trace the kvlab views draw.

    Raises:
        RuntimeError: If the manager already has a recorder.
    """
    if manager.recorder is not None:
        raise RuntimeError("the NanoBlockManager already has a recorder; detach it first")
    tables = InternTables()
    # NOTE: stale map entries have no event; intern their hashes so that explain_nano can key
    # them by hash index like every other hash of the trace.
    for h in sorted(manager.stale_entries()):
        tables.hash_index(h.to_bytes(8, "big"))
    rec = Recorder(
        initial_state=nano_state(manager, tables),
        config=nano_config(manager),
        chunk_size=chunk_size,
    )
    rec.initial_state.num_free_blocks = None
    manager.set_recorder(rec)
    return rec
