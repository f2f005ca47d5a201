"""The font kvlab ships, so a chart in Chinese draws the same glyphs on every machine.

``kvlab-cjk.otf`` (about 15 KB) is a subset of Noto Sans CJK SC that holds only the characters of
the Chinese texts kvlab's charts draw (``kvlab.traffic.plot.CHART_TEXTS``) and the digits. Noto
Sans CJK is licensed under the SIL Open Font License 1.1 (``OFL.txt``, with its copyright notice);
as the licence asks of a modified font, the subset has a family name of its own,
``kvlab CJK`` (Noto Sans CJK derives from Adobe's Source Han Sans, whose Reserved Font Name is
"Source"). ``kvlab-cjk.json`` records the source font (family, version, sha256) and the characters.

``kvlab.charts.language_rc("zh")`` registers the file with matplotlib's font manager and draws
Latin letters and digits in matplotlib's own DejaVu Sans, Chinese characters in ``kvlab CJK``:
never a font of the system, so the figure is the same bytes wherever it is drawn.

After a Chinese chart text changes (a new translation, a new label), make the subset again from a
copy of Noto Sans CJK SC (Debian/Ubuntu: ``apt-get install fonts-noto-cjk``)::

    .venv/bin/python -m kvlab.font_subset /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc

``tests/traffic/test_plot_fonts.py`` fails, naming the missing characters, until it is done.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CJK_FAMILY", "CJK_FONT", "CJK_MANIFEST", "CJK_SOURCE_FAMILY"]

CJK_FONT = Path(__file__).resolve().with_name("kvlab-cjk.otf")
"""The CJK subset (OpenType, CFF outlines)."""

CJK_MANIFEST = CJK_FONT.with_suffix(".json")
"""What the subset was made from: source family, version and sha256, the characters."""

CJK_FAMILY = "kvlab CJK"
"""The subset's family name (matplotlib's ``font.family``)."""

CJK_SOURCE_FAMILY = "Noto Sans CJK SC"
"""The font the subset is cut from."""
