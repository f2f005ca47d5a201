"""kvlab's languages: English (the source strings) and Simplified Chinese (``zh``).

Translations are standard gettext catalogues, written and compiled with Babel:
``kvlab/locale/kvlab.pot`` (the template extracted from the source), ``kvlab/locale/zh/
LC_MESSAGES/kvlab.po`` (the Chinese catalogue, edited by translators) and its compiled ``.mo``
(read at run time by the standard library's :mod:`gettext`). ``docs/how-to/translate.md`` gives
the three commands that keep them in step; a test fails when they drift.

User-facing text (views, captions, explanations, CLI messages) is marked with :func:`_` and
rendered in the *current* language: the one set by :func:`use_language` (a context, so nested
views agree), else the environment's default (:func:`default_language`). vLLM's identifiers
(block_id, ref_cnt, allocate_slots ...) are never translated.

Examples:
    >>> from kvlab.i18n import _, use_language
    >>> with use_language("zh"):
    ...     _("free queue")
    '空闲队列'
    >>> _("free queue")
    'free queue'
"""

from __future__ import annotations

import contextvars
import functools
import gettext
import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = [
    "DOMAIN",
    "LANGUAGES",
    "LOCALE_DIR",
    "N_",
    "_",
    "check_language",
    "default_language",
    "language",
    "ngettext",
    "translations",
    "use_language",
    "with_language",
]

LANGUAGES = ("en", "zh")
"""The languages kvlab speaks: ``en`` (source strings) and ``zh`` (Simplified Chinese)."""

DOMAIN = "kvlab"
"""The gettext domain of kvlab's catalogues."""

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
"""Where the catalogues live: ``LOCALE_DIR/<lang>/LC_MESSAGES/kvlab.{po,mo}``."""

_ALIASES = {"en": "en", "c": "en", "posix": "en", "zh": "zh", "zh-cn": "zh", "zh-hans": "zh",
            "zh-sg": "zh", "zh-hans-cn": "zh"}  # fmt: skip

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kvlab_language", default=None
)


def check_language(lang: str) -> str:
    """Normalise a language tag to one of LANGUAGES.

    Accepts ``en``/``zh`` and the usual spellings of Simplified Chinese and English
    (``zh_CN.UTF-8``, ``zh-Hans``, ``en_US``, ``C``), case-insensitively.

    Raises:
        ValueError: For any other tag (Traditional Chinese ``zh_TW``/``zh-Hant`` included: kvlab
            has no Traditional catalogue), naming the languages allowed.
    """
    if not isinstance(lang, str):
        raise ValueError(
            f"a language must be a string, one of {', '.join(LANGUAGES)}; got {lang!r}"
        )
    tag = lang.split(".")[0].split("@")[0].replace("_", "-").lower()
    if tag in _ALIASES:
        return _ALIASES[tag]
    if tag.startswith("en-"):
        return "en"
    raise ValueError(
        f"unknown language {lang!r}: kvlab speaks {', '.join(LANGUAGES)} "
        "(en = English, zh = Simplified Chinese; e.g. zh_CN.UTF-8 reads as zh)"
    )


def default_language(environ: Mapping[str, str] | None = None) -> str:
    """The language the environment asks for: ``KVLAB_LANG``, else gettext's own order
    (``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``, ``LANG``; the first set one decides).

    A Chinese locale (``zh_CN.UTF-8`` ...) gives ``zh``; anything else kvlab has no catalogue for
    gives ``en``. An invalid ``KVLAB_LANG`` raises ValueError (it is kvlab's own setting).
    """
    env = os.environ if environ is None else environ
    if env.get("KVLAB_LANG"):
        return check_language(env["KVLAB_LANG"])
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(var)
        if value:
            first = value.split(":")[0]
            try:
                return check_language(first)
            except ValueError:
                return "en"
    return "en"


@functools.cache
def translations(lang: str) -> gettext.NullTranslations:
    """The gettext translations of ``lang`` (English: the identity).

    Raises:
        ValueError: For a language not in LANGUAGES.
        FileNotFoundError: If the compiled catalogue of ``lang`` is missing from the install.
    """
    lang = check_language(lang)
    if lang == "en":
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[lang])


def language() -> str:
    """The current language: set by use_language, else default_language()."""
    current = _current.get()
    return current if current is not None else default_language()


class use_language:  # noqa: N801 - used as a function: ``with use_language("zh"):``
    """Render in ``lang`` inside the ``with`` block (None = keep the current language).

    ``as`` gives the language in force. Raises ValueError for an unknown language (before
    anything changes). A plain context manager, not a generator: a block entered but never
    left (click keeps a ``--lang`` scope open when parsing fails) changes nothing when it is
    garbage collected later, whatever language is current then.
    """

    def __init__(self, lang: str | None) -> None:
        self._lang = None if lang is None else check_language(lang)
        self._token: contextvars.Token[str | None] | None = None

    def __enter__(self) -> str:
        if self._lang is None:
            return language()
        self._token = _current.set(self._lang)
        return self._lang

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None


def _(message: str) -> str:
    """``message`` in the current language (the English source when it is ``en``)."""
    return translations(language()).gettext(message)


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it now (for constants; translate
    with :func:`_` where it is shown)."""
    return message


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for ``n`` in the current language (Chinese has one form)."""
    return translations(language()).ngettext(singular, plural, n)


def with_language(fn: _F) -> _F:
    """Give a renderer a keyword-only ``lang`` argument (``"en"``, ``"zh"``, a locale tag, or
    None = the current language, see :func:`language`): the call runs inside
    ``use_language(lang)``, so every string it and the views it calls produce is in ``lang``.

    Raises (from the wrapped call): ValueError for an unknown ``lang``, before anything renders.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, lang: str | None = None, **kwargs: Any) -> Any:
        with use_language(lang):
            return fn(*args, **kwargs)

    sig = inspect.signature(fn)
    param = inspect.Parameter("lang", inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation="str | None")  # fmt: skip
    params = list(sig.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        params.insert(len(params) - 1, param)
    else:
        params.append(param)
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
