"""A numpy array with optional torch mirrors: the worker's host/device double buffer.

Mirrors: vllm/v1/utils.py::CpuGpuBuffer. vLLM always allocates a (pinned) CPU torch tensor,
a device tensor and a numpy view of the CPU tensor. kvlab makes torch optional: with
``device=None`` the buffer is numpy only, so ``kvlab.worker`` imports and runs on a machine
without torch. With a device, ``.cpu`` shares memory with ``.np`` (writes through either are
seen by both) and ``.gpu`` is a separate tensor on ``device`` that ``copy_to_gpu`` refreshes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CpuGpuBuffer", "torch_available"]


def torch_available() -> bool:
    """Whether torch can be imported here (the mirrors need it; the numpy path does not)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError(
            "a torch mirror was requested (device is not None) but torch is not installed; "
            "pass device=None for a numpy-only buffer or install kvlab[model]"
        ) from exc
    return torch


class CpuGpuBuffer:
    """A zero-initialised numpy array, optionally mirrored by a CPU and a device torch tensor.

    Mirrors: vllm/v1/utils.py::CpuGpuBuffer (differs: torch is optional; without a device
    ``cpu`` and ``gpu`` are None and ``copy_to_gpu`` does nothing).

    Examples:
        >>> buf = CpuGpuBuffer(2, 3, dtype=np.int32)
        >>> buf.np[1, 2] = 7
        >>> buf.np.tolist()
        [[0, 0, 0], [0, 0, 7]]

    Args:
        *size: The shape, e.g. ``(max_num_reqs, max_num_blocks_per_req)``.
        dtype: A numpy integer dtype (np.int32 for block ids, np.int64 for slots).
        device: None for numpy only, else a torch device ("cpu", "cuda", torch.device).
        pin_memory: Pin the CPU tensor (only honoured when CUDA is available).

    Raises:
        ValueError: If a dimension is negative.
        ImportError: If a device is given but torch is not installed.
    """

    def __init__(
        self,
        *size: int,
        dtype: type[np.integer] | np.dtype,
        device: Any = None,
        pin_memory: bool = False,
    ) -> None:
        if any(int(s) < 0 for s in size):
            raise ValueError(f"buffer dimensions must be >= 0, got {size}")
        self.device = device
        self.cpu: Any = None
        self.gpu: Any = None
        if device is None:
            self.np: np.ndarray = np.zeros(size, dtype=dtype)
            return
        torch = _import_torch()
        torch_dtype = torch.from_numpy(np.zeros(0, dtype=dtype)).dtype
        pin = bool(pin_memory) and torch.cuda.is_available()
        # NOTE: the CPU tensor is made first and numpy views it (as vLLM does), so pinning
        # never breaks the sharing between .np and .cpu.
        self.cpu = torch.zeros(*size, dtype=torch_dtype, device="cpu", pin_memory=pin)
        self.gpu = torch.zeros_like(self.cpu, device=device)
        self.np = self.cpu.numpy()

    @property
    def has_torch(self) -> bool:
        """True when the torch mirrors exist (a device was given)."""
        return self.gpu is not None

    def copy_to_gpu(self, n: int | None = None) -> Any:
        """Copy the first ``n`` rows (all when None) from ``cpu`` to ``gpu``.

        Mirrors: vllm/v1/utils.py::CpuGpuBuffer.copy_to_gpu.

        Args:
            n: Number of leading rows to copy (rows of the first dimension).

        Returns:
            The device tensor slice that was written, or None for a numpy-only buffer.

        Raises:
            ValueError: If ``n`` is negative or larger than the first dimension.
        """
        if n is not None and not 0 <= n <= self.np.shape[0]:
            raise ValueError(f"n must be in [0, {self.np.shape[0]}], got {n}")
        if self.gpu is None:
            return None
        if n is None:
            return self.gpu.copy_(self.cpu, non_blocking=True)
        return self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)

    def copy_to_cpu(self, n: int | None = None) -> Any:
        """Copy the first ``n`` rows (all when None) from ``gpu`` back to ``cpu`` (and so ``np``).

        Mirrors: vllm/v1/utils.py::CpuGpuBuffer.copy_to_cpu. Non-blocking on CUDA: synchronise
        before reading ``np``.

        Args:
            n: Number of leading rows to copy.

        Returns:
            The CPU tensor slice that was written, or None for a numpy-only buffer.

        Raises:
            ValueError: If ``n`` is negative or larger than the first dimension.
        """
        if n is not None and not 0 <= n <= self.np.shape[0]:
            raise ValueError(f"n must be in [0, {self.np.shape[0]}], got {n}")
        if self.gpu is None:
            return None
        if n is None:
            return self.cpu.copy_(self.gpu, non_blocking=True)
        return self.cpu[:n].copy_(self.gpu[:n], non_blocking=True)

    def __eq__(self, other: object) -> bool:
        """Equal contents: same ``np`` array (shape, dtype, values) and equal device tensors.

        vLLM's tests compare two batches attribute by attribute (``a == b``, or ``np.allclose``
        for vLLM's own CpuGpuBuffer); value equality lets them compare kvlab's buffers too.
        Buffers are mutable, so they are not hashable.
        """
        if not isinstance(other, CpuGpuBuffer):
            return NotImplemented
        a, b = self.np, other.np
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b):
            return False
        if self.gpu is None or other.gpu is None:
            return self.gpu is None and other.gpu is None
        return bool((self.gpu.shape == other.gpu.shape) and (self.gpu == other.gpu).all())

    __hash__ = None  # type: ignore[assignment]
