"""Commands the ``kvlab`` command prints for the user to run next, runnable as printed.

After ``make demo`` the ``kvlab`` script lives in ``.venv/bin`` and is not on the shell's PATH
until the environment is activated: a hint that says ``kvlab trace show ...`` would answer
``kvlab: command not found``. :func:`kvlab_command` gives the command as this shell can run it:
``kvlab`` when the ``kvlab`` found on PATH is the one running, else the script's path as it was
typed (``.venv/bin/kvlab``), else ``python -m kvlab.cli`` through this interpreter.
:func:`install_hint` does the same for installing an extra: kvlab is not on the package index,
so from a checkout the hint is pip's editable install of that checkout.

Examples:
    >>> kvlab_command()                    # doctest: +SKIP
    '.venv/bin/kvlab'
    >>> install_hint("viz")                # doctest: +SKIP
    ".venv/bin/python -m pip install -c constraints.txt -e '.[viz]'"
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["activate_hint", "checkout_root", "install_hint", "kvlab_command"]


def _short(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the current folder when it lies below it (symlinks not resolved)."""
    text = os.path.abspath(path)
    here = os.getcwd()
    if here != os.sep and text.startswith(here + os.sep):
        return os.path.relpath(text, here)
    return text


def _same(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _script() -> str | None:
    """The ``kvlab`` script running now, as the shell was given it, or None."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "kvlab" and os.path.isfile(argv0):
        return argv0
    beside = Path(sys.executable).parent / "kvlab"  # python -m kvlab.cli, or a test runner
    return str(beside) if beside.is_file() else None


def kvlab_command() -> str:
    """The ``kvlab`` command as the user's shell can run it now (see the module docstring).

    Returns:
        ``"kvlab"``, a path to the script (``".venv/bin/kvlab"``, shell-quoted), or
        ``"<python> -m kvlab.cli"``.
    """
    script = _script()
    on_path = shutil.which("kvlab")
    if script is not None and on_path is not None and _same(on_path, script):
        return "kvlab"
    if script is not None:
        return shlex.quote(script if not os.path.isabs(script) else _short(script))
    return f"{shlex.quote(_short(sys.executable))} -m kvlab.cli"


def activate_hint() -> str | None:
    """``source .venv/bin/activate`` when kvlab runs from a virtual environment that is not
    active in this shell (so ``kvlab`` alone is not found), else None."""
    command = kvlab_command()
    if command == "kvlab" or " " in command:
        return None
    activate = Path(shlex.split(command)[0]).parent / "activate"
    return f"source {shlex.quote(str(activate))}" if activate.is_file() else None


def checkout_root() -> Path | None:
    """The kvlab checkout this package runs from (``pip install -e .``), or None."""
    root = Path(__file__).resolve().parents[1]
    pyproject = root / "pyproject.toml"
    try:
        if 'name = "kvlab"' in pyproject.read_text(encoding="utf-8"):
            return root
    except OSError:
        pass
    return None


def install_hint(extra: str) -> str:
    """The command that installs kvlab's optional ``extra`` into the running environment.

    Args:
        extra: A name of pyproject.toml's optional-dependencies (``viz``, ``lab`` ...).

    Returns:
        From a checkout: ``<python> -m pip install -c constraints.txt -e '.[extra]'`` (the
        checkout's path instead of ``.`` when the current folder is elsewhere); otherwise
        ``pip install 'kvlab[extra]'``.
    """
    root = checkout_root()
    if root is None:
        return f"pip install {shlex.quote(f'kvlab[{extra}]')}"
    here = Path.cwd().resolve() == root
    target = "." if here else str(root)
    constraints = root / "constraints.txt"
    pin = ""
    if constraints.is_file():
        pin = f"-c {shlex.quote('constraints.txt' if here else str(constraints))} "
    python = shlex.quote(_short(sys.executable))
    return f"{python} -m pip install {pin}-e {shlex.quote(f'{target}[{extra}]')}"
