"""The event vocabulary: one kind per recorder hook, schema complete, call args round-trip."""

from __future__ import annotations

import inspect

import pytest

from kvlab.core.recorder import KVRecorder
from kvlab.trace.events import (
    CALL_SPECS,
    HOOK_KINDS,
    KIND_SCHEMA,
    MUTATING_KINDS,
    VERBATIM,
    EventKind,
    make_packer,
    pack_fixed_point,
    unpack_fixed_point,
)

# Hooks that record no event of their own: allocate_slots' count (it goes into the call's
# result) and a call its guard refused (it removes the call's CALL_BEGIN).
NON_EVENT_HOOKS = {"num_blocks_to_allocate", "abort_call"}
PROTOCOL_HOOKS = {
    name
    for name, _ in inspect.getmembers(KVRecorder, inspect.isfunction)
    if not name.startswith("_") and name not in NON_EVENT_HOOKS
}


def test_every_protocol_hook_has_exactly_one_kind() -> None:
    assert set(HOOK_KINDS) == PROTOCOL_HOOKS
    assert len(set(HOOK_KINDS.values())) == len(HOOK_KINDS)


def test_every_kind_has_a_schema_and_step_and_calls_exist() -> None:
    assert set(KIND_SCHEMA) == set(EventKind)
    assert {EventKind.STEP, EventKind.CALL_BEGIN, EventKind.CALL_END} <= set(EventKind)
    for kind, schema in KIND_SCHEMA.items():
        if schema.hook is not None:
            assert HOOK_KINDS[schema.hook] is kind


def test_vllm_event_names_are_reused() -> None:
    assert HOOK_KINDS["cache_full_blocks"] is EventKind.BLOCK_STORED
    assert HOOK_KINDS["evict"] is EventKind.BLOCK_REMOVED
    assert HOOK_KINDS["reset"] is EventKind.ALL_BLOCKS_CLEARED


def test_mutating_kinds_are_exactly_the_state_changes() -> None:
    reads = {
        EventKind.STEP,
        EventKind.LOOKED_UP,
        EventKind.FIXED_POINT_ITERATED,
        EventKind.CALL_BEGIN,
        EventKind.CALL_END,
    }
    assert MUTATING_KINDS == set(EventKind) - reads


def test_kinds_fit_a_uint8_column() -> None:
    assert max(EventKind) < 256


def test_call_ids_are_distinct_and_dense() -> None:
    assert sorted(s.call_id for s in CALL_SPECS.values()) == list(range(len(CALL_SPECS)))


def test_decode_step_allocate_slots_packs_without_payload() -> None:
    spec = CALL_SPECS["allocate_slots"]
    # (num_computed_tokens, new_comp, ext_comp, num_new_tokens, lookahead, encoder, delay,
    #  full_sequence_must_fit)
    assert spec.pack_args((37, 0, 0, 1, 0, 0, 0, 0)) == (37, 1, ())
    assert spec.pack_args((0, 32, 0, 5, 0, 0, 0, 0)) == (0, 5, (32,))
    assert spec.pack_args((0, 0, 0, 5, 2, 0, 1, 0)) == (0, 5, (0, 0, 2, 0, 1))
    assert spec.pack_args((0, 32, 0, 5, 0, 0, 0, 1)) == (0, 5, (32, 0, 0, 0, 0, 1))


@pytest.mark.parametrize("name", sorted(CALL_SPECS))
def test_every_call_round_trips(name: str) -> None:
    spec = CALL_SPECS[name]
    args = tuple(range(3, 3 + len(spec.args))) if spec.pack is not None else (4, 9, 17)
    a, b, rest = spec.pack_args(args)
    assert spec.unpack_args(a, b, list(rest)) == args
    result = tuple(range(1, 1 + len(spec.result)))
    a, b, rest = spec.pack_result(result)
    assert spec.unpack_result(a, b, list(rest)) == result


def test_unexpected_arity_is_stored_verbatim() -> None:
    spec = CALL_SPECS["get_computed_blocks"]
    assert spec.pack_args((1, 2, 3)) == (VERBATIM, 3, (1, 2, 3))
    assert spec.unpack_args(VERBATIM, 3, [1, 2, 3]) == (1, 2, 3)
    assert make_packer(None)((5, 6)) == (VERBATIM, 2, (5, 6))


@pytest.mark.parametrize(
    ("reused", "gids", "block_ids"),
    [(False, [0], [[1, 2, 3]]), (True, [0, 3], [[1], [4]]), (False, [1, 2], [[0, 0, 7], []]),
     (False, [2], None), (True, [1, 2], None)],
)  # fmt: skip
def test_fixed_point_payload_round_trips(reused, gids, block_ids) -> None:
    packed = pack_fixed_point(12, reused, gids, block_ids)
    assert unpack_fixed_point(packed) == (12, reused, gids, block_ids)
    # Old payloads (no block lists) keep their exact layout.
    if block_ids is None:
        assert packed == (12, int(reused), *gids)


def test_fixed_point_payload_needs_one_list_per_group() -> None:
    with pytest.raises(ValueError, match="one list per kv_cache_group_id"):
        pack_fixed_point(8, False, [0, 1], [[1, 2]])
