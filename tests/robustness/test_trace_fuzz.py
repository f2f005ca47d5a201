"""Fuzzed trace files: load_trace either refuses with TraceFormatError or gives a Trace whose
every view works (replay may only fail with ReplayError); never any other exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_campaign_trace as tr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlab.trace import ReplayError, TraceFormatError, load_trace
from kvlab.trace.fileformat import _EXPECTED


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    path, _ = tr.build_good(tmp_path_factory.mktemp("fuzz"))
    return tr._read(path)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=4)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=6,
)  # fmt: skip
HEADER_FIELDS = ["num_events", "config", "call_names", "requests", "checkpoint_interval",
                 "initial_state", "arrays", "format_version"]  # fmt: skip
INIT_FIELDS = ["num_blocks", "num_groups", "null_block_id"]


def _use(trace: Any) -> None:
    """Every read-only view a viewer or the CLI uses."""
    str(trace)
    for i in range(len(trace)):
        str(trace[i])
    for call in trace.calls():
        str(call)
    trace.call_tree()
    try:
        trace.check_replay()
        trace.final_state()
    except ReplayError:
        pass


def _attempt(tmp_path: Path, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    path = tmp_path / "fuzzed.kvtrace"
    tr._write(path, header, arrays)
    try:
        trace = load_trace(path)
    except TraceFormatError:
        return
    _use(trace)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_fuzzed_arrays_load_cleanly_or_fail_with_trace_format_error(
    parts, tmp_path: Path, data: st.DataObject
) -> None:
    header, arrays = json.loads(json.dumps(parts[0])), {k: v.copy() for k, v in parts[1].items()}
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(sorted(n for n in _EXPECTED if arrays[n].size)))
        arr = arrays[name].reshape(-1)
        i = data.draw(st.integers(0, arr.size - 1))
        info = np.iinfo(arr.dtype)
        small = st.integers(max(int(info.min), -3), min(int(info.max), 30))
        arr[i] = data.draw(st.integers(int(info.min), int(info.max)) | small)
    _attempt(tmp_path, header, arrays)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_fuzzed_headers_load_cleanly_or_fail_with_trace_format_error(
    parts, tmp_path: Path, data: st.DataObject
) -> None:
    header, arrays = json.loads(json.dumps(parts[0])), parts[1]
    if data.draw(st.booleans()):
        header[data.draw(st.sampled_from(HEADER_FIELDS))] = data.draw(JSON_VALUES)
    else:
        header["initial_state"][data.draw(st.sampled_from(INIT_FIELDS))] = data.draw(
            JSON_VALUES | st.integers(-2, 40)
        )
    _attempt(tmp_path, header, arrays)
