"""The vendor cache: Pyodide and cbor2 are fetched with npm / pip, and a wrong file is refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kvlab.playground import vendor


def _fake_npm(bin_dir: Path) -> None:
    """An `npm` whose `pack` writes a tarball with the right names and the wrong bytes."""
    bin_dir.mkdir()
    script = bin_dir / "npm"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import io, tarfile\n"
        "with tarfile.open('pyodide-314.0.7.tgz', 'w:gz') as t:\n"
        "    for n in ['pyodide.js', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip',"
        " 'pyodide-lock.json', 'package.json']:\n"
        "        i = tarfile.TarInfo('package/' + n); i.size = 3\n"
        "        t.addfile(i, io.BytesIO(b'bad'))\n"
        "print('pyodide-314.0.7.tgz')\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_a_tarball_with_another_digest_is_refused(tmp_path: Path, monkeypatch) -> None:
    _fake_npm(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KVLAB_PLAYGROUND_VENDOR", str(tmp_path / "cache"))
    with pytest.raises(vendor.VendorError, match=r"has sha512 .*, expected 0YvXxEhf"):
        vendor.pyodide_dir()
    assert not (tmp_path / "cache" / "pyodide-314.0.7").exists()  # nothing half-written kept


def test_without_npm_the_message_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm there
    monkeypatch.setenv("KVLAB_PLAYGROUND_VENDOR", str(tmp_path / "cache"))
    with pytest.raises(vendor.VendorError, match="npm is not installed"):
        vendor.pyodide_dir()
    with pytest.raises(vendor.VendorError, match="python -m kvlab.playground.vendor"):
        vendor.cbor2_wheel(fetch_missing=False)


def test_the_cache_holds_the_pinned_files() -> None:
    """make's set-up (or an earlier test) fetched them: their digests are the pinned ones."""
    import base64
    import hashlib

    folder, wheel = vendor.pyodide_dir(), vendor.cbor2_wheel()
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == vendor.CBOR2_SHA256
    assert sorted(p.name for p in folder.iterdir()) == sorted(vendor.PYODIDE_FILES)
    assert b'"version": "314.0.7"' in (folder / "package.json").read_bytes()
    assert base64.b64decode(vendor.PYODIDE_SHA512)  # a sha512 in npm's integrity form
