"""Intern tables: request ids (str) and block hashes (bytes) stored once, referenced by int index.

A trace never stores a request id or a hash in an event: it stores the index of that value in
one of these tables. ``InternTables`` grows while recording; ``FrozenTables`` is the compact
read-only form a ``Trace`` keeps (all hash bytes in one numpy blob).

Examples:
    >>> t = InternTables()
    >>> t.request_index("req-0"), t.hash_index(b"\\x01" * 32), t.hash_index(b"\\x01" * 32)
    (0, 0, 0)
    >>> f = t.freeze(); f.request_id(0), f.hash_bytes(0)[:2]
    ('req-0', b'\\x01\\x01')
"""

from __future__ import annotations

import numpy as np

__all__ = ["GROUP_BITS", "FrozenTables", "InternTables", "key_code", "split_key_code"]

GROUP_BITS = 16
"""A cached-map key is coded as ``hash_index << GROUP_BITS | kv_cache_group_id``."""

_GROUP_MASK = (1 << GROUP_BITS) - 1


def key_code(hash_index: int, kv_cache_group_id: int) -> int:
    """Code a (hash index, group) pair (a BlockHashWithGroupId) as one int."""
    return (hash_index << GROUP_BITS) | kv_cache_group_id


def split_key_code(code: int) -> tuple[int, int]:
    """Inverse of key_code: ``(hash_index, kv_cache_group_id)``."""
    return code >> GROUP_BITS, code & _GROUP_MASK


class InternTables:
    """Growing tables used while recording (and by ``KVState.from_manager``).

    NOTE: append-only: an index, once handed out, means the same value forever, so a Trace
    taken earlier stays valid while recording goes on.
    """

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.hashes: list[bytes] = []
        self._request_index: dict[str, int] = {}
        self._hash_index: dict[bytes, int] = {}

    def request_index(self, request_id: str) -> int:
        """Index of ``request_id``, added if new."""
        idx = self._request_index.get(request_id)
        if idx is None:
            idx = self._request_index[request_id] = len(self.requests)
            self.requests.append(request_id)
        return idx

    def hash_index(self, block_hash: bytes) -> int:
        """Index of ``block_hash`` (a BlockHash, without group id), added if new."""
        idx = self._hash_index.get(block_hash)
        if idx is None:
            idx = self._hash_index[block_hash] = len(self.hashes)
            self.hashes.append(bytes(block_hash))
        return idx

    def request_id(self, index: int) -> str | None:
        """The request id at ``index`` (None for -1)."""
        return None if index < 0 else self.requests[index]

    def hash_bytes(self, index: int) -> bytes:
        """The BlockHash bytes at ``index``."""
        return self.hashes[index]

    def find_hash(self, block_hash: bytes) -> int:
        """Index of ``block_hash`` or -1 when it never occurred."""
        return self._hash_index.get(block_hash, -1)

    def freeze(self) -> FrozenTables:
        """A compact read-only copy (O(number of entries), C-speed joins)."""
        lengths = np.fromiter(map(len, self.hashes), dtype=np.int64, count=len(self.hashes))
        offsets = np.zeros(len(self.hashes) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        blob = np.frombuffer(b"".join(self.hashes), dtype=np.uint8).copy()
        return FrozenTables(list(self.requests), blob, offsets)


class FrozenTables:
    """Read-only tables of a Trace: request ids as a list, hashes as one uint8 blob.

    Args:
        requests: Request ids; index i is request index i.
        hash_blob: uint8 [total_hash_bytes], all hashes concatenated.
        hash_offsets: int64 [num_hashes + 1], hash i is ``hash_blob[off[i]:off[i+1]]``.

    Raises:
        ValueError: If the offsets do not describe the blob (non-monotonic or out of range).
    """

    def __init__(
        self, requests: list[str], hash_blob: np.ndarray, hash_offsets: np.ndarray
    ) -> None:
        hash_offsets = np.asarray(hash_offsets, dtype=np.int64)
        if hash_offsets.ndim != 1 or len(hash_offsets) == 0 or hash_offsets[0] != 0:
            raise ValueError("hash_offsets must be a 1-D int64 array starting at 0")
        if np.any(np.diff(hash_offsets) < 0) or hash_offsets[-1] != len(hash_blob):
            raise ValueError(
                f"hash_offsets must be non-decreasing and end at len(hash_blob)={len(hash_blob)}"
            )
        self.requests = requests
        self.hash_blob = np.asarray(hash_blob, dtype=np.uint8)
        self.hash_offsets = hash_offsets
        self._offsets_list: list[int] | None = None
        self._reverse: dict[bytes, int] | None = None
        self._request_reverse: dict[str, int] | None = None

    @property
    def num_hashes(self) -> int:
        """Number of distinct hashes."""
        return len(self.hash_offsets) - 1

    def request_id(self, index: int) -> str | None:
        """The request id at ``index`` (None for -1)."""
        return None if index < 0 else self.requests[index]

    def hash_bytes(self, index: int) -> bytes:
        """The BlockHash bytes at ``index``.

        Raises:
            IndexError: If ``index`` is not in [0, num_hashes).
        """
        if not 0 <= index < self.num_hashes:
            raise IndexError(f"hash index {index} out of range [0, {self.num_hashes})")
        if self._offsets_list is None:
            self._offsets_list = self.hash_offsets.tolist()
        off = self._offsets_list
        return self.hash_blob[off[index] : off[index + 1]].tobytes()

    def find_hash(self, block_hash: bytes) -> int:
        """Index of ``block_hash`` or -1 when it never occurred (builds a dict once)."""
        if self._reverse is None:
            self._reverse = {self.hash_bytes(i): i for i in range(self.num_hashes)}
        return self._reverse.get(bytes(block_hash), -1)

    def find_request(self, request_id: str) -> int:
        """Index of ``request_id`` or -1 when it never occurred."""
        if self._request_reverse is None:
            self._request_reverse = {r: i for i, r in enumerate(self.requests)}
        return self._request_reverse.get(request_id, -1)

    @property
    def nbytes(self) -> int:
        """Bytes held: the hash blob and offsets plus the UTF-8 size of the request ids."""
        return int(
            self.hash_blob.nbytes
            + self.hash_offsets.nbytes
            + sum(len(r.encode()) for r in self.requests)
        )
