"""vLLM 0.22.1's recorded decisions, shipped inside the package (``kvlab/labs/data``).

``tests/labs/record_lab_fixtures.py`` runs the labs' workloads through the real vLLM 0.22.1 (in
the oracle environment) and writes one file per kind of scenario; a pip-installed kvlab grades
against them with no vLLM. A file is gzip-compressed CBOR::

    {"format": 1, "vllm": "0.22.1", "kind": "manager", "recordings": [
        {"config": {...}, "source": "vLLM 0.22.1", "initial": {state},
         "steps": [[op, args, want, changed state fields], ...]}, ...]}

Block hashes (32-byte values that repeat often) are stored once per recording and referenced
by CBOR tag 40000 + index; a step stores only the state fields that changed since the step
before (the full state is rebuilt on loading).

Examples:
    >>> recs = load_recordings("queue")          # doctest: +SKIP
    >>> recs[0].source
    'vLLM 0.22.1'
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources
from typing import Any

import cbor2

from kvlab.labs.workloads import Recording, Step

__all__ = ["FORMAT", "KINDS", "decode_recordings", "encode_recordings", "load_recordings"]

FORMAT = 1
KINDS = ("manager", "queue", "hash")
"""The recorded kinds: manager-level workloads, free-queue operations, block hashes."""
_HASH_TAG = 40000


def _intern(value: Any, table: dict[bytes, int]) -> Any:
    if isinstance(value, (bytes, bytearray)):
        idx = table.setdefault(bytes(value), len(table))
        return cbor2.CBORTag(_HASH_TAG, idx)
    if isinstance(value, (list, tuple)):
        return [_intern(v, table) for v in value]
    if isinstance(value, dict):
        # CBOR keys may be bytes (cached-map keys): keep them as keys, interned.
        return {(_intern(k, table) if isinstance(k, bytes) else k): _intern(v, table) for k, v in value.items()}
    return value


def _delta(prev: dict, cur: dict) -> dict:
    return {k: v for k, v in cur.items() if k not in prev or prev[k] != v}


def encode_recordings(kind: str, recordings: list[Recording], vllm_version: str) -> bytes:
    """The gzip-compressed CBOR document of ``recordings`` (deterministic bytes)."""
    docs = []
    for rec in recordings:
        table: dict[bytes, int] = {}
        steps, prev = [], rec.initial
        for st in rec.steps:
            steps.append([st.op, _intern(st.args, table), _intern(st.want, table),
                          _intern(_delta(prev, st.state), table)])  # fmt: skip
            prev = st.state
        initial = _intern(rec.initial, table)
        hashes = [h for h, _ in sorted(table.items(), key=lambda kv: kv[1])]
        docs.append({"config": rec.config, "source": rec.source, "hashes": hashes,
                     "initial": initial, "steps": steps})  # fmt: skip
    doc = {"format": FORMAT, "vllm": vllm_version, "kind": kind, "recordings": docs}
    return gzip.compress(cbor2.dumps(doc, canonical=False), compresslevel=9, mtime=0)


def decode_recordings(data: bytes) -> tuple[dict, list[Recording]]:
    """Inverse of :func:`encode_recordings`: ``(header, recordings)``.

    Raises:
        ValueError: If the document's format is not :data:`FORMAT`.
    """
    doc = cbor2.loads(gzip.decompress(data))
    if doc.get("format") != FORMAT:
        raise ValueError(f"lab fixture format {doc.get('format')!r}; this kvlab reads {FORMAT}")
    out = []
    for d in doc["recordings"]:
        hashes = d["hashes"]

        def unintern(value: Any, hashes: list[bytes] = hashes) -> Any:
            if isinstance(value, cbor2.CBORTag) and value.tag == _HASH_TAG:
                return hashes[value.value]
            if isinstance(value, list):
                return [unintern(v) for v in value]
            if isinstance(value, dict):
                return {unintern(k): unintern(v) for k, v in value.items()}
            return value

        state = unintern(d["initial"])
        rec = Recording(doc["kind"], d["config"], source=d["source"], initial=state)
        for op, args, want, delta in d["steps"]:
            state = {**state, **unintern(delta)}
            rec.steps.append(Step(op, unintern(args), unintern(want), state))
        out.append(rec)
    header = {k: v for k, v in doc.items() if k != "recordings"}
    return header, out


@functools.cache
def load_recordings(kind: str) -> tuple[Recording, ...]:
    """The shipped vLLM 0.22.1 recordings of ``kind`` (see :data:`KINDS`).

    Raises:
        ValueError: For an unknown kind.
        FileNotFoundError: If the package was installed without its data files.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown fixture kind {kind!r}; allowed: {', '.join(KINDS)}")
    data = resources.files("kvlab.labs").joinpath("data", f"{kind}.cbor.gz").read_bytes()
    return tuple(decode_recordings(data)[1])
