"""Execute kvlab's notebooks in place, storing their outputs and widget state.

The tutorial site (mkdocs-jupyter, ``execute: false``) renders the stored outputs, and the
players in them step with no kernel, so re-run this after editing a notebook::

    .venv/bin/python tests/notebooks/run_notebooks.py            # all notebooks
    .venv/bin/python tests/notebooks/run_notebooks.py 03 07      # the ones starting 03_, 07_
    .venv/bin/python tests/notebooks/run_notebooks.py zh/03      # the Chinese 03 (zh/ = all Chinese)

"All notebooks" includes the Chinese ones (notebooks/zh/, kept in step by zh_sync.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nbrun import NOTEBOOK_DIR, execute, notebook_paths
from zh_sync import zh_notebook_paths


def main(argv: list[str]) -> int:
    """Execute the selected notebooks (all when ``argv`` is empty); returns an exit status."""
    every = notebook_paths() + zh_notebook_paths()
    names = {p: p.relative_to(NOTEBOOK_DIR).as_posix() for p in every}
    paths = [p for p in every if not argv or any(names[p].startswith(a) for a in argv)]
    if not paths:
        print(f"no notebook matches {argv}", file=sys.stderr)
        return 2
    for path in paths:
        nb, seconds = execute(path)
        nbformat.write(nb, path)
        print(f"{names[path]}: {len(nb.cells)} cells, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
