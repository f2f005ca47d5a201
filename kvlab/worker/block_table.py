"""The worker-side block table of one KV-cache group, and its slot mapping.

Mirrors: vllm/v1/worker/block_table.py::BlockTable. The scheduler hands the worker block ids
per request; the worker keeps them in a ``[max_num_reqs, max_num_blocks_per_req]`` int32 table
(one row per slot of the persistent batch) that the attention kernel reads, and turns token
positions into cache slots (``slot_mapping``) for the cache write.

Layout (block_size=4, rows 0 and 1 in use)::

    row 0 | 5  8  .  . |  num_blocks_per_row[0] = 2
    row 1 | 2  3 10  . |  num_blocks_per_row[1] = 3
           ^ block ids of positions 0-3, 4-7, 8-11, ...

When the attention kernel needs smaller blocks than the allocator uses (``kernel_block_size``
divides ``block_size``), every allocated block is split into ``block_size // kernel_block_size``
kernel blocks and the table stores kernel block ids (see :func:`map_to_kernel_blocks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kvlab.worker.cpu_gpu_buffer import CpuGpuBuffer
from kvlab.worker.slot_mapping import PAD_SLOT_ID, compute_slot_ids

__all__ = ["BlockTable", "MultiGroupBlockTable", "map_to_kernel_blocks"]


def __getattr__(name: str) -> Any:
    # vLLM defines MultiGroupBlockTable in this module; kvlab keeps it in its own file (which
    # imports this one), so it is served lazily under vLLM's module name.
    if name == "MultiGroupBlockTable":
        from kvlab.worker.multi_group_block_table import MultiGroupBlockTable

        return MultiGroupBlockTable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_INT32_MAX = np.iinfo(np.int32).max


def map_to_kernel_blocks(
    kv_manager_block_ids: np.ndarray,
    blocks_per_kv_block: int,
    kernel_block_arange: np.ndarray | None = None,
) -> np.ndarray:
    """Split allocator block ids into the kernel block ids that cover the same memory.

    Allocator block ``b`` of ``block_size`` tokens is kernel blocks
    ``b * n, ..., b * n + n - 1`` of ``kernel_block_size`` tokens, ``n = blocks_per_kv_block``.

    Mirrors: vllm/v1/worker/block_table.py::BlockTable.map_to_kernel_blocks (a staticmethod
    there, also reachable as ``BlockTable.map_to_kernel_blocks`` here; differs: the arange
    is optional and built when omitted).

    Examples:
        >>> map_to_kernel_blocks(np.array([0, 1, 2]), 2).tolist()
        [0, 1, 2, 3, 4, 5]
        >>> map_to_kernel_blocks(np.array([7, 3]), 4).tolist()
        [28, 29, 30, 31, 12, 13, 14, 15]

    Args:
        kv_manager_block_ids: [num_blocks] allocator block ids.
        blocks_per_kv_block: block_size // kernel_block_size (>= 1).
        kernel_block_arange: [1, blocks_per_kv_block] ``arange`` (a cached copy).

    Returns:
        [num_blocks * blocks_per_kv_block] kernel block ids; the input itself when the
        ratio is 1.

    Raises:
        ValueError: If ``blocks_per_kv_block`` < 1.
    """
    if blocks_per_kv_block < 1:
        raise ValueError(f"blocks_per_kv_block must be >= 1, got {blocks_per_kv_block}")
    if blocks_per_kv_block == 1:
        return kv_manager_block_ids
    if kernel_block_arange is None:
        kernel_block_arange = np.arange(blocks_per_kv_block).reshape(1, -1)
    kernel_block_ids = (
        np.asarray(kv_manager_block_ids).reshape(-1, 1) * blocks_per_kv_block + kernel_block_arange
    )  # (num_blocks, blocks_per_kv_block)
    return kernel_block_ids.reshape(-1)


def _check_sizes(**sizes: Any) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_cp(dcp_world_size: int, dcp_rank: int, pcp_world_size: int, pcp_rank: int) -> None:
    _check_sizes(dcp_world_size=dcp_world_size, pcp_world_size=pcp_world_size)
    if not 0 <= dcp_rank < dcp_world_size or not 0 <= pcp_rank < pcp_world_size:
        raise ValueError(
            f"ranks must be inside their worlds: dcp_rank={dcp_rank} of {dcp_world_size}, "
            f"pcp_rank={pcp_rank} of {pcp_world_size}"
        )


def _kernel_split(block_size: int, kernel_block_size: int) -> tuple[int, int]:
    """(tokens per table entry, kernel blocks per allocator block)."""
    if kernel_block_size == block_size:
        # Allocation and kernel use the same block: ids go in unchanged.
        return block_size, 1
    # e.g. 32-token allocator blocks read by a 16-token kernel: 2 kernel blocks each.
    if block_size % kernel_block_size != 0:
        raise ValueError(
            f"kernel_block_size {kernel_block_size} must divide block_size {block_size} evenly"
        )
    return kernel_block_size, block_size // kernel_block_size


class BlockTable:
    """Block ids per persistent-batch row for one KV-cache group, plus the slot mapping.

    Mirrors: vllm/v1/worker/block_table.py::BlockTable. Differs: numpy first (torch mirrors
    only when ``device`` is given); the DCP/PCP world sizes and ranks are arguments instead
    of being read from process groups; every method checks its input and raises before
    changing anything; ``compute_slot_mapping`` takes per-token ``req_indices`` and runs in
    numpy (vLLM 0.22.1 launches a Triton kernel over ``query_start_loc``).

    Args:
        block_size: Tokens per block of the KV-cache allocator (tokens).
        max_num_reqs: Rows in the table (concurrent requests).
        max_num_blocks_per_req: Allocator blocks one row can hold (blocks).
        max_num_batched_tokens: Length of ``slot_mapping`` (tokens per step).
        pin_memory: Pin the CPU mirror (only with a CUDA device).
        device: None for numpy only, else the torch device of the mirror tensors.
        kernel_block_size: Tokens per block the attention kernel uses; must divide
            ``block_size``. None means ``block_size``.
        cp_kv_cache_interleave_size: Tokens per run dealt to one context-parallel rank.
        dcp_world_size, dcp_rank, pcp_world_size, pcp_rank: Context-parallel layout.

    Raises:
        ValueError: On a non-positive size, a kernel block size that does not divide
            ``block_size``, or a rank outside its world.
    """

    # Reachable as BlockTable.map_to_kernel_blocks, as in vLLM.
    map_to_kernel_blocks = staticmethod(map_to_kernel_blocks)

    def __init__(
        self,
        block_size: int,
        max_num_reqs: int,
        max_num_blocks_per_req: int,
        max_num_batched_tokens: int,
        pin_memory: bool = False,
        device: Any = None,
        kernel_block_size: int | None = None,
        cp_kv_cache_interleave_size: int = 1,
        *,
        dcp_world_size: int = 1,
        dcp_rank: int = 0,
        pcp_world_size: int = 1,
        pcp_rank: int = 0,
    ) -> None:
        kernel_block_size = block_size if kernel_block_size is None else kernel_block_size
        _check_sizes(
            block_size=block_size,
            kernel_block_size=kernel_block_size,
            max_num_reqs=max_num_reqs,
            max_num_blocks_per_req=max_num_blocks_per_req,
            max_num_batched_tokens=max_num_batched_tokens,
            cp_kv_cache_interleave_size=cp_kv_cache_interleave_size,
        )
        _check_cp(dcp_world_size, dcp_rank, pcp_world_size, pcp_rank)
        self.max_num_reqs = max_num_reqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.pin_memory = pin_memory
        self.device = device
        self.block_size, self.blocks_per_kv_block = _kernel_split(block_size, kernel_block_size)
        # Hybrid: allocator blocks are split into several kernel blocks each.
        self.use_hybrid_blocks = self.blocks_per_kv_block > 1
        # NOTE: counted in kernel blocks from here on (allocator blocks * blocks_per_kv_block).
        self.max_num_blocks_per_req = max_num_blocks_per_req * self.blocks_per_kv_block
        self._make_buffers()
        self.dcp_world_size, self.dcp_rank = dcp_world_size, dcp_rank
        self.pcp_world_size, self.pcp_rank = pcp_world_size, pcp_rank
        self.cp_kv_cache_interleave_size = cp_kv_cache_interleave_size

    def _make_buffers(self) -> None:
        # NOTE: only block_table.np[r, :num_blocks_per_row[r]] is meaningful; entries past
        # it may hold stale ids (move_row/add_row do not clear them) and are never read.
        self.block_table = CpuGpuBuffer(
            self.max_num_reqs,
            self.max_num_blocks_per_req,
            dtype=np.int32,
            device=self.device,
            pin_memory=self.pin_memory,
        )
        self.num_blocks_per_row = np.zeros(self.max_num_reqs, dtype=np.int32)
        self.slot_mapping = CpuGpuBuffer(
            self.max_num_batched_tokens,
            dtype=np.int64,
            device=self.device,
            pin_memory=self.pin_memory,
        )
        self._kernel_block_arange = (
            np.arange(self.blocks_per_kv_block).reshape(1, -1) if self.use_hybrid_blocks else None
        )

    # ------------------------------------------------------------------ checks
    def _check_row(self, row_idx: int, what: str = "row_idx") -> int:
        if isinstance(row_idx, bool) or not isinstance(row_idx, (int, np.integer)):
            raise TypeError(f"{what} must be an int, got {type(row_idx).__name__}")
        if not 0 <= row_idx < self.max_num_reqs:
            raise ValueError(f"{what} {row_idx} out of range [0, {self.max_num_reqs})")
        return int(row_idx)

    def _prepare_block_ids(self, block_ids: Sequence[int], row_idx: int, start: int) -> np.ndarray:
        """Validate allocator ids for ``row_idx`` (filled up to ``start``); return kernel ids."""
        arr = np.asarray(block_ids)
        if arr.size == 0:
            return np.zeros(0, dtype=np.int32)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise TypeError(f"block_ids must be a flat sequence of ints, got {block_ids!r}")
        if arr.min() < 0 or (int(arr.max()) + 1) * self.blocks_per_kv_block - 1 > _INT32_MAX:
            raise ValueError(f"block ids must be in [0, int32 max], got {arr.tolist()}")
        kernel_ids = map_to_kernel_blocks(arr, self.blocks_per_kv_block, self._kernel_block_arange)
        if start + kernel_ids.shape[0] > self.max_num_blocks_per_req:
            raise ValueError(
                f"row {row_idx} holds {start} kernel blocks; adding {kernel_ids.shape[0]} "
                f"exceeds max_num_blocks_per_req={self.max_num_blocks_per_req} (kernel blocks)"
            )
        return kernel_ids

    # ------------------------------------------------------------------ row edits
    def append_row(self, block_ids: Sequence[int], row_idx: int) -> None:
        """Append allocator block ids to the end of a row.

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.append_row.

        Args:
            block_ids: [num_new_blocks] allocator block ids (the scheduler's new_block_ids).
            row_idx: Persistent-batch row of the request.

        Raises:
            TypeError: If ids or row are not ints.
            ValueError: If the row is out of range, an id is negative, or the row would
                exceed ``max_num_blocks_per_req``. Nothing changes.
        """
        row_idx = self._check_row(row_idx)
        start = int(self.num_blocks_per_row[row_idx])
        kernel_ids = self._prepare_block_ids(block_ids, row_idx, start)
        self._write(kernel_ids, row_idx, start)

    def _write(self, kernel_ids: np.ndarray, row_idx: int, start: int) -> None:
        num_blocks = kernel_ids.shape[0]
        self.block_table.np[row_idx, start : start + num_blocks] = kernel_ids
        self.num_blocks_per_row[row_idx] = start + num_blocks

    def add_row(self, block_ids: Sequence[int], row_idx: int) -> None:
        """Replace a row's blocks with ``block_ids`` (a new or resumed request).

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.add_row.

        Args:
            block_ids: [num_blocks] allocator block ids.
            row_idx: Persistent-batch row.

        Raises:
            TypeError, ValueError: As :meth:`append_row`; nothing changes.
        """
        row_idx = self._check_row(row_idx)
        kernel_ids = self._prepare_block_ids(block_ids, row_idx, 0)
        self._write(kernel_ids, row_idx, 0)

    def clear_row(self, row_idx: int) -> None:
        """Zero a row's used entries and mark it empty.

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.clear_row.

        Raises:
            TypeError, ValueError: If the row is not an int in range.
        """
        row_idx = self._check_row(row_idx)
        num_blocks = int(self.num_blocks_per_row[row_idx])
        if num_blocks > 0:
            self.block_table.np[row_idx, :num_blocks] = 0
        self.num_blocks_per_row[row_idx] = 0

    def move_row(self, src: int, tgt: int) -> None:
        """Copy row ``src`` onto row ``tgt`` (batch condensing after a request leaves).

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.move_row. ``src`` keeps its
        contents; ``tgt``'s entries past the copied length are left as they were.

        Raises:
            TypeError, ValueError: If a row is not an int in range.
        """
        src, tgt = self._check_row(src, "src"), self._check_row(tgt, "tgt")
        num_blocks = int(self.num_blocks_per_row[src])
        table = self.block_table.np
        table[tgt, :num_blocks] = table[src, :num_blocks]
        self.num_blocks_per_row[tgt] = num_blocks

    def swap_row(self, src: int, tgt: int) -> None:
        """Exchange two whole rows and their lengths (batch reordering).

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.swap_row.

        Raises:
            TypeError, ValueError: If a row is not an int in range.
        """
        src, tgt = self._check_row(src, "src"), self._check_row(tgt, "tgt")
        src_tgt, tgt_src = [src, tgt], [tgt, src]
        self.num_blocks_per_row[src_tgt] = self.num_blocks_per_row[tgt_src]
        self.block_table.np[src_tgt] = self.block_table.np[tgt_src]

    def get_row(self, row_idx: int) -> list[int]:
        """The kernel block ids of a row (its used prefix) as a list. kvlab addition."""
        row_idx = self._check_row(row_idx)
        return self.block_table.np[row_idx, : self.num_blocks_per_row[row_idx]].tolist()

    # ------------------------------------------------------------------ slot mapping
    def compute_slot_mapping(self, req_indices: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Fill ``slot_mapping.np[:num_tokens]`` with each token's cache slot; pad the rest.

        ``slot = block_table[row, pos // block_size] * block_size + pos % block_size``
        (with context parallelism: the virtual-block arithmetic of
        :func:`kvlab.worker.slot_mapping.compute_slot_ids`, non-local tokens get -1).
        Entries ``num_tokens:max_num_batched_tokens`` are set to ``PAD_SLOT_ID`` (-1), as
        vLLM 0.22.1's kernel does for CUDA-graph padding.

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.compute_slot_mapping (differs:
        takes per-token rows instead of ``num_reqs, query_start_loc``; runs in numpy on the
        CPU table, so call :meth:`commit_slot_mapping` to copy the result to the device).

        Args:
            req_indices: [num_tokens] row of each token.
            positions: [num_tokens] position of each token in its request (tokens).

        Returns:
            A view of ``slot_mapping.np[:num_tokens]`` (int64).

        Raises:
            ValueError: On shape mismatch, more than ``max_num_batched_tokens`` tokens, a row
                out of range, a negative position, or a position past the row's blocks.
        """
        req_indices, positions = self._check_tokens(req_indices, positions)
        num_tokens = req_indices.shape[0]
        slots = compute_slot_ids(
            self.block_table.np,
            self.block_size,
            req_indices,
            positions,
            self.total_cp_world_size,
            self.total_cp_rank,
            self.cp_kv_cache_interleave_size,
        )
        out = self.slot_mapping.np
        out[:num_tokens] = slots
        out[num_tokens:] = PAD_SLOT_ID
        return out[:num_tokens]

    def _check_tokens(self, req_indices: Any, positions: Any) -> tuple[np.ndarray, np.ndarray]:
        req_indices = np.asarray(req_indices, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        if req_indices.ndim != 1 or req_indices.shape != positions.shape:
            raise ValueError(
                f"req_indices and positions must be 1-D of equal length, got shapes "
                f"{req_indices.shape} and {positions.shape}"
            )
        if req_indices.shape[0] > self.max_num_batched_tokens:
            raise ValueError(
                f"{req_indices.shape[0]} tokens exceed max_num_batched_tokens="
                f"{self.max_num_batched_tokens}"
            )
        if req_indices.size == 0:
            return req_indices, positions
        if req_indices.min() < 0 or req_indices.max() >= self.max_num_reqs:
            raise ValueError(f"req_indices must be in [0, {self.max_num_reqs})")
        if positions.min() < 0:
            raise ValueError("positions must be >= 0")
        needed = positions // (self.block_size * self.total_cp_world_size)
        have = self.num_blocks_per_row[req_indices]
        bad = np.nonzero(needed >= have)[0]
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"token {i}: position {int(positions[i])} of row {int(req_indices[i])} needs "
                f"block index {int(needed[i])} but the row holds {int(have[i])} blocks"
            )
        return req_indices, positions

    @property
    def total_cp_world_size(self) -> int:
        """pcp_world_size * dcp_world_size."""
        return self.pcp_world_size * self.dcp_world_size

    @property
    def total_cp_rank(self) -> int:
        """pcp_rank * dcp_world_size + dcp_rank."""
        return self.pcp_rank * self.dcp_world_size + self.dcp_rank

    # ------------------------------------------------------------------ device mirrors
    def commit_block_table(self, num_reqs: int) -> None:
        """Copy the first ``num_reqs`` rows to the device mirror (no-op without torch).

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.commit_block_table.

        Raises:
            ValueError: If ``num_reqs`` is outside ``[0, max_num_reqs]``.
        """
        self.block_table.copy_to_gpu(num_reqs)

    def commit_slot_mapping(self, num_tokens: int) -> None:
        """Copy ``slot_mapping[:num_tokens]`` to the device mirror (no-op without torch).

        Mirrors: the pre-0.11 vLLM BlockTable.commit_slot_mapping (0.22.1 computes slots on
        the device instead).

        Raises:
            ValueError: If ``num_tokens`` is outside ``[0, max_num_batched_tokens]``.
        """
        self.slot_mapping.copy_to_gpu(num_tokens)

    def clear(self) -> None:
        """Zero the whole table (host and device) and mark every row empty.

        Mirrors: vllm/v1/worker/block_table.py::BlockTable.clear (differs: also resets
        ``num_blocks_per_row``, which vLLM leaves to the caller).
        """
        self.block_table.np.fill(0)
        if self.block_table.has_torch:
            self.block_table.gpu.fill_(0)
        self.num_blocks_per_row.fill(0)

    def get_device_tensor(self, num_reqs: int) -> Any:
        """The device mirror's first ``num_reqs`` rows (None without a device)."""
        return None if self.block_table.gpu is None else self.block_table.gpu[:num_reqs]

    def get_cpu_tensor(self) -> Any:
        """The CPU torch mirror, sharing memory with the numpy table (None without a device)."""
        return self.block_table.cpu

    def get_numpy_array(self) -> np.ndarray:
        """The numpy table ``[max_num_reqs, max_num_blocks_per_req]`` int32."""
        return self.block_table.np
