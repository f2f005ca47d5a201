"""The playground's third-party files: Pyodide (npm) and the cbor2 pure-Python wheel (PyPI).

Neither is committed to git (Pyodide is 13.5 MB). ``vendor_dir()`` finds them in a cache folder
(``KVLAB_PLAYGROUND_VENDOR``, default ``~/.cache/kvlab/playground``) and, when they are missing,
fetches them with the registries' own clients, pinned and checked:

==============================  ===============================  ===============================
what                            fetched with                     checked against
==============================  ===============================  ===============================
Pyodide 314.0.7 (interpreter,   ``npm pack pyodide@314.0.7``     the tarball's sha512
standard library; MPL-2.0)      (npm's cache serves repeats)     (npm's ``dist.integrity``)
cbor2 5.9.0, pure Python (MIT)  ``pip download cbor2==5.9.0``    the wheel's sha256
                                (``py3-none-any`` only)
==============================  ===============================  ===============================

cbor2 5.9.0 is the last release with a pure-Python wheel; its canonical encoding is the same
bytes as the compiled cbor2 kvlab uses in CPython (the browser tests compare sha256_cbor
hashes). ``make`` fetches both in its set-up step (``python -m kvlab.playground.vendor``), so
tests and site builds find them offline.

Examples:
    >>> vendor_dir(fetch=False)                     # doctest: +SKIP
    PosixPath('/root/.cache/kvlab/playground')
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

__all__ = [
    "CBOR2_WHEEL",
    "PYODIDE_FILES",
    "PYODIDE_VERSION",
    "VendorError",
    "cbor2_wheel",
    "fetch",
    "pyodide_dir",
    "vendor_dir",
]

PYODIDE_VERSION = "314.0.7"
PYODIDE_SHA512 = (
    "0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="
)
PYODIDE_FILES = (
    "pyodide.js",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
    "package.json",
)
"""What the page loads (``package.json`` travels for its licence and version)."""

CBOR2_VERSION = "5.9.0"
CBOR2_WHEEL = f"cbor2-{CBOR2_VERSION}-py3-none-any.whl"
CBOR2_SHA256 = "27695cbd70c90b8de5c4a284642c2836449b14e2c2e07e3ffe0744cb7669a01b"


class VendorError(RuntimeError):
    """A third-party file is missing and could not be fetched; the message says how to get it."""


def vendor_dir() -> Path:
    """The cache folder (``KVLAB_PLAYGROUND_VENDOR``, else ``~/.cache/kvlab/playground``)."""
    env = os.environ.get("KVLAB_PLAYGROUND_VENDOR")
    return Path(env) if env else Path.home() / ".cache" / "kvlab" / "playground"


def pyodide_dir(fetch_missing: bool = True) -> Path:
    """The folder holding ``PYODIDE_FILES``, fetched first if needed.

    Raises:
        VendorError: Missing, and not fetched (``fetch_missing`` False, or npm failed).
    """
    folder = vendor_dir() / f"pyodide-{PYODIDE_VERSION}"
    if not all((folder / name).is_file() for name in PYODIDE_FILES):
        if not fetch_missing:
            raise VendorError(
                f"Pyodide {PYODIDE_VERSION} is not in {folder}; fetch it with "
                "`python -m kvlab.playground.vendor` (needs npm)"
            )
        _fetch_pyodide(folder)
    return folder


def cbor2_wheel(fetch_missing: bool = True) -> Path:
    """The cbor2 pure-Python wheel, fetched first if needed.

    Raises:
        VendorError: Missing, and not fetched (``fetch_missing`` False, or pip failed).
    """
    wheel = vendor_dir() / CBOR2_WHEEL
    if not wheel.is_file():
        if not fetch_missing:
            raise VendorError(
                f"{CBOR2_WHEEL} is not in {wheel.parent}; fetch it with "
                "`python -m kvlab.playground.vendor`"
            )
        _fetch_cbor2(wheel)
    return wheel


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    try:
        done = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise VendorError(f"{what}: {cmd[0]} is not installed") from None
    except subprocess.CalledProcessError as exc:
        raise VendorError(
            f"{what}: `{' '.join(cmd)}` failed:\n{exc.stderr.strip()[-2000:]}"
        ) from None
    return done.stdout


def _fetch_pyodide(folder: Path) -> None:
    what = f"fetching Pyodide {PYODIDE_VERSION} from the npm registry"
    if shutil.which("npm") is None:
        raise VendorError(
            f"{what}: npm is not installed (apt-get install npm, or set "
            "KVLAB_PLAYGROUND_VENDOR to a folder that has it)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        spec = f"pyodide@{PYODIDE_VERSION}"
        out = _run(["npm", "pack", spec, "--silent", "--prefer-offline"], Path(tmp), what)
        tarball = Path(tmp) / out.strip().splitlines()[-1]
        digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
        if digest != PYODIDE_SHA512:
            raise VendorError(
                f"{what}: {tarball.name} has sha512 {digest}, expected {PYODIDE_SHA512}"
            )
        folder.parent.mkdir(parents=True, exist_ok=True)
        # NOTE: extracted beside the target, then renamed: concurrent fetches (test workers)
        # never see a half-written folder, and the first rename wins.
        part = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
        with tarfile.open(tarball) as tar:
            for name in PYODIDE_FILES:
                source = tar.extractfile(f"package/{name}")
                if source is None:
                    raise VendorError(f"{what}: package/{name} is not in {tarball.name}")
                (part / name).write_bytes(source.read())
        try:
            part.rename(folder)
        except OSError:  # another process finished first
            shutil.rmtree(part, ignore_errors=True)
            if not all((folder / name).is_file() for name in PYODIDE_FILES):
                raise


def _fetch_cbor2(wheel: Path) -> None:
    what = f"fetching {CBOR2_WHEEL} from PyPI"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheel.parent) as tmp:  # same file system: os.replace
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                f"cbor2=={CBOR2_VERSION}",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "any",
                "--implementation",
                "py",
                "--abi",
                "none",
                "--python-version",
                "3.12",
                "--disable-pip-version-check",
                "-d",
                tmp,
            ],
            Path(tmp),
            what,
        )
        got = Path(tmp) / CBOR2_WHEEL
        if not got.is_file():
            raise VendorError(f"{what}: pip did not download {CBOR2_WHEEL}")
        digest = hashlib.sha256(got.read_bytes()).hexdigest()
        if digest != CBOR2_SHA256:
            raise VendorError(f"{what}: sha256 {digest}, expected {CBOR2_SHA256}")
        os.replace(got, wheel)  # atomic: concurrent fetches never see half a wheel


def fetch() -> list[Path]:
    """Fetch whatever is missing; returns the files now present.

    Raises:
        VendorError: If a fetch failed.
    """
    folder, wheel = pyodide_dir(), cbor2_wheel()
    return [folder / name for name in PYODIDE_FILES] + [wheel]


def main() -> int:
    """``python -m kvlab.playground.vendor``: fetch, then list the files with their sizes."""
    try:
        files = fetch()
    except VendorError as exc:
        print(f"kvlab playground: {exc}", file=sys.stderr)
        return 1
    for path in files:
        print(f"{path.stat().st_size:>11,}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
