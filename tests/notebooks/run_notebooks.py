"""Execute kvlab's notebooks in place, storing their outputs and widget state.

The tutorial site (mkdocs-jupyter, ``execute: false``) renders the stored outputs, and the
players in them step with no kernel, so re-run this after editing a notebook::

    .venv/bin/python tests/notebooks/run_notebooks.py            # all notebooks
    .venv/bin/python tests/notebooks/run_notebooks.py 03 07      # the ones starting 03_, 07_
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nbrun import execute, notebook_paths


def main(argv: list[str]) -> int:
    """Execute the selected notebooks (all when ``argv`` is empty); returns an exit status."""
    paths = [p for p in notebook_paths() if not argv or any(p.name.startswith(a) for a in argv)]
    if not paths:
        print(f"no notebook matches {argv}", file=sys.stderr)
        return 2
    for path in paths:
        nb, seconds = execute(path)
        nbformat.write(nb, path)
        print(f"{path.name}: {len(nb.cells)} cells, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
