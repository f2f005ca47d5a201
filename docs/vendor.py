"""Vendor the three JavaScript files the site's widgets need, so pages play offline.

nbconvert / mkdocs-jupyter pages render Jupyter widgets with require.js and the widget manager
``@jupyter-widgets/html-manager`` (its ``embed-amd.js``), which loads the ``anywidget`` AMD
module for kvlab's TracePlayer. This script fetches the pinned npm packages with ``npm pack``
(run it at development time, with network access to the npm registry; the result is committed),
copies the needed files under ``docs/assets/vendor/`` and records their SHA-256 in
``docs/assets/vendor/VENDORED.txt`` (tests/docs/test_site.py checks them)::

    python docs/vendor.py
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VENDOR_DIR = Path(__file__).resolve().parent / "assets" / "vendor"
PACKAGES = {
    # npm spec: [(path in the package tarball, path under docs/assets/vendor)], licence
    "requirejs@2.3.8": ([("package/require.js", "requirejs/require.js")], "MIT"),
    "@jupyter-widgets/html-manager@1.0.15": (
        [("package/dist/embed-amd.js", "html-manager/embed-amd.js")], "BSD-3-Clause"),
    "anywidget@0.11.0": ([("package/dist/index.js", "anywidget/index.js"),
                          ("package/LICENSE", "anywidget/LICENSE")], "MIT"),
}  # fmt: skip
MANIFEST = VENDOR_DIR / "VENDORED.txt"


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest() -> dict[str, str]:
    """``relative path -> sha256`` of the vendored files, from VENDORED.txt."""
    entries = {}
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2 and len(parts[0]) == 64:
            entries[parts[1]] = parts[0]
    return entries


def main() -> int:
    """npm pack each package, copy its files, write the manifest; returns an exit status."""
    if shutil.which("npm") is None:
        print("npm is needed to vendor the widget assets", file=sys.stderr)
        return 1
    lines = [
        "# Files vendored by docs/vendor.py (npm pack); sha256 and path under this folder.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for spec, (files, licence) in PACKAGES.items():
            name = (
                subprocess.run(
                    ["npm", "pack", spec, "--silent"],
                    cwd=tmp,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            with tarfile.open(Path(tmp) / name) as tar:
                for member, target in files:
                    dest = VENDOR_DIR / target
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    if source is None:
                        raise FileNotFoundError(f"{member} not in {name}")
                    dest.write_bytes(source.read())
            lines.append(
                f"# {spec} ({licence}), https://www.npmjs.com/package/{spec.rsplit('@', 1)[0]}"
            )
            lines += [f"{sha256(VENDOR_DIR / target)}  {target}" for _, target in files]
    MANIFEST.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(MANIFEST.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
