"""matplotlib figures that show themselves in a notebook and save the same bytes every run.

kvlab's charts (the what-if hit-rate curve in ``kvlab.traffic.plot``, the per-step series of a
comparison in ``kvlab.compare.plot``) are plain ``matplotlib.figure.Figure`` objects, built
without pyplot (no global state, no backend to pick). This module holds what they share:

* ``figure_class(name)``: a Figure subclass with ``_repr_svg_``, so Jupyter displays it as SVG
  even when pyplot (and its inline backend) is never imported;
* ``freeze_layout(fig)``: lay the figure out once and keep that layout, so saving it twice
  writes the same clip boxes (a constrained layout re-run at each save moves them by float
  noise, and SVG ids are hashes of them);
* ``figure_svg`` / ``save_figure``: SVG without a date and with fixed ids (``svg.hashsalt``),
  PNG without a software stamp; ``save_figure`` writes atomically;
* ``language_rc(lang)``: the fonts that draw a language's labels the same on every machine
  (Chinese: the CJK subset kvlab ships, ``kvlab.fonts``; never a font of the system).

matplotlib is optional (``pip install 'kvlab[viz]'``): importing this module does not need it;
``require_matplotlib`` says so in a plain sentence when it is missing.

Examples:
    >>> Figure = figure_class("DemoFigure")
    >>> fig = Figure(figsize=(2, 1)); ax = fig.add_subplot(); _ = ax.plot([0, 1])
    >>> freeze_layout(fig); figure_svg(fig) == figure_svg(fig)
    True
"""

from __future__ import annotations

import io
from functools import cache
from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["IMAGE_FORMATS", "figure_class", "figure_svg", "freeze_layout", "language_rc",
           "require_matplotlib", "save_figure"]  # fmt: skip

IMAGE_FORMATS = ("svg", "png")
"""File formats ``save_figure`` writes."""


def require_matplotlib(what: str) -> None:
    """Raise ImportError("``what`` needs matplotlib (the viz extra): <install_hint('viz')>") without it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from kvlab.cli_hints import install_hint

        raise ImportError(f"{what} needs matplotlib (the viz extra): {install_hint('viz')}") from None


@cache
def figure_class(name: str) -> type:
    """A matplotlib Figure subclass called ``name`` that Jupyter shows as (repeatable) SVG.

    Raises:
        ImportError: Without matplotlib.
    """
    from matplotlib.figure import Figure

    def _repr_svg_(self: Any) -> str:
        return figure_svg(self)

    doc = ("A Figure with ``_repr_svg_``: displayed by Jupyter even when pyplot is never "
           "imported (no inline backend), with the same bytes on every run.")  # fmt: skip
    return type(name, (Figure,), {"_repr_svg_": _repr_svg_, "__doc__": doc,
                                  "__module__": __name__})  # fmt: skip


def freeze_layout(fig: Any) -> None:
    """Run the figure's layout engine once, then switch it off (the layout stays as drawn)."""
    fig.draw_without_rendering()
    fig.set_layout_engine("none")


def language_rc(lang: str) -> dict[str, Any]:
    """rcParams under which a figure's text in ``lang`` is drawn the same on every machine.

    English: none (matplotlib's own DejaVu Sans, as ever). Chinese: the family list DejaVu Sans,
    then ``kvlab CJK``, the subset of Noto Sans CJK SC in ``kvlab/fonts`` (registered with
    matplotlib's font manager on first use); matplotlib takes each glyph from the first font of
    the list that has it, so Latin letters and digits look as in English and Chinese characters
    come from the bundled file, never from a font of the system.

    Raises:
        ValueError: If ``lang`` is not one of kvlab.i18n.LANGUAGES.
        ImportError: Without matplotlib.
    """
    from kvlab.i18n import check_language

    if check_language(lang) == "en":
        return {}
    from matplotlib import font_manager

    from kvlab.fonts import CJK_FAMILY, CJK_FONT

    manager = font_manager.fontManager
    if not any(entry.fname == str(CJK_FONT) for entry in manager.ttflist):
        manager.addfont(CJK_FONT)  # NOTE: clears findfont's cache
    return {"font.family": ["DejaVu Sans", CJK_FAMILY]}


def _savefig(fig: Any, f: Any, fmt: str) -> None:
    from matplotlib import rc_context

    # NOTE: no date, fixed SVG ids: the same figure writes the same bytes
    meta = {"Date": None} if fmt == "svg" else {"Software": None}
    with rc_context({"svg.hashsalt": "kvlab"}):
        fig.savefig(f, format=fmt, metadata=meta)


def figure_svg(fig: Any) -> str:
    """The figure as SVG text (no date, fixed ids)."""
    buf = io.BytesIO()
    _savefig(fig, buf, "svg")
    return buf.getvalue().decode()


def save_figure(fig: Any, path: str | PathLike[str], fmt: str | None = None) -> None:
    """Write ``fig`` to ``path`` atomically (a temporary file, then a rename), with the mode a
    new file gets (0666 minus the umask) or the mode of the file it replaces.

    Args:
        fig: A matplotlib Figure.
        path: The file.
        fmt: "svg" or "png"; None = from the suffix.

    Raises:
        ValueError: If the format is not one of IMAGE_FORMATS.
    """
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".").lower()
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"cannot write {path.name!r} as {fmt!r}; allowed: "
                         f"{', '.join(IMAGE_FORMATS)}")  # fmt: skip
    from kvlab.trace.atomic_file import atomic_write

    # NOTE: the new file gets the user's usual mode (0666 minus the umask), or the mode of the
    # file it replaces; mkstemp's 0600 would leave it unreadable to others.
    with atomic_write(path, "wb") as f:
        _savefig(fig, f, fmt)
