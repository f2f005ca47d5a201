"""The package's promises: `import kvlab` (core, trace, worker) works without torch, and the
public API is what __all__ says."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

BLOCK_TORCH = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('torch', 'triton', 'ipywidgets', 'anywidget'):\n"
    "            raise ImportError('blocked for this test: ' + name)\n"
    "sys.meta_path.insert(0, _Block())\n"
)


def test_import_without_torch() -> None:
    code = BLOCK_TORCH + (
        "import kvlab, kvlab.core, kvlab.trace, kvlab.worker, kvlab.core.sched\n"
        "assert 'torch' not in sys.modules\n"
        "print(sorted(kvlab.core.__all__)[:3])\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "AllBlocksCleared" in run.stdout


def test_engine_names_need_torch_and_say_so() -> None:
    code = BLOCK_TORCH + "import kvlab\nkvlab.LLM\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode != 0
    assert "blocked for this test: torch" in run.stderr


@pytest.mark.parametrize("module", ["kvlab", "kvlab.core", "kvlab.trace", "kvlab.worker", "kvlab.viz", "kvlab.compare",
                                    "kvlab.core.sched", "kvlab.kernels", "kvlab.model", "kvlab.course"])
def test_all_names_resolve(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []


def test_unknown_attribute() -> None:
    import kvlab

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        kvlab.Nope  # noqa: B018
