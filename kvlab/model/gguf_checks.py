"""What kvlab checks in a GGUF file's header before ``gguf.GGUFReader`` parses it.

``GGUFReader`` trusts every count in the file: it loops over a declared array length element by
element, making a numpy view per element, even past the end of the data (a view of nothing).
A 100-byte file declaring an array of 2**62 bytes therefore never finishes, and a modest file
of tiny array elements costs far more memory than its size. ``check_gguf_header`` walks the
same layout first, without building anything, and refuses a file whose counts do not fit the
bytes that follow them or exceed the limits below; a file it accepts costs GGUFReader time and
memory proportional to its size.

Layout (GGUF v2/v3, little- or big-endian)::

    b"GGUF" | u32 version | u64 tensor_count | u64 kv_count
    kv_count x (string key | u32 type | value)        string = u64 length | bytes
    tensor_count x (string name | u32 n_dims | n_dims x u64 | u32 type | u64 offset)

====================  =========  ================================================================
limit                 default    bounds
====================  =========  ================================================================
MAX_METADATA_ITEMS    4194304    array elements over all metadata values (SmolLM2 has 147,204)
MAX_TENSORS           65536      tensor infos (SmolLM2 has 272)
MAX_ARRAY_DEPTH       4          arrays of arrays
====================  =========  ================================================================

Mirrors: gguf-py 0.19.0 gguf/gguf_reader.py (GGUFReader._build_fields, _get_field_parts,
_get_tensor_info_field): the same walk, counting instead of building.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any

__all__ = ["MAX_ARRAY_DEPTH", "MAX_METADATA_ITEMS", "MAX_TENSORS", "check_gguf_header"]

MAX_METADATA_ITEMS = 1 << 22
MAX_TENSORS = 1 << 16
MAX_ARRAY_DEPTH = 4
# NOTE: GGUFValueType -> size in bytes (8 STRING and 9 ARRAY are variable).
_SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


class _Walk:
    def __init__(self, data: Any, order: str) -> None:
        self.data, self.size, self.at, self.items = data, len(data), 0, 0
        self._u32, self._u64 = struct.Struct(f"{order}I"), struct.Struct(f"{order}Q")

    def skip(self, n: int, what: str) -> None:
        if n > self.size - self.at:
            raise ValueError(f"{what} of {n} bytes at byte {self.at}, only "
                             f"{self.size - self.at} left")  # fmt: skip
        self.at += n

    def u32(self, what: str) -> int:
        self.skip(4, what)
        return self._u32.unpack_from(self.data, self.at - 4)[0]

    def u64(self, what: str) -> int:
        self.skip(8, what)
        return self._u64.unpack_from(self.data, self.at - 8)[0]

    def string(self, what: str) -> None:
        self.skip(self.u64(f"{what} length"), what)

    def value(self, vtype: int, what: str, depth: int = 0) -> None:
        if vtype in _SCALAR_SIZE:
            self.skip(_SCALAR_SIZE[vtype], what)
        elif vtype == _STRING:
            self.string(what)
        elif vtype == _ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise ValueError(f"{what}: arrays nested deeper than MAX_ARRAY_DEPTH="
                                 f"{MAX_ARRAY_DEPTH}")  # fmt: skip
            itype, count = self.u32(f"{what} element type"), self.u64(f"{what} length")
            self.items += count
            if self.items > MAX_METADATA_ITEMS:
                raise ValueError(f"{what}: more than MAX_METADATA_ITEMS={MAX_METADATA_ITEMS} "
                                 "array elements in the metadata")  # fmt: skip
            if itype in _SCALAR_SIZE:
                self.skip(count * _SCALAR_SIZE[itype], f"{what} ({count} elements)")
                return
            if count > (self.size - self.at) // 8:  # NOTE: 8 bytes per element at least
                raise ValueError(f"{what}: {count} elements cannot fit the "
                                 f"{self.size - self.at} bytes left")  # fmt: skip
            for _ in range(count):
                self.value(itype, what, depth + 1)
        else:
            raise ValueError(f"{what}: unknown value type {vtype} (known: 0-12)")


def check_gguf_header(path: str | Path) -> None:
    """Walk a GGUF header's counts and lengths without building anything (see the module).

    Raises:
        ValueError: Naming the file, the key or tensor, and the limit or the bytes missing;
            a file that is not GGUF at all is left to GGUFReader's own message.
    """
    with open(path, "rb") as fh:
        if fh.read(4) != b"GGUF" or os.fstat(fh.fileno()).st_size < 24:
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            _walk(data, path)


def _walk(data: Any, path: Any) -> None:
    order = "<" if struct.unpack_from("<I", data, 4)[0] < 0x10000 else ">"
    walk = _Walk(data, order)
    walk.skip(8, "magic and version")
    try:
        num_tensors, num_kv = walk.u64("tensor_count"), walk.u64("kv_count")
        if num_kv > (walk.size - walk.at) // 12:  # NOTE: a key length and a type at least
            raise ValueError(f"kv_count {num_kv} does not fit the {walk.size} bytes of the file")
        for i in range(num_kv):
            walk.string(f"metadata key {i}")
            walk.value(walk.u32(f"metadata {i} type"), f"metadata value {i}")
        if num_tensors > MAX_TENSORS:
            raise ValueError(f"tensor_count {num_tensors} over MAX_TENSORS={MAX_TENSORS}")
        for i in range(num_tensors):
            walk.string(f"tensor {i} name")
            walk.skip(8 * walk.u32(f"tensor {i} n_dims"), f"tensor {i} dims")
            walk.skip(12, f"tensor {i} type and offset")
    except ValueError as exc:
        raise ValueError(f"{path} is not a readable GGUF file: {exc}") from None
