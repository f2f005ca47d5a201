"""Make ``kvlab/fonts/kvlab-cjk.otf``: Noto Sans CJK SC cut down to the Chinese chart texts.

    .venv/bin/python -m kvlab.font_subset /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
    .venv/bin/python -m kvlab.font_subset NotoSansCJKsc-Regular.otf      # the single-face file

The characters are those of every chart text (``kvlab.traffic.plot.CHART_TEXTS``) in each of
kvlab's languages other than English, without their ``{placeholders}``, plus the digits 0-9
(``chart_characters``). fontTools' subsetter (a matplotlib dependency) keeps their glyphs, with
their metrics and layout features; the script then renames the font ``kvlab CJK`` (name table and
CFF names), as the SIL Open Font License asks of a modified version, keeps the copyright, trademark
and licence records, says in the description which font and version it was cut from, and keeps the
source's timestamps, so the same source font gives the same bytes. ``kvlab-cjk.json`` records the
source (family, version, sha256 of the file read) and the characters.

Raises (as a message and exit status 1): a source that is not Noto Sans CJK SC Regular (a .ttc
without that face) or lacks a character.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from kvlab.fonts import CJK_FAMILY, CJK_FONT, CJK_SOURCE_FAMILY

__all__ = ["chart_characters", "make_subset"]

_PS_NAME = "kvlabCJK-Regular"
_DIGITS = "0123456789"


def chart_characters() -> str:
    """Every character the charts' translated texts can draw, sorted, without duplicates.

    Placeholders (``{block_size}``) are left out: what fills them (numbers, cache names) is
    Latin text, drawn in DejaVu Sans; the digits are added all the same.
    """
    from kvlab.i18n import LANGUAGES, translations
    from kvlab.traffic.plot import CHART_TEXTS

    chars = set(_DIGITS)
    for lang in LANGUAGES:
        if lang != "en":
            for msgid in CHART_TEXTS.values():
                chars.update(re.sub(r"\{\w+\}", "", translations(lang).gettext(msgid)))
    return "".join(sorted(chars))


def _open_source(path: Path) -> Any:
    from fontTools.ttLib import TTCollection, TTFont

    if path.suffix.lower() in (".ttc", ".otc"):
        faces = TTCollection(str(path), recalcTimestamp=False).fonts
    else:
        faces = [TTFont(str(path), recalcTimestamp=False)]
    for face in faces:
        if (face["name"].getDebugName(1), face["name"].getDebugName(2)) == (CJK_SOURCE_FAMILY,
                                                                           "Regular"):  # fmt: skip
            return face
    names = ", ".join(f"{f['name'].getDebugName(1)} {f['name'].getDebugName(2)}" for f in faces)
    raise ValueError(f"{path} has no {CJK_SOURCE_FAMILY} Regular face (it has: {names})")


def _rename(font: Any, source_version: str) -> None:
    """The OFL's rule for a modified version: a name of its own, notices kept."""
    described = (f"A subset of {CJK_SOURCE_FAMILY} ({source_version}) with only the characters "
                 "of kvlab's Chinese chart labels, made by kvlab/font_subset.py.")  # fmt: skip
    names = {1: CJK_FAMILY, 2: "Regular", 3: f"{source_version.split(';')[0]};kvlab;{_PS_NAME}",
             4: CJK_FAMILY, 5: f"{source_version}; kvlab subset", 6: _PS_NAME,
             10: described}  # fmt: skip
    table = font["name"]
    table.names = [r for r in table.names if r.nameID not in (*names, 16, 17, 18, 21, 22)]
    for name_id, text in names.items():
        table.setName(text, name_id, 3, 1, 0x409)  # Windows, Unicode BMP, English (US)
    cff = font["CFF "].cff
    cff.fontNames = [_PS_NAME]
    top = cff.topDictIndex[0]
    for key in ("FullName", "FamilyName"):
        if hasattr(top, key):
            setattr(top, key, CJK_FAMILY)
    if hasattr(top, "CIDFontName"):
        top.CIDFontName = _PS_NAME
    for fd in getattr(top, "FDArray", None) or ():  # NOTE: a .ttc's faces share them
        if hasattr(fd, "FontName"):  # NotoSansCJKjp-Regular-Ideographs -> kvlabCJK-Regular-...
            fd.FontName = re.sub(r"^[^-]+-[^-]+", _PS_NAME, fd.FontName)


def make_subset(source: Path, out: Path = CJK_FONT) -> dict[str, Any]:
    """Cut ``source`` down to ``chart_characters()``, rename it and write ``out`` and its
    manifest (``out`` with the suffix .json).

    Args:
        source: Noto Sans CJK SC Regular: the collection (.ttc) or the single face (.otf).
        out: The subset to write.

    Returns:
        The manifest written.

    Raises:
        ValueError: If ``source`` has no Noto Sans CJK SC Regular face or lacks a character.
    """
    from fontTools import subset, version

    chars = chart_characters()
    font = _open_source(source)
    cmap = font.getBestCmap()
    missing = [c for c in chars if ord(c) not in cmap]
    if missing:
        raise ValueError(f"{source} lacks {''.join(missing)!r}")
    source_version = font["name"].getDebugName(5)
    options = subset.Options()
    options.name_IDs = ["*"]  # NOTE: copyright (0), trademark (7), licence (13, 14) stay
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in chars])
    subsetter.subset(font)
    _rename(font, source_version)
    out.parent.mkdir(parents=True, exist_ok=True)
    font.save(str(out))  # NOTE: recalcTimestamp=False: the source's dates, the same bytes
    manifest = {"family": CJK_FAMILY, "source_family": CJK_SOURCE_FAMILY,
                "source_version": source_version, "source_file": source.name,
                "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
                "fonttools": version, "characters": chars}  # fmt: skip
    out.with_suffix(".json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n",
                             encoding="utf-8")  # fmt: skip
    return manifest


def main(argv: list[str] | None = None) -> int:
    """``python -m kvlab.font_subset SOURCE [--out FILE]``."""
    parser = argparse.ArgumentParser(
        prog="python -m kvlab.font_subset",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", type=Path, help="Noto Sans CJK SC (.ttc or .otf)")
    parser.add_argument("--out", type=Path, default=CJK_FONT, help=f"default: {CJK_FONT}")
    args = parser.parse_args(argv)
    try:
        manifest = make_subset(args.source, args.out)
    except (OSError, ValueError) as exc:
        print(f"kvlab.font_subset: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out.stat().st_size:,} bytes, {len(manifest['characters'])} characters, "
          f"from {manifest['source_family']} {manifest['source_version']}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
