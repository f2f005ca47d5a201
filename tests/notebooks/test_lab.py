"""kvlab.lab: the classroom-mode JupyterLab command, checked without and with a real server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

for _name in ("jupyterlab", "ipywidgets", "anywidget", "ipykernel"):
    pytest.importorskip(_name, reason="kvlab lab needs the lab extra: pip install 'kvlab[lab]'")

from kvlab.lab import LAB_EXTENSIONS, find_notebook_dir, lab_command

REPO = Path(__file__).resolve().parents[2]


class _Exited:
    """A stand-in for JupyterLab's process that has already exited with ``code``."""

    def __init__(self, calls: list, code: int):
        self.calls, self.code, self.pid, self.returncode = calls, code, -1, code

    def __call__(self, cmd, **kwargs):
        self.calls.append((cmd, kwargs))
        return self

    def poll(self) -> int:
        return self.code

    def wait(self, timeout=None) -> int:
        return self.code


def test_finds_the_course_notebooks_in_a_checkout() -> None:
    assert find_notebook_dir(REPO) == REPO / "notebooks"
    assert find_notebook_dir(REPO / "notebooks") == REPO / "notebooks"


def test_prefers_notebooks_under_the_given_folder(tmp_path: Path) -> None:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_mine.ipynb").write_text("{}")
    assert find_notebook_dir(tmp_path) == (tmp_path / "notebooks").resolve()


def test_falls_back_to_the_checkout_next_to_the_package(tmp_path: Path) -> None:
    assert find_notebook_dir(tmp_path) == REPO / "notebooks"


def test_command_opens_jupyterlab_on_the_folder() -> None:
    cmd = lab_command(REPO / "notebooks", port=8899)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={REPO / 'notebooks'}" in cmd
    assert "--ServerApp.port=8899" in cmd and "--ServerApp.port_retries=0" in cmd
    assert not any(a.startswith("--ServerApp.port=") for a in lab_command(REPO / "notebooks"))


@pytest.mark.parametrize("port", [0, 65536, -1, "8888", 8888.0, True])
def test_rejects_a_bad_port(port: object) -> None:
    with pytest.raises(ValueError, match="port must be an int in 1-65535"):
        lab_command(REPO / "notebooks", port=port)  # type: ignore[arg-type]


def test_extra_options_are_appended_as_given() -> None:
    extra = ["--allow-root", "--no-browser", "--ServerApp.ip=0.0.0.0"]
    cmd = lab_command(REPO / "notebooks", None, extra)
    assert cmd[-3:] == extra


def test_launch_lab_passes_extra_options_to_jupyterlab(monkeypatch) -> None:
    import kvlab.lab as lab_mod

    calls: list = []
    monkeypatch.setattr(lab_mod.subprocess, "Popen", _Exited(calls, 3))
    assert lab_mod.launch_lab(REPO / "notebooks", 8899, ["--allow-root"]) == 3
    ((cmd, kwargs),) = calls
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"] and cmd[-1] == "--allow-root"
    assert "--ServerApp.port=8899" in cmd
    # its own session (Ctrl+C reaches kvlab, which stops it), and the news notification off
    assert kwargs["start_new_session"] is True
    assert kwargs["env"]["JUPYTER_CONFIG_PATH"].split(os.pathsep)[-1] == str(lab_mod.LAB_CONFIG_DIR)
    overrides = lab_mod.LAB_CONFIG_DIR / "labconfig" / "default_setting_overrides.json"
    news = json.loads(overrides.read_text())["@jupyterlab/apputils-extension:notification"]
    assert news["fetchNews"] == "false"


def test_the_lab_command_takes_allow_root_and_passes_unknown_options(monkeypatch) -> None:
    from click.testing import CliRunner

    import kvlab.lab as lab_mod
    from kvlab.cli import main

    calls: list = []
    monkeypatch.setattr(lab_mod.subprocess, "Popen", _Exited(calls, 0))
    out = CliRunner().invoke(main, ["lab", "--notebooks", str(REPO / "notebooks"), "--allow-root",
                                    "--no-browser", "--LabApp.default_url=/lab/tree/01.ipynb"])
    assert out.exit_code == 0, out.output
    ((cmd, _kwargs),) = calls
    assert cmd[-3:] == ["--allow-root", "--no-browser", "--LabApp.default_url=/lab/tree/01.ipynb"]
    help_text = CliRunner().invoke(main, ["lab", "--help"]).output
    assert "--allow-root" in help_text and "passed to JupyterLab" in help_text


def test_rejects_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        lab_command(tmp_path / "nowhere")


def test_the_widget_extensions_are_installed() -> None:
    from jupyter_core.paths import jupyter_path

    roots = [Path(p) for p in jupyter_path("labextensions")]
    for ext in LAB_EXTENSIONS:
        assert any((r / ext / "package.json").is_file() for r in roots), ext


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_jupyterlab_serves_the_notebooks(tmp_path: Path) -> None:
    """`kvlab lab --allow-root` with pass-through options starts a real JupyterLab (also as root,
    the case of many course containers)."""
    port = _free_port()
    extra = [
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        "--IdentityProvider.token=",
        f"--ServerApp.runtime_dir={tmp_path}",
    ]
    server = subprocess.Popen(
        [sys.executable, "-m", "kvlab.cli", "lab", "--notebooks", str(REPO / "notebooks"),
         "--port", str(port), "--allow-root", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, listing = time.monotonic() + 60, None
        while time.monotonic() < deadline and listing is None:
            try:
                listing = _get_json(f"http://127.0.0.1:{port}/api/contents/")
            except OSError:
                time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within 60 s"
        names = sorted(item["name"] for item in listing["content"])  # type: ignore[index]
        assert [n for n in names if n.endswith(".ipynb")] == sorted(
            p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")
        )
        extensions = _get_json(f"http://127.0.0.1:{port}/lab/api/extensions")
        found = {e["name"] for e in extensions if e["enabled"]}  # type: ignore[union-attr]
        # The lab API lists "@scope/name" as "scope-name".
        assert {x.lstrip("@").replace("/", "-") for x in LAB_EXTENSIONS} <= found
    finally:
        server.send_signal(signal.SIGTERM)  # kvlab stops the JupyterLab it started
        assert server.wait(timeout=30) == 0
