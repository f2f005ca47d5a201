"""Write a file atomically, with the permissions an ordinary new file gets.

:func:`atomic_write` writes into a temporary file next to the target, flushes it to disk and
renames it over the target (``os.replace``): a reader sees the old file or the whole new one,
and a failed write leaves the old file as it was and no temporary file behind. The temporary
file comes from :func:`tempfile.mkstemp`, which creates it with mode 0600 whatever the umask;
before the rename it is given the target's mode when the target exists, else what ``open``
would have given a new file (0666 minus the umask, e.g. 0644 under umask 022), so the result
is readable by whoever could read any other file the user writes.

Every kvlab output written this way: saved traces (``kvlab.trace.save_trace``), ``kvlab
whatif``'s ``--json`` and the hit-rate curve (``--svg`` / ``--png``, ``kvlab.traffic.plot``).

Examples:
    >>> with atomic_write("out.json", "w") as f:      # doctest: +SKIP
    ...     f.write("{}")
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from os import PathLike
from typing import IO, Any

__all__ = ["atomic_write", "new_file_mode"]


def new_file_mode(path: str | PathLike[str]) -> int:
    """The permission bits for writing ``path``: the existing file's, else 0o666 minus the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    try:  # NOTE: Linux reports the umask without changing it (os.umask would, process-wide)
        with open("/proc/self/status", encoding="ascii") as fh:
            umask = next(int(ln.split()[1], 8) for ln in fh if ln.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        umask = os.umask(0)
        os.umask(umask)
    return 0o666 & ~umask


def _fsync_dir(directory: str) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(path: str | PathLike[str], mode: str = "wb",
                 encoding: str | None = None) -> Iterator[IO[Any]]:  # fmt: skip
    """Open a temporary file for writing; on success it replaces ``path`` (see the module).

    Args:
        path: The file to write; its folder must exist.
        mode: ``"wb"`` or ``"w"``.
        encoding: Text encoding for ``"w"`` (default UTF-8).

    Yields:
        The open temporary file.

    Raises:
        ValueError: If ``mode`` is not "w" or "wb".
        OSError: If the folder does not exist or writing fails (``path`` is unchanged and no
            temporary file is left).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        kwargs = {"encoding": encoding or "utf-8"} if mode == "w" else {}
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, new_file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)
