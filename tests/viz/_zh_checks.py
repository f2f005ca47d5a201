"""Checks of a Chinese render against the English render of the same view (issue #11).

* ``english_left(zh)``: the English source phrases of kvlab's catalogue still in a zh render.
  A phrase is a literal piece of a msgid between its {placeholders} that holds at least two
  English words (single words such as "free" or "group" are also vLLM identifiers, e.g.
  ``name=free``, so they are not scanned) with a space between them, at most punctuation beside
  it (a piece of code such as ``req_to_blocks[request][group][i] = null_block`` is written the
  same in every language).
* ``numbers(text)``: every number in a render, as a multiset (Chinese word order may move them).
* ``identifiers(text)``: every snake_case identifier (block_id, ref_cnt ...).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

from babel.messages.pofile import read_po

from kvlab.i18n import LOCALE_DIR

_PLACEHOLDER = re.compile(r"\{[a-z_]*\}")
_TWO_WORDS = re.compile(r"[A-Za-z]{2,}[,;:!?)\]·]*\s+[·(\[]*\s*[A-Za-z]{2,}")


@cache
def english_phrases() -> tuple[str, ...]:
    """The English phrases of the catalogue's messages (see the module docstring)."""
    with (LOCALE_DIR / "kvlab.pot").open("rb") as f:
        pot = read_po(f)
    phrases: set[str] = set()
    for m in pot:
        if not m.id:
            continue
        for msgid in [m.id] if isinstance(m.id, str) else list(m.id):
            for piece in _PLACEHOLDER.split(msgid):
                piece = piece.strip(" ·:;,.")
                if _TWO_WORDS.search(piece):  # code (f(x)[i], a = b) stays English
                    phrases.add(piece)
    return tuple(sorted(phrases))


def english_left(text: str) -> list[str]:
    """The catalogue's English phrases found in ``text`` (whitespace-normalised)."""
    flat = _COMMAND.sub(" ", " ".join(text.split()))  # a shell command to type stays English
    return [p for p in english_phrases() if " ".join(p.split()) in flat]


_COMMAND = re.compile(r"\bkvlab (?:trace (?:show|info)|demo|generate|compare|whatif|slides|lab|figures)"
                      r"\b[^·。，；\n]*")  # fmt: skip


def numbers(text: str) -> Counter[str]:
    """The multiset of numbers in ``text`` (digit runs not part of an identifier or hash)."""
    return Counter(re.findall(r"(?<![\w.])\d+(?![\w])", text))


def identifiers(text: str) -> set[str]:
    """The snake_case identifiers in ``text``."""
    return set(re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", text))
