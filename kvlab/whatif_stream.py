"""``kvlab whatif --stream``: a Mooncake trace too big to hold, replayed one request at a time.

``kvlab whatif`` reads its trace whole; a Mooncake file that would need more than
``kvlab.traffic.mooncake.MAX_READ_MEMORY`` to hold is refused before anything is read
(``refuse_if_too_big``: how much it would need, and the two ways on). ``--stream`` replays it
through ``kvlab.traffic.stream.sweep_mooncake_stream`` instead: vLLM's and SGLang's caches on
the sequence clock, the infinite cache beside them, in memory bounded by the caches' capacity
and the trace's distinct hash ids (benchmarks/results/mooncake_scale.md: 1.2 M requests). What
needs the whole request list (the prefix list, one request explained, a saved run, a model's
pool, replicas, the HTML report, the other caches and clocks) is refused with --stream, naming
the flag, before any work.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kvlab.i18n import _

__all__ = ["refuse_if_too_big", "run_stream"]


def refuse_if_too_big(trace: Path, fmt: str, limit: int | None) -> None:
    """Exit 1, before reading, for a Mooncake trace too big to hold whole.

    Raises:
        click.ClickException: Saying how much memory reading it would take, the limit, and
            the ways on (--stream, --limit).
    """
    from kvlab.traffic import mooncake

    need = trace.stat().st_size * mooncake.READ_BYTES_PER_FILE_BYTE
    if fmt == "mooncake" and limit is None and need > mooncake.MAX_READ_MEMORY:
        raise click.ClickException(_(
            "{trace}: reading this trace whole would take about {need} GiB of memory, over "
            "the {allowed} GiB kvlab allows; add --stream to replay it one request at a time in "
            "bounded memory (caches vllm and radix), or --limit N for its first N requests"
        ).format(trace=trace, need=f"{need / 2**30:.1f}",
                 allowed=f"{mooncake.MAX_READ_MEMORY / 2**30:.1f}"))  # fmt: skip


_WHOLE_LIST = {"top_prefixes": ("--top-prefixes", None), "trace_at": ("--trace-at", None),
               "explain_index": ("--explain", None), "save_trace_to": ("--save", None),
               "model_config": ("--model-config", None), "policies": ("--policies", ""),
               "warmup": ("--warmup", 0.0), "max_model_len": ("--max-model-len", None),
               "replicas": ("--replicas", 1), "html_out": ("--html", None)}  # fmt: skip
"""whatif's options that need the whole request list: param name -> (flag, its default)."""


def run_stream(params: dict[str, Any], names: list[str], caps: list[int], sizes: list[int],
               print_table: Callable, write_outputs: Callable) -> None:  # fmt: skip
    """``kvlab whatif --stream``: check what it can do, replay, print the table, write the files.

    Args:
        params: The command's parameters (click's ``ctx.params``), already checked one by one.
        names: The caches asked for (canonical names).
        caps: Capacities (tokens); sizes: block sizes (tokens).
        print_table, write_outputs: whatif's own (the same table and files as without --stream).

    Raises:
        click.BadParameter, click.UsageError: Before any work (exit 2).
        click.ClickException: A bad line of the trace, naming it (exit 1).
    """
    from kvlab.traffic import sweep_rows
    from kvlab.traffic.stream import sweep_mooncake_stream

    trace, fmt, clock = params["trace"], params["fmt"], params["clock"]
    if fmt != "mooncake":
        raise click.BadParameter(_("--stream reads Mooncake traces only, got --format {format}; "
                                   "allowed: mooncake").format(format=fmt), param_hint="--format")
    if clock != "sequence":
        raise click.BadParameter(_("--stream replays on the sequence clock only, got {clock}; "
                                   "allowed: sequence").format(clock=repr(clock)),
                                 param_hint="--clock")  # fmt: skip
    bad = [n for n in names if n not in ("vllm", "radix", "infinite")]
    if bad:
        raise click.BadParameter(_("{cache} cannot be streamed; allowed with --stream: vllm, "
                                   "radix (infinite is added)").format(cache=bad[0]),
                                 param_hint="--caches")  # fmt: skip
    given = [flag for key, (flag, unset) in _WHOLE_LIST.items() if params.get(key, unset) != unset]
    if given:
        raise click.UsageError(_("--stream keeps no request list, which {options} need; run "
                                 "them without --stream, with --limit N").format(
                                     options=", ".join(given)))  # fmt: skip
    try:
        num, results = sweep_mooncake_stream(trace, [n for n in names if n != "infinite"], caps,
                                             sizes, params.get("limit"),
                                             progress=False if params.get("no_progress") else None)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    heading = _("{trace}: {requests} requests, block size {block_sizes}").format(
        trace=trace.name, requests=f"{num:,}", block_sizes=", ".join(str(bs) for bs in sizes))
    rows = sweep_rows(results)
    print_table(heading, rows)
    write_outputs(rows, heading, params.get("json_out"), params.get("svg"), params.get("png"), [])
