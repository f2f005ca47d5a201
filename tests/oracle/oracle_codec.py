"""Compact, vLLM-free encoding of the oracle fixtures (shared by the recorder and the replay).

A value is normalised to CBOR-friendly plain data: tuples become lists, ``bytes`` (block hashes and
cached-map keys) become the string ``"#<n>"`` where ``n`` indexes the seed's hash table in order of
first appearance, dicts keep their keys (normalised the same way). A state is a dict of such values;
it is stored as a delta against the previous state: unchanged keys are left out, a list of the same
length may be stored as ``["~", [[index, value], ...]]`` and a dict as ``["{", {key: value}, [removed
keys]]``.
"""
from __future__ import annotations

from typing import Any

FORMAT_VERSION = 1


class HashMismatch(AssertionError):
    """A block hash differs from the recorded one (first appearance ``index``)."""


class Interner:
    """Numbers distinct ``bytes`` values in order of first appearance.

    Args:
        expected: The recorded table; when given, every new value must equal the recorded value at
            its index, else ``HashMismatch`` (so a wrong hash fails where it first appears).
    """

    def __init__(self, expected: list[bytes] | None = None):
        self.table: list[bytes] = []
        self._index: dict[bytes, int] = {}
        self._expected = expected

    def __call__(self, value: bytes) -> str:
        idx = self._index.get(value)
        if idx is None:
            idx = len(self.table)
            if self._expected is not None:
                want = self._expected[idx] if idx < len(self._expected) else None
                if want != value:
                    raise HashMismatch(
                        f"hash #{idx} (first appearance): kvlab {value.hex()} != vLLM "
                        f"{want.hex() if want is not None else '<no more hashes recorded>'}"
                    )
            self._index[value] = idx
            self.table.append(bytes(value))
        return f"#{idx}"


def norm(value: Any, intern: Interner) -> Any:
    """Normalise ``value`` (see the module docstring)."""
    if isinstance(value, (bytes, bytearray)):
        return intern(bytes(value))
    if isinstance(value, (list, tuple)):
        return [norm(v, intern) for v in value]
    if isinstance(value, dict):
        return {norm(k, intern): norm(v, intern) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise TypeError(f"cannot encode {type(value).__name__} in an oracle fixture: {value!r}")


def _list_delta(prev: list, cur: list):
    changed = [[i, v] for i, (p, v) in enumerate(zip(prev, cur)) if p != v]
    return ["~", changed] if 2 * len(changed) < len(cur) else cur


def _dict_delta(prev: dict, cur: dict):
    changed = {k: v for k, v in cur.items() if k not in prev or prev[k] != v}
    removed = [k for k in prev if k not in cur]
    return ["{", changed, removed] if len(changed) + len(removed) < len(cur) else cur


def encode_state_delta(prev: dict, cur: dict) -> dict:
    """The keys of ``cur`` that differ from ``prev``, each as compactly as possible."""
    out = {}
    for key, val in cur.items():
        if key in prev and prev[key] == val:
            continue
        old = prev.get(key)
        if isinstance(val, list) and isinstance(old, list) and len(old) == len(val) and val:
            out[key] = _list_delta(old, val)
        elif isinstance(val, dict) and isinstance(old, dict) and val:
            out[key] = _dict_delta(old, val)
        else:
            out[key] = val
    return out


def apply_state_delta(prev: dict, delta: dict) -> dict:
    """Inverse of ``encode_state_delta``: the full state after ``delta``."""
    state = dict(prev)
    for key, val in delta.items():
        if isinstance(val, list) and val and val[0] == "~":
            patched = list(prev[key])
            for i, v in val[1]:
                patched[i] = v
            state[key] = patched
        elif isinstance(val, list) and val and val[0] == "{":
            patched = dict(prev[key])
            patched.update(val[1])
            for k in val[2]:
                del patched[k]
            state[key] = patched
        else:
            state[key] = val
    return state
