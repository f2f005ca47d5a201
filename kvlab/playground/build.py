"""Write the playground as a folder of static files (``kvlab playground``, the site's hook).

The folder (about 14 MB; ``kvlab playground`` prints the sizes)::

    index.html              the page: the editor's strings (en, zh), the presets, the defaults
    playground.js/.css      the editor, the Pyodide loader and the Run / Share logic
    player.js/.css          the trace player (kvlab.viz.assets: the same code as export_html)
    kvlab-playground.zip    the Python the page runs: BROWSER_MODULES + cbor2 (pure Python)
    pyodide/                Pyodide 314.0.7 (kvlab.playground.vendor)
    NOTICE.txt              what is in the folder, whose it is, how to serve it

``kvlab-playground.zip`` holds kvlab.core and kvlab.playground's modules verbatim, plus the
numpy-free parts of kvlab.trace, kvlab.viz (the predict questions) and kvlab.i18n (with the
Chinese catalogue), under package ``__init__`` files of its own (``kvlab/__init__.py``,
``kvlab/trace/__init__.py`` and ``kvlab/viz/__init__.py`` import nothing, so the browser never
reaches numpy). tests/playground/test_bundle.py runs a scenario
from the zip alone, with numpy blocked, in CPython.

Examples:
    >>> report = build_playground("out/playground")          # doctest: +SKIP
    >>> report.total_bytes < 15_000_000                       # doctest: +SKIP
    True
"""

from __future__ import annotations

import html
import io
import json
import shutil
import zipfile
from dataclasses import dataclass
from importlib.resources import files
from os import PathLike
from pathlib import Path

import kvlab
from kvlab.core.hashing import HASH_FN_NAMES
from kvlab.i18n import LANGUAGES, translations, use_language
from kvlab.playground import vendor
from kvlab.playground.presets import DEFAULT_PRESET, PRESETS
from kvlab.playground.scenario import DEFAULTS, LIMITS, VOCAB_SIZE
from kvlab.playground.strings import playground_strings
from kvlab.viz.assets import player_css, player_script
from kvlab.viz.player_strings import player_labels
from kvlab.viz.predict_common import PREDICT_KINDS

__all__ = ["BROWSER_MODULES", "BuildReport", "build_playground", "page_html", "python_bundle"]

KVLAB_DIR = Path(kvlab.__file__).resolve().parent

BROWSER_MODULES = (
    "core/**/*.py",
    "trace/events.py",
    "trace/hooks.py",
    "trace/metadata.py",
    "viz/predict_cache_questions.py",
    "viz/predict_common.py",
    "viz/predict_questions.py",
    "i18n.py",
    "locale/*/LC_MESSAGES/kvlab.mo",
    "playground/__init__.py",
    "playground/browser.py",
    "playground/chains.py",
    "playground/encode.py",
    "playground/events.py",
    "playground/presets.py",
    "playground/quiz.py",
    "playground/quiz_decisions.py",
    "playground/run.py",
    "playground/scenario.py",
)
"""The kvlab files the browser runs (globs under the kvlab package), shipped verbatim."""

_PACKAGE_INITS = {
    "kvlab/__init__.py": (
        '"""kvlab as the browser playground ships it: kvlab.core, kvlab.playground and\n'
        'the numpy-free parts of kvlab.trace and kvlab.i18n (kvlab/playground/build.py)."""\n'
    ),
    "kvlab/trace/__init__.py": (
        '"""kvlab.trace in the browser playground: events, hooks and metadata only."""\n'
    ),
    "kvlab/viz/__init__.py": (
        '"""kvlab.viz in the browser playground: the numpy-free predict-mode questions only."""\n'
    ),
}


@dataclass(frozen=True)
class BuildReport:
    """What ``build_playground`` wrote.

    Attributes:
        out: The folder.
        sizes: Relative path -> bytes, for every file written.
    """

    out: Path
    sizes: dict[str, int]

    @property
    def total_bytes(self) -> int:
        """All files together (bytes)."""
        return sum(self.sizes.values())


def _bundle_members() -> list[tuple[str, Path]]:
    members = {}
    for pattern in BROWSER_MODULES:
        found = sorted(KVLAB_DIR.glob(pattern))
        if not found:
            raise FileNotFoundError(f"kvlab/{pattern} matches no file")
        for path in found:
            if "__pycache__" not in path.parts:
                members[f"kvlab/{path.relative_to(KVLAB_DIR).as_posix()}"] = path
    return sorted(members.items())


def python_bundle(fetch_missing: bool = True) -> bytes:
    """The zip of Python the page unpacks: BROWSER_MODULES, package inits, cbor2 (pure).

    Raises:
        kvlab.playground.vendor.VendorError: The cbor2 wheel is missing and was not fetched.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for name, text in _PACKAGE_INITS.items():
            out.writestr(_info(name), text)
        for name, path in _bundle_members():
            if name not in _PACKAGE_INITS:
                out.writestr(_info(name), path.read_bytes())
        with zipfile.ZipFile(vendor.cbor2_wheel(fetch_missing)) as wheel:
            for name in wheel.namelist():
                if (
                    name.startswith("cbor2/")
                    and name.endswith(".py")
                    or name.endswith("LICENSE.txt")
                ):
                    target = name if name.startswith("cbor2/") else "cbor2/LICENSE.txt"
                    out.writestr(_info(target), wheel.read(name))
    return buffer.getvalue()


def _info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))  # NOTE: reproducible bytes
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _translated(text: str, lang: str) -> str:
    return text if lang == "en" else translations(lang).gettext(text)


def page_data() -> dict:
    """The JSON the page reads (#kvlab-playground-data): strings, presets, defaults, limits, the
    predict mode's kinds."""
    presets = {}
    for name, p in PRESETS.items():
        presets[name] = {
            "title": {lang: _translated(p.title, lang) for lang in LANGUAGES},
            "description": {lang: _translated(p.description, lang) for lang in LANGUAGES},
            "notebook": p.notebook,
            "scenario": p.scenario,
        }
    return {
        "strings": {lang: playground_strings(lang) for lang in LANGUAGES},
        "player_labels": {lang: player_labels(lang) for lang in LANGUAGES},
        "presets": presets,
        "default_preset": DEFAULT_PRESET,
        "defaults": DEFAULTS,
        "limits": LIMITS,
        "vocab_size": VOCAB_SIZE,
        "hash_names": list(HASH_FN_NAMES),
        "predict_kinds": list(PREDICT_KINDS),
        "pyodide_version": vendor.PYODIDE_VERSION,
    }


def page_html() -> str:
    """index.html: the page shell; playground.js builds the editor in the reader's language."""
    data = json.dumps(page_data(), ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    with use_language("en"):
        title = html.escape(playground_strings("en").get("kvlab playground", "kvlab playground"))
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{title}</title>",
            '<link rel="stylesheet" href="player.css">',
            '<link rel="stylesheet" href="playground.css">',
            "</head>",
            "<body>",
            '<div id="kvlab-playground">',
            "<noscript>The kvlab playground needs JavaScript.</noscript></div>",
            f'<script type="application/json" id="kvlab-playground-data">{data}</script>',
            '<script src="pyodide/pyodide.js"></script>',
            '<script src="player.js"></script>',
            '<script src="playground.js"></script>',
            "</body>",
            "</html>",
            "",
        ]
    )


_NOTICE = """kvlab playground: kvlab.core running in the browser through Pyodide.

Serve this folder over http (browsers do not run WebAssembly Python from file://), e.g.
    kvlab playground --serve            (or: python3 -m http.server --bind 127.0.0.1)
and open index.html. ?lang=zh shows it in Chinese; ?preset=nb03 opens a preset.

Contents
  index.html, playground.js, playground.css, player.js, player.css   kvlab (Apache-2.0)
  kvlab-playground.zip   kvlab.core and kvlab.playground (Apache-2.0); cbor2 {cbor2} (MIT,
                         cbor2/LICENSE.txt inside the zip)
  pyodide/               Pyodide {pyodide} (MPL-2.0, https://github.com/pyodide/pyodide),
                         from the npm package pyodide@{pyodide}, unmodified
"""


def build_playground(out: str | PathLike[str], fetch_missing: bool = True) -> BuildReport:
    """Write the playground folder (see the module docstring); existing files are replaced.

    Args:
        out: The folder (created if missing).
        fetch_missing: Fetch Pyodide / cbor2 into the vendor cache if they are not there.

    Returns:
        A BuildReport with every file's size.

    Raises:
        kvlab.playground.vendor.VendorError: Pyodide or cbor2 is missing and was not fetched.
    """
    out = Path(out)
    pyodide = vendor.pyodide_dir(fetch_missing)
    bundle = python_bundle(fetch_missing)
    static = files("kvlab.playground") / "static"
    texts = {
        "index.html": page_html(),
        "playground.js": (static / "playground.js").read_text(encoding="utf-8"),
        "playground.css": (static / "playground.css").read_text(encoding="utf-8"),
        "player.js": player_script(),
        "player.css": player_css(),
        "NOTICE.txt": _NOTICE.format(cbor2=vendor.CBOR2_VERSION, pyodide=vendor.PYODIDE_VERSION),
    }
    (out / "pyodide").mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, text in texts.items():
        data = text.encode("utf-8")
        (out / name).write_bytes(data)
        sizes[name] = len(data)
    (out / "kvlab-playground.zip").write_bytes(bundle)
    sizes["kvlab-playground.zip"] = len(bundle)
    for name in vendor.PYODIDE_FILES:
        shutil.copyfile(pyodide / name, out / "pyodide" / name)
        sizes[f"pyodide/{name}"] = (out / "pyodide" / name).stat().st_size
    return BuildReport(out, sizes)
