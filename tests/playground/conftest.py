"""Fixtures for tests/playground: the built playground folder, and a local server for it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvlab.playground.build import BuildReport, build_playground
from kvlab.playground.cli import serve


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuildReport:
    """``kvlab playground``'s folder, built once (Pyodide and cbor2 from the vendor cache)."""
    return build_playground(tmp_path_factory.mktemp("playground") / "site", fetch_missing=True)


@pytest.fixture(scope="session")
def served(built: BuildReport) -> Iterator[str]:
    """The folder served on 127.0.0.1 (a free port); yields its base URL."""
    server = serve(built.out, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def repo_root() -> Path:
    """The checkout's root."""
    return Path(__file__).resolve().parents[2]
