"""``kvlab labs``: list the labs, grade a class's submissions, write an instructor's answer key.

    kvlab labs list
    kvlab labs grade SUBMISSION.ipynb... --json OUT.json [--time-limit 10]
    kvlab labs solve NOTEBOOK.ipynb -o SOLVED.ipynb

``grade`` runs each submission headless (``kvlab.labs.grade``) and prints one row per
submission and lab (scenarios passed / total, the mistake recognised); ``--json`` writes the
table (written atomically). ``solve`` fills a lab notebook's solution regions with the reference
solution (``kvlab.labs.solutions``), for instructors; learners' notebooks never import it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import click

from kvlab.cli_i18n import KvlabGroup, lang_option
from kvlab.i18n import N_, _

__all__ = ["labs"]


@click.group(cls=KvlabGroup, short_help=N_("Build vLLM's KV-cache pieces, graded against vLLM."),
             help=N_("Build-it labs: write vLLM's KV-cache pieces, graded against vLLM's "
                     "decisions."))
@lang_option
def labs() -> None:
    """``kvlab labs`` (its help is the decorator's)."""


@labs.command("list", help=N_("The labs, their notebooks and what to read first."))
@lang_option
def list_labs() -> None:
    """``kvlab labs list`` (its help is the decorator's)."""
    from rich.console import Console
    from rich.table import Table

    from kvlab.labs import LABS, lab

    table = Table(title=_("kvlab labs"))
    for header in (_("lab"), _("notebook"), _("you build"), _("read first")):
        table.add_column(header)
    for name in LABS:
        info = lab(name)
        table.add_row(name, f"notebooks/labs/{info.notebook}.ipynb", _(info.title),
                      ", ".join(n[:2] for n in info.after))  # fmt: skip
    Console(highlight=False, width=120).print(table)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@labs.command("grade", help=N_("Run SUBMISSIONS (lab notebooks) headless and print their scores."))
@lang_option
@click.argument("submissions", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=N_("Write the score table as JSON here."))
@click.option("--time-limit", type=click.FloatRange(0.1, 600), default=10.0, show_default=True,
              help=N_("Time limit per scenario (seconds)."))
@click.option("--notebook-timeout", type=click.FloatRange(1, 7200), default=600.0, show_default=True,
              help=N_("Time limit per notebook (seconds)."))
def grade(submissions: tuple[Path, ...], json_out: Path | None, time_limit: float, notebook_timeout: float) -> None:
    """``kvlab labs grade`` (its help is the decorator's)."""
    from rich.console import Console
    from rich.table import Table

    try:
        from kvlab.labs.grade import grade_notebooks
    except ImportError as exc:  # pragma: no cover - nbclient missing
        raise click.ClickException(_("grading needs nbclient and nbformat (pip install "
                                     "'kvlab[lab]'): {problem}").format(problem=exc)) from exc
    table_data = grade_notebooks(submissions, time_limit, notebook_timeout)
    table = Table(title=_("lab scores"))
    for header in (_("notebook"), _("lab"), _("scenarios"), _("status"), _("mistake recognised")):
        table.add_column(header, overflow="fold")
    for sub in table_data["submissions"]:
        if not sub["results"]:
            table.add_row(sub["notebook"], "-", "-", sub["status"] if sub["status"] != "ok" else _("no check ran"), "-")
        for name, rec in sub["results"].items():
            table.add_row(sub["notebook"], name, f"{rec['scenarios_passed']}/{rec['scenarios_total']}",
                          rec["status"], rec["misconception"] or "-")  # fmt: skip
    Console(highlight=False, width=140).print(table)
    if json_out is not None:
        _write_atomic(json_out, json.dumps(table_data, indent=1, ensure_ascii=False) + "\n")


@labs.command("solve", help=N_(
    "Write NOTEBOOK with its solution regions filled by the reference (an answer key)."))
@lang_option
@click.argument("notebook", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help=N_("Where to write the solved notebook."))
def solve(notebook: Path, out: Path) -> None:
    """``kvlab labs solve`` (its help is the decorator's)."""
    import nbformat

    from kvlab.labs.solutions import cell_sources, fill

    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    checks = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    found = re.search(r'check\("(\w+)"', checks[0]) if checks else None
    if found is None:
        raise click.ClickException(_("{notebook}: no check cell, so no lab to solve").format(
            notebook=notebook))
    solved = cell_sources(found.group(1))
    if len(solved) != len(cells):
        raise click.ClickException(_("{notebook}: {n} solution cells; the reference has {m}").format(
            notebook=notebook, n=len(cells), m=len(solved)))
    for cell, src in zip(cells, solved):
        try:
            cell.source = fill(cell.source, src)
        except ValueError as exc:
            raise click.ClickException(f"{notebook}: {exc}") from exc
    _write_atomic(out, nbformat.writes(nb))
    click.echo(_("wrote {path}").format(path=out))
