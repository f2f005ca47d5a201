"""vLLM 0.22.1's own KV-cache tests, unmodified, against kvlab (only in the vLLM environment).

Runs ``run_vllm_suite.py`` on the files kvlab passes completely; the full table (every file, on vLLM
and on kvlab) is in docs/explanation/fidelity.md.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = Path(os.environ.get("KVLAB_VLLM_SRC", "/work/vllm-src/src"))


def _skip_reason() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "needs the vLLM environment (vLLM 0.22.1 importable)"
    if not (SRC / "tests" / "v1" / "core").is_dir():
        return f"needs the vLLM environment (vLLM 0.22.1's source tree with tests at KVLAB_VLLM_SRC={SRC})"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))]

# Every file the runner knows: in each, every test that passes on vLLM passes on kvlab
# (kept in step with fidelity.md).
sys.path.insert(0, str(HERE))
from run_vllm_suite import suite_files  # noqa: E402

CLEAN = suite_files(SRC) if _skip_reason() is None else []


@pytest.mark.parametrize("test_file", CLEAN)
def test_vllm_file_passes_on_kvlab(test_file):
    from run_vllm_suite import run_file

    real = run_file(sys.executable, SRC, test_file, False, 480)
    ours = run_file(sys.executable, SRC, test_file, True, 480)
    assert real and ours
    lost = sorted(k for k, v in real.items() if v == "PASSED" and ours.get(k) != "PASSED")
    assert lost == []
