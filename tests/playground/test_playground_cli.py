"""``kvlab playground``: the folder it writes (under 15 MB, nothing remote), --serve, --no-fetch."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from click.testing import CliRunner

from kvlab.cli import main
from kvlab.playground.build import BuildReport
from kvlab.playground.cli import serve
from kvlab.playground.vendor import PYODIDE_FILES

_REMOTE = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", re.IGNORECASE)


def test_the_folder_has_everything_under_15_mb(built: BuildReport) -> None:
    names = {
        "index.html",
        "playground.js",
        "playground.css",
        "player.js",
        "player.css",
        "kvlab-playground.zip",
        "NOTICE.txt",
        *(f"pyodide/{n}" for n in PYODIDE_FILES),
    }
    assert set(built.sizes) == names
    assert all((built.out / n).stat().st_size == size for n, size in built.sizes.items())
    assert built.total_bytes < 15_000_000
    for name in ("index.html", "playground.js", "player.js"):
        assert not _REMOTE.search((built.out / name).read_text(encoding="utf-8")), name
    notice = (built.out / "NOTICE.txt").read_text(encoding="utf-8")
    assert "Pyodide 314.0.7 (MPL-2.0" in notice and "cbor2 5.9.0 (MIT" in notice
    data = (built.out / "index.html").read_text(encoding="utf-8")
    blob = re.search(r'id="kvlab-playground-data">(.*?)</script>', data, re.DOTALL).group(1)
    assert json.loads(blob)["pyodide_version"] == "314.0.7"


def test_cli_writes_the_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["playground", "--out", str(tmp_path / "pg")])
    assert result.exit_code == 0, result.output
    assert re.match(r"kvlab playground: wrote 13 files \(1[34]\.\d MB\) to ", result.output)
    assert "--serve" in result.output
    assert (tmp_path / "pg" / "pyodide" / "pyodide.asm.wasm").is_file()


def test_cli_in_chinese(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["playground", "--lang", "zh", "--out", str(tmp_path / "pg")])
    assert result.exit_code == 0 and "kvlab 演练场" in result.output


def test_no_fetch_with_an_empty_cache_says_how_to_fetch(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KVLAB_PLAYGROUND_VENDOR", str(tmp_path / "empty"))
    result = CliRunner().invoke(main, ["playground", "--no-fetch", "--out", str(tmp_path / "pg")])
    assert result.exit_code == 1
    assert "python -m kvlab.playground.vendor" in result.output
    assert "Traceback" not in result.output


def test_server_sends_the_mime_types_pyodide_needs(built: BuildReport) -> None:
    server = serve(built.out, 0)
    assert server.server_address[0] == "127.0.0.1"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for path, mime in (
            ("pyodide/pyodide.asm.mjs", "text/javascript"),
            ("pyodide/pyodide.asm.wasm", "application/wasm"),
            ("index.html", "text/html"),
            ("kvlab-playground.zip", "application/zip"),
        ):
            with urllib.request.urlopen(base + path) as response:  # noqa: S310 - local
                assert response.headers["Content-Type"].split(";")[0] == mime, path
    finally:
        server.shutdown()
        server.server_close()


def test_serve_flag_serves_until_stopped(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kvlab.cli",
            "playground",
            "--out",
            str(tmp_path / "pg"),
            "--serve",
            "--port",
            "0",
            "--lang",
            "en",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        proc.stdout.readline()  # wrote ... files
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(url + "index.html") as response:  # noqa: S310 - local
            assert b"kvlab-playground-data" in response.read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
