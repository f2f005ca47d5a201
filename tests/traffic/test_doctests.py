"""The worked examples in the docstrings of kvlab.traffic run and hold (timed: test_traffic_timed;
peer_policies: below, with libCacheSim)."""

import doctest
import importlib

import pytest

MODULES = ["", ".belady", ".blocks", ".fleet", ".formats", ".hybrid", ".insight", ".lru",
           ".mooncake", ".plot", ".radix", ".report", ".sizing", ".stack", ".sweep",
           ".synthetic"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"kvlab.traffic{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_peer_policies_example():
    pytest.importorskip("libcachesim")  # NOTE: kvlab[policies], in kvlab[all]
    import kvlab.traffic.peer_policies as module

    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
