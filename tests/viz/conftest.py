"""Shared fixtures for the kvlab.viz tests: the small real traces of _viz_traces, built once."""

from __future__ import annotations

import pytest
from _viz_traces import hybrid_trace, shared_prefix_trace

from kvlab.trace import Trace


@pytest.fixture(scope="session")
def shared() -> Trace:
    """One group, 10 blocks: shared prefix, frees, an eviction, a hit out of the free queue."""
    return shared_prefix_trace()


@pytest.fixture(scope="session")
def hybrid() -> Trace:
    """Full attention + sliding window: a shortened fixed point and nulled blocks."""
    return hybrid_trace()
