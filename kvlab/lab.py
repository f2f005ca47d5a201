"""Classroom mode: JupyterLab on the course notebooks, with the widget extensions they need.

``kvlab lab`` calls :func:`launch_lab`. The notebooks (``notebooks/NN_*.ipynb``) live in the
repository, not in the installed package: by default the folder is ``./notebooks`` when the
current directory is a checkout, else the checkout the package was installed from in editable
mode (``pip install -e .``).

Examples:
    >>> lab_command("notebooks", port=8899)[1:4]              # doctest: +SKIP
    ['-m', 'jupyterlab', '--ServerApp.root_dir=/home/me/kvlab/notebooks']
    >>> launch_lab()                                          # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from os import PathLike
from pathlib import Path

__all__ = ["LAB_EXTENSIONS", "find_notebook_dir", "lab_command", "launch_lab"]

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
        + ": run `kvlab lab` in a kvlab checkout, or pass notebook_dir"
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
            raise FileNotFoundError(f"notebook_dir {folder} is not a folder")
    missing = _missing_packages()
    if missing:
        raise ImportError(f"kvlab lab needs {', '.join(missing)}: pip install 'kvlab[lab]'")
    missing = _missing_extensions()
    if missing:
        raise RuntimeError(
            f"JupyterLab lacks the extension(s) {', '.join(missing)}: reinstall "
            "ipywidgets and anywidget in this environment (pip install 'kvlab[lab]')"
        )
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}"]
    if port is not None:
        cmd += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    return cmd + list(extra_args or [])


def launch_lab(
    notebook_dir: str | PathLike[str] | None = None,
    port: int | None = None,
    extra_args: list[str] | None = None,
) -> int:
    """Start JupyterLab on the course notebooks and wait until it is stopped (Ctrl+C).

    Args:
        notebook_dir: Folder to open; default :func:`find_notebook_dir`.
        port: TCP port; None lets Jupyter choose.
        extra_args: More JupyterLab options (``--allow-root``, ``--no-browser``, ...).

    Returns:
        JupyterLab's exit status.

    Raises:
        See :func:`lab_command` (nothing is started when a check fails).
    """
    cmd = lab_command(notebook_dir, port, extra_args)
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 0
