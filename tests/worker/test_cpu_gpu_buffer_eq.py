"""CpuGpuBuffer compares by contents (vLLM's batch tests compare buffers with ``==``)."""
from __future__ import annotations

import numpy as np
import pytest

from kvlab.worker.cpu_gpu_buffer import CpuGpuBuffer, torch_available


def test_numpy_buffers_equal_by_shape_dtype_and_values():
    a, b = CpuGpuBuffer(2, 3, dtype=np.int32), CpuGpuBuffer(2, 3, dtype=np.int32)
    assert a == b
    a.np[1, 2] = 7
    assert a != b
    b.np[1, 2] = 7
    assert a == b
    assert CpuGpuBuffer(3, 2, dtype=np.int32) != CpuGpuBuffer(2, 3, dtype=np.int32)
    assert CpuGpuBuffer(2, dtype=np.int32) != CpuGpuBuffer(2, dtype=np.int64)
    assert (a == "not a buffer") is False
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_torch_mirrors_count_in_equality():
    assert torch_available()
    a = CpuGpuBuffer(4, dtype=np.int64, device="cpu")
    b = CpuGpuBuffer(4, dtype=np.int64, device="cpu")
    a.np[:] = [1, 2, 3, 4]
    b.np[:] = [1, 2, 3, 4]
    a.copy_to_gpu()
    assert a != b  # same host contents, b's device tensor is still zeros
    b.copy_to_gpu()
    assert a == b
    b.gpu[0] = 9
    assert a != b
    assert a != CpuGpuBuffer(4, dtype=np.int64)  # one has device tensors, the other not
