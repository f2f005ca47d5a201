"""``kvlab slides NN``: a course notebook as offline reveal.js slides.

nbconvert's ``SlidesExporter`` renders the notebook (with its stored outputs) to one HTML page;
kvlab points every script and style sheet it loads at a copy of reveal.js 4.0.2 (and
require.js) shipped in ``kvlab/static/revealjs`` and copied next to the page, so the slides
open from a USB stick with no network. Each markdown heading (``#``/``##``) starts a slide
(→); every other cell is a sub-slide below it (↓). Loads the page cannot make offline (MathJax, mermaid,
the widget manager of a live player) are removed; players show their stored text instead.

Examples:
    ```console
    $ kvlab slides 12                     # -> slides/12_misconceptions.slides.html
    $ kvlab slides 03 --out /tmp/lecture
    $ kvlab slides 03 --lang zh           # the Chinese notebook (notebooks/zh/)
    $ kvlab slides --session 1            # teaching session 1's curated deck (kvlab.slides_session)
    ```
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click

from kvlab.cli_i18n import KvlabCommand
from kvlab.i18n import N_, _, check_language, language

__all__ = ["REVEAL_DIR", "export_slides", "find_notebook", "slides"]

REVEAL_DIR = Path(__file__).resolve().parent / "static" / "revealjs"
"""The vendored reveal.js 4.0.2 (npm ``reveal.js@4.0.2``: dist, white theme, notes plugin; MIT)
and require.js 2.3.8 (MIT)."""

_ASSETS = "reveal.js"  # folder name next to the exported page
_REMOTE_TAG = re.compile(
    r"<script[^>]*\bsrc=[\"'](?:https?://[^\"']*)?[\"'][^>]*>\s*</script>"  # remote or empty src
    r"|<link[^>]*\bhref=[\"']https?://[^>]*>"
    r"|<script type=\"module\">\s*import [^;]*? from '(?:https?:)?//[^']*';.*?</script>",  # mermaid
    re.IGNORECASE | re.DOTALL,
)


def find_notebook(number: str, notebook_dir: str | Path | None = None, lang: str = "en") -> Path:
    """The course notebook ``NN_*.ipynb`` for ``number`` ("3" or "03"); with ``lang="zh"`` the
    Chinese one, from the ``zh/`` folder beside the English notebooks.

    Raises:
        FileNotFoundError: No such notebook (the message lists the ones there are).
        ValueError: ``number`` is not a one- or two-digit number.
    """
    if not re.fullmatch(r"\d{1,2}", str(number)):
        raise ValueError(f"notebook number must be 1-2 digits (e.g. 03), got {number!r}")
    if notebook_dir is None:
        from kvlab.lab import find_notebook_dir

        notebook_dir = find_notebook_dir()
    folder = Path(notebook_dir) / ("zh" if check_language(lang) == "zh" else "")
    found = sorted(folder.glob(f"{int(number):02d}_*.ipynb"))
    if not found:
        raise FileNotFoundError(f"there is no notebook {int(number):02d} in {folder}; "
                                f"{_holds(folder)}")  # fmt: skip
    return found[0]


def _holds(folder: Path) -> str:
    """What ``folder`` holds, for an error message: "it holds 01, 02, ..." or why not."""
    if not folder.is_dir():
        return "that folder does not exist"
    known = [p.name[:2] for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))]
    return f"it holds {', '.join(known)}" if known else "it holds no course notebooks (NN_*.ipynb)"


def _mark_slides(nb) -> None:
    """Slide types: a '#'/'##' markdown cell starts a slide (→), every other cell is a sub-slide
    below it (↓), so one cell fills the projector at a time."""
    for cell in nb.cells:
        headed = cell.cell_type == "markdown" and re.match(r"#{1,2} ", cell.source) is not None
        cell.metadata.setdefault("slideshow", {})["slide_type"] = "slide" if headed else "subslide"


def export_slides(notebook: str | Path, out_dir: str | Path) -> Path:
    """Write ``<name>.slides.html`` and the reveal.js files it uses into ``out_dir``.

    Args:
        notebook: A .ipynb file (its stored outputs are shown; it is not executed).
        out_dir: Folder for the page and its ``reveal.js/`` assets (created if needed).

    Returns:
        The path of the HTML page.

    Raises:
        FileNotFoundError: ``notebook`` does not exist.
        ImportError: nbconvert is not installed (``pip install 'kvlab[lab]'``).
    """
    import nbformat
    from nbconvert import SlidesExporter

    path = Path(notebook)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    nb = nbformat.read(path, as_version=4)
    _mark_slides(nb)
    nb.metadata.pop("widgets", None)  # the live players need a widget manager from a CDN
    exporter = SlidesExporter(
        reveal_url_prefix=_ASSETS,
        reveal_theme="white",
        reveal_scroll=False,  # True needs jQuery
        require_js_url=f"{_ASSETS}/require.js",
        jquery_url="",
        mathjax_url="",
    )
    title = next((c.source.splitlines()[0].lstrip("# ") for c in nb.cells if c.cell_type == "markdown"),
                 path.stem)  # fmt: skip
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    body = _REMOTE_TAG.sub("", body)
    # NOTE: with MathJax and jQuery gone, the template's slide-change hook must not call them;
    # Reveal (loaded through require.js, so not a global) is exposed for the console and tests.
    body = body.replace("if(MathJax.Hub.getAllJax(", "if(window.MathJax && MathJax.Hub.getAllJax(")
    body = body.replace("function(Reveal, RevealNotes){",
                        "function(Reveal, RevealNotes){\n        window.Reveal = Reveal;", 1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REVEAL_DIR, out / _ASSETS, dirs_exist_ok=True)
    page = out / f"{path.stem}.slides.html"
    page.write_text(body, encoding="utf-8")
    return page


@click.command(cls=KvlabCommand,
               short_help=N_("A course notebook or a session's deck as offline slides."),
               help=N_("Export course notebook NUMBER (03, or 3), or a session's deck "
                       "(--session N), as offline reveal.js slides."))
@click.argument("number", required=False)
@click.option("--session", "session_number", type=click.IntRange(1, 3), default=None,
              help=N_("Build the curated deck of teaching session 1, 2 or 3 instead (figures, "
                      "players in predict mode, speaker notes; kvlab.course.sessions)."))
@click.option("--out", "out_dir", default="slides", show_default=True,
              type=click.Path(file_okay=False), help=N_("Folder for the slides and their assets."))
@click.option("--notebooks", "notebook_dir", default=None, type=click.Path(file_okay=False),
              help=N_("Folder of the course notebooks (default: the checkout's notebooks/)."))
@click.option("--lang", default=None, metavar="en|zh",
              help=N_("Language of the notebook (zh: notebooks/zh/); default: kvlab's --lang, "
                      "else KVLAB_LANG or the locale."))
def slides(number: str | None, session_number: int | None, out_dir: str, notebook_dir: str | None,
           lang: str | None) -> None:  # fmt: skip
    """``kvlab slides`` (its help is the decorator's)."""
    from kvlab.cli_checks import check_output_dir

    try:
        lang = check_language(lang) if lang is not None else language()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--lang'") from exc
    if (number is None) == (session_number is None):
        raise click.UsageError(_("give a notebook NUMBER (e.g. 03) or --session N (1-3), not "
                                 "both"))
    check_output_dir(Path(out_dir), "--out")
    if session_number is not None:
        from kvlab.slides_session import export_session_slides

        page = export_session_slides(session_number, out_dir, lang)
    else:
        if not re.fullmatch(r"\d{1,2}", number):
            raise click.BadParameter(_("{number} is not a notebook number: give one or two "
                                       "digits, e.g. 03").format(number=repr(number)),
                                     param_hint="NUMBER")
        folder = _notebook_folder(notebook_dir)
        try:
            notebook = find_notebook(number, folder, lang)
        except FileNotFoundError as exc:
            raise click.BadParameter(str(exc), param_hint="NUMBER") from None
        page = export_slides(notebook, out_dir)
    click.echo(_("wrote {page} (open it in a browser; arrows move, Esc shows the overview, S the "
                 "notes)").format(page=page))


def _notebook_folder(notebook_dir: str | None) -> Path:
    """``--notebooks`` checked (an existing folder holding NN_*.ipynb), else the default."""
    from kvlab.lab import find_notebook_dir

    if notebook_dir is None:
        try:
            return find_notebook_dir()
        except FileNotFoundError as exc:
            raise click.UsageError(_("{problem} with --notebooks DIR").format(problem=exc)) from None
    folder = Path(notebook_dir)
    if folder.is_dir() and any(folder.glob("[0-9][0-9]_*.ipynb")):
        return folder
    try:
        where = _("; the course notebooks are in {folder}").format(folder=find_notebook_dir())
    except FileNotFoundError:
        where = ""
    what = (_("{folder} holds no course notebooks (NN_*.ipynb)").format(folder=folder)
            if folder.is_dir() else _("there is no folder {folder}").format(folder=folder))
    raise click.BadParameter(f"{what}{where}", param_hint="'--notebooks'")
