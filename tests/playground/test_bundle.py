"""The Python the page unpacks runs on its own: no numpy, no compiled packages, same answers.

``kvlab-playground.zip`` is extracted and imported by a separate CPython started without
site-packages (``-I -S``), with numpy, xxhash and compiled cbor2 blocked, as in Pyodide. Its
``run_json`` must answer every preset exactly as the installed kvlab does (the presets ask all
six predict kinds), importing from kvlab.viz only the numpy-free predict questions.
"""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from kvlab.playground import PRESETS
from kvlab.playground.browser import run_json
from kvlab.playground.build import BROWSER_MODULES, python_bundle

_CHILD = r"""
import json, sys
for name in ("numpy", "xxhash", "_cbor2", "kvlab.trace.recorder", "kvlab.viz.predict"):
    sys.modules[name] = None  # as in Pyodide: importing them fails
sys.path.insert(0, sys.argv[1])
from kvlab.playground.browser import run_json
import cbor2, kvlab
scenarios = json.loads(sys.stdin.read())
out = {name: run_json(json.dumps(s), "zh") for name, s in scenarios.items()}
ours = sorted(m for m, v in sys.modules.items() if v and m.split(".")[0] in ("kvlab", "cbor2"))
print(json.dumps({"answers": out, "kvlab": kvlab.__file__, "cbor2": cbor2.__file__,
                  "modules": ours}))
"""


def test_the_bundle_runs_alone_and_answers_like_kvlab(tmp_path: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(python_bundle())) as z:
        z.extractall(tmp_path)
    scenarios = {name: p.scenario for name, p in PRESETS.items()}
    scenarios["sha256_cbor"] = {**PRESETS["nb03"].scenario, "hash": "sha256_cbor"}
    scenarios["bad"] = {"block_size": 0}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _CHILD, str(tmp_path)],
        input=json.dumps(scenarios),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout)
    assert child["kvlab"] == str(tmp_path / "kvlab" / "__init__.py")
    assert child["cbor2"] == str(tmp_path / "cbor2" / "__init__.py")
    for name, s in scenarios.items():
        assert json.loads(child["answers"][name]) == json.loads(run_json(json.dumps(s), "zh")), name
    assert (
        json.loads(child["answers"]["bad"])["error"] == "block_size must be a positive int, got 0"
    )
    assert "kvlab.core.sched.scheduler" in child["modules"]
    # kvlab.viz: only the numpy-free predict questions, shared with the notebooks' player
    assert [m for m in child["modules"] if m.startswith("kvlab.viz")] == [
        "kvlab.viz",
        "kvlab.viz.predict_cache_questions",
        "kvlab.viz.predict_common",
        "kvlab.viz.predict_questions",
    ]


def test_the_bundle_holds_only_numpy_free_python() -> None:
    with zipfile.ZipFile(io.BytesIO(python_bundle())) as z:
        names = z.namelist()
        for name in names:
            assert name.startswith(("kvlab/", "cbor2/")), name
            if name.endswith(".py"):
                tree = ast.parse(z.read(name))
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        mods = (
                            [a.name for a in node.names]
                            if isinstance(node, ast.Import)
                            else [node.module or ""]
                        )
                        assert not any(m.split(".")[0] == "numpy" for m in mods), (name, mods)
    assert "kvlab/locale/zh/LC_MESSAGES/kvlab.mo" in names
    assert "cbor2/LICENSE.txt" in names
    assert not any(n.endswith((".so", ".pyc")) for n in names)
    assert len(BROWSER_MODULES) == len(set(BROWSER_MODULES))


def test_the_bundle_is_reproducible() -> None:
    assert python_bundle() == python_bundle()
