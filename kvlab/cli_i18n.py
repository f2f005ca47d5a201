"""The ``kvlab`` command in the user's language: help pages, click's own words, error messages.

click reads its help texts when a command is *defined* and builds its own words ("Usage:",
"Options", "Error: ...", "... is not a valid integer.") with the standard library's gettext,
whose language is global. kvlab instead keeps every help text as its English source (marked
with ``N_`` so that Babel extracts it) and translates when a page or a message is *printed*:

* :class:`KvlabGroup` / :class:`KvlabCommand` use :class:`KvlabFormatter`, which translates the
  usage prefix, section headings, each help text and the ``[default: ...]`` notes through
  :func:`kvlab.i18n._`, and wraps Chinese by display width (two columns per character; a line
  never starts with closing punctuation);
* :meth:`KvlabGroup.main` finds ``--lang`` on the command line before click parses anything
  (so ``kvlab --help --lang zh`` and ``kvlab trace show --lang zh --help`` are Chinese too),
  runs the whole command in that language (else ``KVLAB_LANG``, else the locale), and prints
  click's errors through :func:`click_message`, which matches click's English sentences against
  :data:`CLICK_MESSAGES` and gives them in the current language.

kvlab's own messages are marked ``_("...")`` where they are raised, inside that language.

Examples:
    >>> from kvlab.i18n import use_language
    >>> with use_language("zh"):
    ...     click_message("Invalid value for '--blocks': 1 is not in the range x>=2.")
    "'--blocks' 的值无效：1 不在范围 x>=2 内。"
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from functools import cache
from typing import Any

import click
from rich.cells import cell_len

from kvlab.cli_checks import ErrorWrappingGroup
from kvlab.i18n import N_, _, check_language, default_language, ngettext, use_language

__all__ = ["CLICK_MESSAGES", "KvlabCommand", "KvlabContext", "KvlabFormatter", "KvlabGroup",
           "click_message", "lang_in_args", "lang_option", "show_error", "wrap"]

CLICK_MESSAGES = (
    N_("Usage:"),
    N_("Options"),
    N_("Commands"),
    N_("Positional arguments"),
    N_("Show this message and exit."),
    N_("Show the version and exit."),
    N_("required"),
    N_("default: {default}"),
    N_("Error: {message}"),
    N_("Try '{command} {option}' for help."),
    N_("Invalid value for {param_hint}: {message}"),
    N_("Invalid value: {message}"),
    N_("Missing argument {param_hint}."),
    N_("Missing option {param_hint}."),
    N_("Missing command."),
    N_("No such option {name}."),
    N_("No such command {name}."),
    N_("Option {name} requires an argument."),
    N_("Option {name} does not take a value."),
    N_("Got unexpected extra argument ({args})"),
    N_("Got unexpected extra arguments ({args})"),
    N_("{value} is not a valid integer."),
    N_("{value} is not a valid float."),
    N_("{value} is not a valid boolean. Recognized values: {states}"),
    N_("{value} is not in the range {range}."),
    N_("{value} is not one of {choices}."),
    N_("{value} is not {choice}."),
    N_("File {filename} does not exist."),
    N_("Directory {filename} does not exist."),
    N_("Path {filename} does not exist."),
    N_("File {filename} is a directory."),
    N_("Directory {filename} is a file."),
    N_("Aborted!"),
)  # fmt: skip
"""click's own words and sentences as click 8 prints them (a value's ``repr`` included in
``{value}``), as kvlab's catalogue messages. Placeholders match any text; one called
``message`` is translated again (``Invalid value for ...: {message}``)."""

_FIELD = re.compile(r"\{(\w+)\}")


@cache
def _patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """(regex, msgid) for each sentence of CLICK_MESSAGES: those wrapping a ``{message}`` first,
    then the most literal text first (so that ``{value} is not in the range {range}.`` is tried
    before ``{value} is not {choice}.``)."""
    out = []
    for msgid in CLICK_MESSAGES:
        parts = _FIELD.split(msgid)  # literal, field, literal, field, ...
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
        out.append((re.compile(regex, re.S), msgid))
    # NOTE: sentences that wrap another ({message}) first, then the most literal text first
    return tuple(sorted(out, key=lambda pm: ("{message}" not in pm[1],
                                             -len(_FIELD.sub("", pm[1])))))


def click_message(text: str) -> str:
    """``text`` (one of click's English sentences) in the current language; any other text is
    returned as it is. A ``{message}`` field is translated too."""
    for regex, msgid in _patterns():
        m = regex.fullmatch(text)
        if m is not None:
            fields = {k: click_message(v) if k == "message" else v for k, v in m.groupdict().items()}
            return _(msgid).format(**fields)
    return _(text)


def lang_in_args(args: Sequence[str]) -> str | None:
    """The language a command line asks for with ``--lang X`` / ``--lang=X`` (the last one, up to
    a ``--``), normalised; None if absent or invalid (the option itself then reports it)."""
    found = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--lang" and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith("--lang="):
            found = arg.split("=", 1)[1]
    try:
        return check_language(found) if found is not None else None
    except ValueError:
        return None


def _set_language(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--lang``: render in ``value`` until the command ends (None on the group = the
    environment's language; None on a command = what the group chose)."""
    if value is None:  # NOTE: KvlabGroup.main already runs in the environment's language
        if ctx.parent is None:
            try:
                default_language()
            except ValueError as exc:
                raise click.BadParameter(_("KVLAB_LANG: {problem}").format(problem=exc), ctx=ctx,
                                         param=param) from exc
        return None
    try:
        lang = check_language(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    ctx.with_resource(use_language(lang))
    return lang


lang_option = click.option(
    "--lang", default=None, metavar="en|zh", callback=_set_language, expose_value=False,
    is_eager=True, help=N_("Language of the output: en or zh (default: KVLAB_LANG, else the locale, "
                           "e.g. LANG=zh_CN.UTF-8 gives zh)."))
"""The ``--lang`` option of every kvlab command (the group's and each subcommand's)."""


# ------------------------------------------------------------------------------------ wrapping
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
_TOKEN = re.compile(rf"\[[^\[\]\n]*\]|[{_CJK}]|[^\s{_CJK}]+|\s+")
_NO_LINE_START = set("，。、；：？！）」』》〉”’…·")
_NO_LINE_END = set("（「『《〈“‘")
_HAS_CJK = re.compile(rf"[{_CJK}]")


def wrap(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> list[str]:
    """One paragraph wrapped to ``width`` display columns (a CJK character is two).

    A line may break between any two CJK characters and at whitespace, never inside a run of
    Latin letters or digits or a ``[...]`` note, never before closing punctuation (，。）」 ...)
    and never after opening punctuation (（「 ...): the character next to it moves down with
    it. A word wider than a line gets a line of its own.
    """
    lines: list[list[str]] = [[initial_indent]]
    spaced = False
    for tok in _TOKEN.findall(text):
        if tok.isspace():
            spaced = True
            continue
        line = lines[-1]
        piece = (" " if spaced and len(line) > 1 else "") + tok
        spaced = False
        if len(line) == 1 or cell_len("".join(line) + piece) <= width:
            line.append(piece)
            continue
        carry = []
        while len(line) > 2 and (tok[0] in _NO_LINE_START and not carry
                                 or line[-1].lstrip(" ")[-1:] in _NO_LINE_END):
            carry.insert(0, line.pop())
        lines.append([subsequent_indent, *(c.lstrip(" ") for c in carry), tok])
    return ["".join(line).rstrip() for line in lines]


def _wrap_paragraphs(text: str, width: int, indent: str) -> str:
    """Paragraphs (split at blank lines) wrapped to ``width``, each line indented."""
    paragraphs = [" ".join(p.split("\n")) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join("\n".join(wrap(p, width, indent, indent)) for p in paragraphs)


# ------------------------------------------------------------------------------------- formatter
def _help_text(text: str) -> str:
    """A help column in the current language: the help text, then click's ``[default: ...;
    required]`` notes, each translated."""
    m = re.fullmatch(r"(.*?)(?:^|  )\[([^\[\]]*)\]", text, re.S)
    if m is None:
        return _(text)
    notes = _("; ").join(click_message(note) for note in m.group(2).split("; "))
    body = _(m.group(1)) if m.group(1) else ""
    if not body:
        return f"[{notes}]"
    return f"{body}{'' if body.endswith('。') else '  '}[{notes}]"


class KvlabFormatter(click.HelpFormatter):
    """click's help formatter, translating as it writes (see the module docstring)."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        if prefix is None:
            prefix = _("Usage:")
            prefix += "" if prefix.endswith("：") else " "
        super().write_usage(prog, args, prefix)

    def write_heading(self, heading: str) -> None:
        heading = _(heading)
        colon = "：" if _HAS_CJK.search(heading) else ":"
        self.write(f"{'':>{self.current_indent}}{heading}{colon}\n")

    def write_text(self, text: str) -> None:
        text = _(text)
        if not _HAS_CJK.search(text):
            super().write_text(text)
            return
        self.write(_wrap_paragraphs(text, self.width, " " * self.current_indent) + "\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30,
                 col_spacing: int = 2) -> None:
        rows = [(first, _help_text(second)) for first, second in rows]
        if not any(_HAS_CJK.search(second) for _first, second in rows):
            super().write_dl(rows, col_max, col_spacing)
            return
        first_col = min(max(cell_len(first) for first, _second in rows), col_max) + col_spacing
        pad = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if cell_len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - cell_len(first)))
            else:
                self.write("\n" + pad)
            lines = wrap(second, max(self.width, cell_len(pad) + 10), pad, pad)
            self.write("\n".join([lines[0][len(pad):], *lines[1:]]) + "\n")


class KvlabContext(click.Context):
    """A click context whose help pages are written by :class:`KvlabFormatter`."""

    formatter_class = KvlabFormatter


def _short_help(command: click.Command, limit: int) -> str:
    """A command's line in its group's help: its short help, else its help's first sentence,
    in the current language."""
    if command.short_help:
        return _(command.short_help)
    text = _(command.help or "").strip()
    if _HAS_CJK.search(text):
        return text.split("\n\n")[0].split("。")[0] + "。"
    return click.Command.get_short_help_str(command, limit)


class KvlabCommand(click.Command):
    """A click command whose help is translated when it is shown."""

    context_class = KvlabContext

    def get_short_help_str(self, limit: int = 45) -> str:
        return _short_help(self, limit)


# ----------------------------------------------------------------------------------------- errors
def _possibilities(names: list[str]) -> str:
    joined = ", ".join(repr(p) for p in sorted(names))
    return ngettext("Did you mean {possibility}?", "(Did you mean one of: {possibilities}?)",
                    len(names)).format(possibility=joined, possibilities=joined)


def show_error(exc: click.ClickException, file: Any = None) -> None:
    """Print ``exc`` as click does (usage, a help hint, ``Error: ...``), in the current language."""
    file = file if file is not None else sys.stderr
    color = None
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        ctx = exc.ctx
        color = ctx.color
        hint = ""
        if ctx.command.get_help_option(ctx) is not None:
            option = max(ctx.command.get_help_option_names(ctx), key=len)
            hint = _("Try '{command} {option}' for help.").format(command=ctx.command_path,
                                                                 option=option) + "\n"
        click.echo(f"{ctx.get_usage()}\n{hint}", file=file, color=color)
    possible = getattr(exc, "possibilities", None)
    if isinstance(exc, (click.NoSuchOption, click.exceptions.NoSuchCommand)) and possible:
        first = click_message(exc.message)
        message = first + ("" if first.endswith("。") else " ") + _possibilities(possible)
    else:
        message = click_message(exc.format_message())
    click.echo(_("Error: {message}").format(message=message), file=file, color=color)


class KvlabGroup(ErrorWrappingGroup):
    """A click group whose commands speak the language of ``--lang`` (see the module docstring)
    and never end in a traceback (:class:`kvlab.cli_checks.ErrorWrappingGroup`).

    Subcommands defined with ``@group.command`` / ``@group.group`` are KvlabCommand /
    KvlabGroup. kvlab's commands return None: an int returned by ``main`` is an exit status.
    """

    context_class = KvlabContext
    command_class = KvlabCommand
    group_class = type  # a subgroup is of this group's class

    def get_short_help_str(self, limit: int = 45) -> str:
        return _short_help(self, limit)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        lang = lang_in_args(args)
        if lang is None:
            try:
                lang = default_language()
            except ValueError:  # a bad KVLAB_LANG: --lang's callback says so, in English
                lang = "en"
        with use_language(lang):
            if not standalone_mode:
                return super().main(args, prog_name, complete_var, False, **extra)
            try:
                rv = super().main(args, prog_name, complete_var, False, **extra)
            except click.ClickException as exc:
                show_error(exc)
                sys.exit(exc.exit_code)
            except click.Abort:
                click.echo(_("Aborted!"), file=sys.stderr)
                sys.exit(1)
            sys.exit(rv if isinstance(rv, int) else 0)
