"""Classroom mode: JupyterLab on the course notebooks, with the widget extensions they need.

``kvlab lab`` calls :func:`launch_lab`. The notebooks (``notebooks/NN_*.ipynb``) live in the
repository, not in the installed package: by default the folder is ``./notebooks`` when the
current directory is a checkout, else the checkout the package was installed from in editable
mode (``pip install -e .``).

JupyterLab starts with its news notification off (a toast asking whether to fetch "official
Jupyter news" would cover the notebook on a projector, and fetching asks the network): kvlab adds
``kvlab/static/jupyter`` to ``JUPYTER_CONFIG_PATH``, whose ``labconfig/
default_setting_overrides.json`` changes the default; a user's own setting still wins.
Stopping ``kvlab lab`` (Ctrl+C, or SIGTERM/SIGHUP from a process manager) stops what it started:
the signal is passed on to JupyterLab as SIGTERM, which shuts its kernels down and closes the
port; kvlab waits for that (and ends any process left after STOP_TIMEOUT_S), then exits.

Examples:
    >>> lab_command("notebooks", port=8899)[1:4]              # doctest: +SKIP
    ['-m', 'jupyterlab', '--ServerApp.root_dir=/home/me/kvlab/notebooks']
    >>> launch_lab()                                          # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
from os import PathLike
from pathlib import Path
from typing import Any

from kvlab.cli_hints import install_hint

__all__ = ["LAB_EXTENSIONS", "LAB_CONFIG_DIR", "STOP_TIMEOUT_S", "find_notebook_dir",
           "lab_command", "lab_environment", "launch_lab"]

LAB_CONFIG_DIR = Path(__file__).resolve().parent / "static" / "jupyter"
"""A Jupyter config folder whose labconfig turns JupyterLab's news notification off."""

STOP_TIMEOUT_S = 20.0
"""Seconds JupyterLab gets to shut its kernels down after a stop signal before kvlab ends
what is left of it."""

LAB_EXTENSIONS = ("@jupyter-widgets/jupyterlab-manager", "anywidget")
"""JupyterLab extensions the notebooks' widgets need (from ipywidgets and anywidget)."""

_LAB_PACKAGES = {
    "jupyterlab": "jupyterlab",
    "ipywidgets": "ipywidgets",
    "anywidget": "anywidget",
    "ipykernel": "ipykernel",
}


def _has_notebooks(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("[0-9][0-9]_*.ipynb"))


def find_notebook_dir(start: str | PathLike[str] | None = None) -> Path:
    """The folder holding the course notebooks.

    Args:
        start: Folder to look in first (default: the current directory); its ``notebooks``
            subfolder, then the folder itself, then the checkout next to the kvlab package.

    Returns:
        The absolute folder path.

    Raises:
        FileNotFoundError: No candidate holds ``NN_*.ipynb`` notebooks.
    """
    here = Path.cwd() if start is None else Path(start).expanduser()
    checkout = Path(__file__).resolve().parents[1] / "notebooks"
    candidates = [here / "notebooks", here, checkout]
    for folder in candidates:
        if _has_notebooks(folder):
            return folder.resolve()
    raise FileNotFoundError(
        "no course notebooks (NN_*.ipynb) found in "
        + ", ".join(str(c) for c in candidates)
        + ": run this in a kvlab checkout, or name the folder of the notebooks"
    )


def _missing_packages() -> list[str]:
    return [pip for mod, pip in _LAB_PACKAGES.items() if importlib.util.find_spec(mod) is None]


def _missing_extensions() -> list[str]:
    from jupyter_core.paths import jupyter_path

    roots = [Path(p) for p in jupyter_path("labextensions")]
    return [
        ext
        for ext in LAB_EXTENSIONS
        if not any((r / ext / "package.json").is_file() for r in roots)
    ]


def lab_command(
    notebook_dir: str | PathLike[str] | None = None,
    port: int | None = None,
    extra_args: list[str] | None = None,
) -> list[str]:
    """The command that starts JupyterLab on the notebooks (checked, not run).

    Args:
        notebook_dir: Folder to open; default :func:`find_notebook_dir`.
        port: TCP port (1-65535); None lets Jupyter choose (8888 or the next free one).
        extra_args: More JupyterLab options, appended as given.

    Returns:
        ``[python, "-m", "jupyterlab", "--ServerApp.root_dir=...", ...]``.

    Raises:
        FileNotFoundError: ``notebook_dir`` does not exist or no notebooks are found.
        ValueError: ``port`` is not an int in 1-65535.
        ImportError: JupyterLab, ipywidgets, anywidget or ipykernel is not installed.
        RuntimeError: A widget extension the notebooks need is not installed in JupyterLab.
    """
    if port is not None and (
        isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535
    ):
        raise ValueError(f"port must be an int in 1-65535 (or None), got {port!r}")
    if notebook_dir is None:
        folder = find_notebook_dir()
    else:
        folder = Path(notebook_dir).expanduser().resolve()
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder")
    missing = _missing_packages()
    if missing:
        raise ImportError(
            f"kvlab lab needs {', '.join(missing)} (the lab extra), which is not installed: "
            f"{install_hint('lab')}"
        )
    missing = _missing_extensions()
    if missing:
        raise RuntimeError(
            f"JupyterLab lacks the extension(s) {', '.join(missing)}: reinstall "
            f"ipywidgets and anywidget in this environment ({install_hint('lab')})"
        )
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}"]
    if port is not None:
        cmd += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    return cmd + list(extra_args or [])


def lab_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment JupyterLab runs in: ``environ`` (default: this process's) with
    LAB_CONFIG_DIR last on ``JUPYTER_CONFIG_PATH`` (the user's own config folders win)."""
    env = dict(os.environ if environ is None else environ)
    paths = [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([*paths, str(LAB_CONFIG_DIR)])
    return env


def _descendants(pid: int) -> list[Any]:
    """The processes below ``pid`` (kernels run in sessions of their own, still its children)."""
    try:
        import psutil  # NOTE: ipykernel's dependency, so there with the lab extra
    except ImportError:
        return []
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _stop(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM JupyterLab, wait ``timeout_s``, then end whatever it left (kernels included)."""
    if proc.poll() is not None:
        return  # NOTE: it ended by itself (its kernels end with it: they watch their parent)
    left = _descendants(proc.pid)
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if left:
        _end(left)


def _end(procs: list[Any]) -> None:
    """SIGTERM each of ``procs`` still running, then SIGKILL those alive 3 s later."""
    import psutil

    alive = []
    for p in procs:
        try:
            p.terminate()
            alive.append(p)
        except psutil.Error:  # NOTE: already gone
            pass
    _, still = psutil.wait_procs(alive, timeout=3)
    for p in still:
        try:
            p.kill()
        except psutil.Error:
            pass


def launch_lab(
    notebook_dir: str | PathLike[str] | None = None,
    port: int | None = None,
    extra_args: list[str] | None = None,
) -> int:
    """Start JupyterLab on the course notebooks and wait until it is stopped.

    Ctrl+C, SIGTERM or SIGHUP stop it cleanly: the signal reaches JupyterLab as SIGTERM (it
    shuts its kernels down and frees the port); after STOP_TIMEOUT_S whatever is left of it is
    ended, and a second signal ends it at once. JupyterLab runs in a session of its own, so
    the terminal's Ctrl+C reaches kvlab only (no "Shut down this Jupyter server (y/[n])?"
    prompt). The news notification is off (see the module docstring).

    Args:
        notebook_dir: Folder to open; default :func:`find_notebook_dir`.
        port: TCP port; None lets Jupyter choose.
        extra_args: More JupyterLab options (``--allow-root``, ``--no-browser``, ...).

    Returns:
        JupyterLab's exit status (0 after a clean stop).

    Raises:
        See :func:`lab_command` (nothing is started when a check fails).
    """
    cmd = lab_command(notebook_dir, port, extra_args)
    stopping = threading.Event()
    proc: subprocess.Popen | None = None

    def on_signal(signum: int, frame: Any) -> None:
        if stopping.is_set():  # NOTE: a second Ctrl+C: do not wait for the kernels
            if proc is not None:
                proc.kill()
            return
        stopping.set()
        print("kvlab lab: stopping JupyterLab and its kernels ...", file=sys.stderr, flush=True)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, on_signal)
                    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}  # fmt: skip
    try:
        proc = subprocess.Popen(cmd, env=lab_environment(), start_new_session=True)
        while proc.poll() is None and not stopping.is_set():
            stopping.wait(0.2)
        _stop(proc, STOP_TIMEOUT_S)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc is not None and proc.poll() is None:  # NOTE: an error above: stop it anyway
            _stop(proc, STOP_TIMEOUT_S)
    code = proc.returncode
    return code if code >= 0 else 128 - code  # NOTE: killed by signal N: the shell's 128+N
