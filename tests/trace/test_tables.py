"""Intern tables: stable indexes, frozen blob form, reverse lookups, key codes."""

from __future__ import annotations

import numpy as np
import pytest

from kvlab.trace.tables import FrozenTables, InternTables, key_code, split_key_code


def test_interning_is_stable_and_freezing_preserves_values() -> None:
    t = InternTables()
    assert [t.hash_index(h) for h in (b"ab", b"cde", b"ab", b"")] == [0, 1, 0, 2]
    assert [t.request_index(r) for r in ("x", "y", "x")] == [0, 1, 0]
    f = t.freeze()
    assert [f.hash_bytes(i) for i in range(3)] == [b"ab", b"cde", b""]
    assert f.hash_offsets.tolist() == [0, 2, 5, 5]
    assert (f.request_id(1), f.request_id(-1)) == ("y", None)
    assert (f.find_hash(b"cde"), f.find_hash(b"zz")) == (1, -1)
    assert (f.find_request("x"), f.find_request("q")) == (0, -1)
    t.hash_index(b"new")  # the frozen copy does not see later additions
    assert f.num_hashes == 3


def test_frozen_tables_validate_offsets() -> None:
    blob = np.frombuffer(b"abcd", dtype=np.uint8)
    with pytest.raises(ValueError, match="end at len\\(hash_blob\\)=4"):
        FrozenTables([], blob, np.array([0, 2, 3]))
    with pytest.raises(ValueError, match="starting at 0"):
        FrozenTables([], blob, np.array([1, 4]))
    with pytest.raises(IndexError, match="hash index 5 out of range"):
        FrozenTables([], blob, np.array([0, 4])).hash_bytes(5)


def test_key_codes_round_trip() -> None:
    for h, g in ((0, 0), (7, 3), (123456, 65535)):
        assert split_key_code(key_code(h, g)) == (h, g)
    assert key_code(1, 0) > key_code(0, 65535)
