"""`kvlab lab` for real: it starts JupyterLab with the news notification off, and a stop signal
(SIGTERM from a process manager, SIGINT from Ctrl+C) stops what it started: JupyterLab and its
kernel end, the port closes, and kvlab exits 0."""

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

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _tree(pid: int) -> dict[psutil.Process, str]:
    """The processes below ``pid`` and their command lines (short-lived ones skipped)."""
    found = {}
    for p in psutil.Process(pid).children(recursive=True):
        try:
            found[p] = " ".join(p.cmdline())
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_stops_jupyterlab_and_its_kernel(tmp_path: Path, signum: int) -> None:
    dirs = {n: tmp_path / n for n in ("cfg", "data", "rt", "ipython", "settings", "ws", "nb")}
    for d in dirs.values():
        d.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "JUPYTER_CONFIG_DIR": str(dirs["cfg"]), "JUPYTER_DATA_DIR": str(dirs["data"]),
           "JUPYTER_RUNTIME_DIR": str(dirs["rt"]), "IPYTHONDIR": str(dirs["ipython"]),
           "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]),
           "JUPYTERLAB_WORKSPACES_DIR": str(dirs["ws"])}  # fmt: skip
    port = _free_port()
    log = tmp_path / "lab.log"
    cmd = [sys.executable, "-m", "kvlab.cli", "lab", "--notebooks", str(dirs["nb"]), "--port",
           str(port), "--no-browser", "--ip=127.0.0.1", "--IdentityProvider.token=",
           "--allow-root", "--ServerApp.disable_check_xsrf=True"]  # fmt: skip
    with log.open("wb") as out:
        kvlab = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    started: list[psutil.Process] = []
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while not _port_open(port):
            assert kvlab.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        _get(f"{base}/api/status")
        # news off by default (the toast would cover the notebook on a projector)
        news = _get(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification")
        assert news["schema"]["properties"]["fetchNews"]["default"] == "false"
        kernel = urllib.request.Request(f"{base}/api/kernels", data=b'{"name": "python3"}',
                                        method="POST",
                                        headers={"Content-Type": "application/json"})  # fmt: skip
        urllib.request.urlopen(kernel, timeout=30).close()
        while not any("ipykernel" in line for line in _tree(kvlab.pid).values()):
            assert time.monotonic() < deadline, _tree(kvlab.pid)
            time.sleep(0.2)
        started = list(_tree(kvlab.pid))  # JupyterLab and its kernel

        kvlab.send_signal(signum)
        assert kvlab.wait(timeout=60) == 0, log.read_text()[-3000:]
        assert not _port_open(port)
        gone, alive = psutil.wait_procs(started, timeout=5)
        assert alive == [], [p.cmdline() for p in alive]
        assert "kvlab lab: stopping JupyterLab and its kernels" in log.read_text()
    finally:  # NOTE: a failed test must not leave a server behind either
        left = [*started, *_tree(kvlab.pid)] if kvlab.poll() is None else started
        for p in [*left, psutil.Process(kvlab.pid)] if kvlab.poll() is None else left:
            try:
                p.kill()
            except psutil.Error:
                pass
