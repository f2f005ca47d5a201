"""``kvlab whatif``'s larger questions: a model in bytes, a fleet of replicas, where to run.

Called by ``kvlab.whatif_cli.whatif`` after its flags are checked:

* ``--model-config`` (+ ``--kv-cache-memory`` / ``--gpu-memory`` ...): ``model_rows`` sizes the
  model at each budget (``kvlab.traffic.sizing``) and replays it (``sweep_models``); the table
  shows the blocks each budget buys.
* ``--replicas N --routing ...``: ``fleet_rows`` (``sweep_fleet``); the table shows each
  routing's hit rate, load imbalance and the hits lost to routing.
* ``--jobs`` / ``--dask-scheduler``: ``executor`` (local processes or a Dask client).

``print_table`` prints every table of the command whole: numbers are never cut short.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import click

from kvlab.i18n import N_, _

__all__ = ["executor", "fleet_rows", "model_rows", "parse_sizes", "print_fleet", "print_models",
           "print_table"]  # fmt: skip


def print_table(table: Any) -> None:
    """Print a rich Table with no number cut short.

    Into a file or a pipe the table keeps its natural width (rich would squeeze it to 80
    columns and cut numbers to "1,000,0…"); on a terminal it gets the terminal's width, and a
    number that does not fit its column folds onto the next line (the columns are made with
    ``overflow="fold"``).
    """
    import io

    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # NOTE: measured on a console wide enough not to clamp it
        natural = Console(width=10_000, file=io.StringIO()).measure(table).maximum
        console = Console(highlight=False, width=max(console.width, natural))
    console.print(table)


def parse_sizes(text: str | None, option: str) -> list[int]:
    """``16GiB,40GiB`` -> bytes; click.BadParameter naming the option otherwise."""
    from kvlab.traffic.sizing import parse_bytes

    if text is None:
        return []
    try:
        return [parse_bytes(part) for part in text.split(",")]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


@contextmanager
def executor(jobs: int, dask_scheduler: str | None):
    """(jobs, Dask client or None) for the sweep; the client is closed afterwards."""
    if dask_scheduler is None:
        yield None
        return
    from kvlab.traffic.parallel import dask_client

    try:
        client = dask_client(dask_scheduler, jobs)
    except ImportError:
        from kvlab.cli_hints import install_hint

        raise click.UsageError(_("--dask-scheduler needs dask.distributed (the cluster "
                                 "extra), which is not installed: {hint}").format(
                                     hint=install_hint("cluster"))) from None
    except OSError as exc:
        raise click.ClickException(_("cannot reach the Dask scheduler {address}: {problem}"
                                     ).format(address=dask_scheduler, problem=exc)) from None
    try:
        yield client
    finally:
        cluster = getattr(client, "cluster", None)
        client.close()
        if cluster is not None and dask_scheduler == "local":
            cluster.close()


def model_rows(reqs: list, cfg: dict, budgets: list[int], warmup: float, jobs: int,
               client: Any, max_model_len: int | None, block_size: int | None,
               progress: bool | None) -> list[dict]:  # fmt: skip
    """Rows of the model at each budget (``sweep_models``); a budget too small is an error
    naming what fits."""
    from kvlab.traffic.sweep import sweep_models, sweep_rows

    try:
        results = sweep_models(reqs, cfg, budgets, warmup=warmup, jobs=jobs, client=client,
                               max_model_len=max_model_len, block_size=block_size,
                               progress=progress)  # fmt: skip
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    rows = sweep_rows(results)
    for row in rows:
        row.setdefault("model", cfg["_name"])
    return rows


def fleet_rows(reqs: list, replicas: int, routings: list[str], caps: list[int], block_size: int,
               warmup: float, jobs: int, client: Any, max_model_len: int | None, seed: int,
               progress: bool | None) -> list[dict]:  # fmt: skip
    """Rows of every routing at every capacity per replica (``sweep_fleet``)."""
    from kvlab.traffic.sweep import sweep_fleet, sweep_rows

    try:
        results = sweep_fleet(reqs, replicas, routings, caps, block_size, warmup=warmup,
                              jobs=jobs, client=client, max_model_len=max_model_len,
                              seed=seed, progress=progress)  # fmt: skip
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    return sweep_rows(results)


def print_models(title: str, rows: list[dict]) -> None:
    """The model table: budget, blocks, block size, groups, hit rate."""
    from rich.table import Table

    table = Table(title=title)
    cols = (N_("model"), N_("KV cache (GiB)"), N_("blocks"), N_("block size"), N_("groups"),
            N_("hit rate"), N_("hit tokens"), N_("evicted blocks"), N_("rejected"))  # fmt: skip
    for col in cols:
        if col == "model":  # NOTE: whole model names even at 80 columns
            table.add_column(_(col), justify="left", no_wrap=True,
                             min_width=max(len(str(r.get("model", ""))) for r in rows))
        else:
            table.add_column(_(col), justify="right", overflow="fold")
    for r in rows:
        if r["cache"] == "infinite":
            table.add_row(_("infinite cache"), "∞", "∞", str(r["block_size"]), "",
                          f"{r['hit_rate']:.3f}", f"{r['hit_tokens']:,}", "", "")  # fmt: skip
            continue
        table.add_row(r["model"], f"{r['kv_cache_memory_bytes'] / 2**30:.2f}",
                      f"{r['num_gpu_blocks']:,}", str(r["block_size"]),
                      str(r["kv_cache_groups"]), f"{r['hit_rate']:.3f}", f"{r['hit_tokens']:,}",
                      f"{r['evicted_blocks']:,}", f"{r['rejected']:,}")  # fmt: skip
    print_table(table)


def print_fleet(title: str, rows: list[dict]) -> None:
    """The fleet table: routing, capacity per replica, hit rate, balance, lost to routing."""
    from rich.table import Table

    table = Table(title=title)
    cols = (N_("routing"), N_("replicas"), N_("capacity per replica (tokens)"), N_("hit rate"),
            N_("one pool of all replicas"), N_("hits lost to routing"),
            N_("busiest / mean load"))  # fmt: skip
    for col in cols:
        if col == "routing":  # NOTE: whole routing names (least-loaded) even at 80 columns
            table.add_column(_(col), justify="left", no_wrap=True,
                             min_width=max(len(r["routing"]) for r in rows))
        else:
            table.add_column(_(col), justify="right", overflow="fold")
    for r in rows:
        pooled = r["pooled_hit_tokens"] / r["prompt_tokens"] if r["prompt_tokens"] else 0.0
        table.add_row(r["routing"], str(r["replicas"]), f"{r['capacity_tokens']:,}",
                      f"{r['hit_rate']:.3f}", f"{pooled:.3f}",
                      f"{r['hits_lost_to_routing']:,}", f"{r['load_imbalance']:.2f}")  # fmt: skip
    print_table(table)
