"""Event and Call: small read-only views of trace rows, with their fields decoded.

A view is built on demand from the columns (``Trace[i]``, ``Trace.calls()``); nothing here is
stored per event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvlab.trace.events import EventKind, decode_call, unpack_fixed_point
from kvlab.trace.tables import FrozenTables
from kvlab.trace.untrusted import shown

__all__ = ["Call", "Event", "decode_fields", "short_hash"]

K = EventKind


def short_hash(block_hash: bytes, n: int = 4) -> str:
    """The first ``n`` bytes of a hash as hex (enough to tell hashes apart on screen)."""
    return block_hash[:n].hex()


@dataclass(frozen=True, slots=True)
class Event:
    """One recorded event.

    Attributes:
        seq: Index in the trace.
        kind: The EventKind.
        step: Scheduler step it happened in.
        depth: Call nesting (0 = outside every call).
        parent: seq of the enclosing call's CALL_BEGIN (for CALL_END: its own), -1 at top level.
        group: kv_cache_group_id for kinds that have one, else None.
        request: Request id for kinds that have one, else None.
        fields: Decoded per-kind fields (see kvlab.trace.events for the schema).
    """

    seq: int
    kind: EventKind
    step: int
    depth: int
    parent: int
    group: int | None
    request: str | None
    fields: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def __str__(self) -> str:
        parts = [f"#{self.seq}", f"step {self.step}", "  " * self.depth + self.kind.name]
        if self.request is not None:
            parts.append(f"req={shown(self.request)}")
        if self.group is not None:
            parts.append(f"group={self.group}")
        parts += [f"{k}={_fmt(v)}" for k, v in self.fields.items()]
        return " ".join(parts)


def _fmt(value: Any) -> str:
    if isinstance(value, list) and len(value) > 12:
        return f"[{', '.join(map(str, value[:12]))}, ... ({len(value)})]"
    return str(value)


@dataclass(slots=True)
class Call:
    """One KVCacheManager call: its CALL_BEGIN..CALL_END span and decoded args/result.

    Attributes:
        begin: seq of the CALL_BEGIN (the call's id).
        end: seq of the CALL_END, or -1 when the trace ends inside the call.
        name: Call name (``allocate_slots``, ...).
        request: Request id, or None.
        args: Decoded args by name (``args`` list of values for variable-arity calls).
        result: Decoded result by name (empty until the call ends).
        depth: Nesting depth of the call.
        parent: begin seq of the enclosing call, -1 for a top-level call.
        step: Scheduler step at the CALL_BEGIN.
        children: Calls nested directly inside (filled by Trace.call_tree()).
    """

    begin: int
    end: int
    name: str
    request: str | None
    args: dict[str, Any]
    result: dict[str, Any]
    depth: int
    parent: int
    step: int
    children: list[Call] = field(default_factory=list)

    @property
    def num_events(self) -> int:
        """Events from CALL_BEGIN to CALL_END inclusive (0 if unfinished)."""
        return self.end - self.begin + 1 if self.end >= 0 else 0

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.args.items())
        res = ", ".join(f"{k}={v}" for k, v in self.result.items())
        req = f"[{shown(self.request)}] " if self.request is not None else ""
        return (f"#{self.begin}-{self.end} step {self.step} {req}{shown(self.name)}({args}) -> "
                f"({res})")  # fmt: skip


_FROM_A = {K.POPLEFT: "block_id", K.REMOVE: "block_id", K.APPEND: "block_id", K.STEP: "step"}
_FROM_PAYLOAD = {K.POPLEFT_N: "block_ids", K.APPEND_N: "block_ids", K.GET_NEW_BLOCKS: "block_ids",
                 K.TOUCH: "block_ids", K.FREE_BLOCKS: "block_ids", K.REQ_BLOCKS_ADDED: "block_ids",
                 K.REQ_BLOCKS_NULLED: "indices"}  # fmt: skip


def decode_fields(
    kind: EventKind, group: int, a: int, b: int, payload: list[int], tables: FrozenTables,
    call_names: list[str],
) -> dict[str, Any]:  # fmt: skip
    """The per-kind fields of one event (the schema in kvlab.trace.events).

    Hashes appear as ``hash`` (short hex) next to ``hash_index`` (index in the hash table).
    """
    if kind in _FROM_A:
        return {_FROM_A[kind]: a}
    if kind in _FROM_PAYLOAD:
        return {_FROM_PAYLOAD[kind]: payload}
    if kind == K.BLOCK_STORED:
        n = len(payload) // 2
        hashes = [short_hash(tables.hash_bytes(h)) for h in payload[n:]]
        return {"num_cached_blocks": a, "num_full_blocks": b, "block_ids": payload[:n],
                "hashes": hashes, "hash_indexes": payload[n:]}  # fmt: skip
    if kind == K.BLOCK_REMOVED:
        return {"block_id": a, "hash": short_hash(tables.hash_bytes(b)), "hash_index": b}
    if kind == K.LOOKED_UP:
        return {"hash": short_hash(tables.hash_bytes(a)), "hash_index": a, "block_id": b,
                "hit": b >= 0}  # fmt: skip
    if kind == K.FIXED_POINT_ITERATED:
        out, reused, gids, block_ids = unpack_fixed_point(payload)
        return {"iteration": a, "hit_length_in": b, "hit_length_out": out, "reused": reused,
                "kv_cache_group_ids": gids, "block_ids": block_ids}  # fmt: skip
    if kind in (K.CALL_BEGIN, K.CALL_END):
        name = call_names[group] if 0 <= group < len(call_names) else f"call#{group}"
        return {"name": name, **decode_call(name, a, b, payload, kind == K.CALL_END)}
    return {}
