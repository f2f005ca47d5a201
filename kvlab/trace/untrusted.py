"""Strings that come from a file are shown as text: never as terminal controls, markup or a wall.

A trace, a KV-event recording or a workload made by someone else carries strings kvlab prints:
request ids, call names, config values (model and spec names), titles. ``shown`` is the one
form they take on every surface (terminal views, the CLI, reports, explanations, event lines;
the player's JavaScript has the same function, ``shown`` in kvlab/viz/static/i18n.js):

* control characters (C0, DEL, C1: ANSI escape sequences start with ``\\x1b``), the Unicode
  bidi and format controls that reorder or hide text (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066..9
  isolates, zero-width characters, U+2028/9 line breaks) and lone surrogates (which no terminal
  encoding can write) become visible escapes: ``\\x1b``, ``\\u202e``;
* text longer than ``limit`` characters is cut, with the full length said: a 1 MB request id
  costs one line.

HTML surfaces escape on top of this (``html.escape``, or DOM text nodes in the player); rich
``Text`` objects never interpret markup, so ``shown`` text is safe in them as is.

Examples:
    >>> shown("req-\\x1b[2J\\u202eevil")
    'req-\\\\x1b[2J\\\\u202eevil'
    >>> shown("x" * 1000, limit=8)
    'xxxxxxxx… (1000 characters)'
"""

from __future__ import annotations

import re

__all__ = ["UNSAFE", "shown"]

UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)
"""The characters ``shown`` escapes (a string without them prints as itself)."""


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, limit: int = 120) -> str:
    """``text`` as it may be printed: controls escaped, at most ``limit`` characters kept.

    Args:
        text: Any value (not a str: its ``str``).
        limit: Characters kept before the cut (the escapes may lengthen what is kept).

    Returns:
        The display form (equal to ``text`` when it is short and holds nothing unsafe).
    """
    s = text if isinstance(text, str) else str(text)
    n = len(s)
    if n > limit:
        s = s[:limit]
    s = UNSAFE.sub(_escape, s)
    return f"{s}… ({n} characters)" if n > limit else s
