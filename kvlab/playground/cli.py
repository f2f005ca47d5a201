"""``kvlab playground``: write the browser playground as a folder, and serve it on 127.0.0.1.

    kvlab playground [--out DIR] [--serve] [--port N] [--no-fetch]

The folder (``kvlab.playground.build``) is what the site's Playground page shows: copy it to a
USB stick or any static host. Browsers run Pyodide only on pages served over http(s), so
``--serve`` serves it (on 127.0.0.1 only) until Ctrl+C. Pyodide and the cbor2 wheel come from
the vendor cache (``kvlab.playground.vendor``), fetched with npm / pip when missing unless
``--no-fetch``.
"""

from __future__ import annotations

import functools
import http.server
from pathlib import Path

import click

from kvlab.cli_i18n import KvlabCommand
from kvlab.i18n import N_, _

__all__ = ["playground", "serve"]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files with the MIME types Pyodide needs (module scripts, streaming wasm)."""

    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
    }

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's name
        """Quiet: the command prints its one line, not every request."""


def serve(folder: Path, port: int) -> http.server.ThreadingHTTPServer:
    """An HTTP server for ``folder`` on 127.0.0.1:``port`` (0 = any free port), not started.

    Raises:
        OSError: If the port is taken.
    """
    handler = functools.partial(_Handler, directory=str(folder))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


@click.command(cls=KvlabCommand, help=N_(
    "The browser playground (kvlab.core in Pyodide) as a folder.\n\n"
    "Writes the page the site's Playground shows, to copy to any static host or a USB stick; "
    "--serve serves it on 127.0.0.1 (browsers run it only from a web server)."))
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("kvlab-playground"),
    show_default=True,
    help=N_("Folder to write the playground to (created; its files are replaced)."),
)
@click.option(
    "--serve",
    "serve_it",
    is_flag=True,
    help=N_("Serve the folder on http://127.0.0.1:PORT/ until Ctrl+C."),
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help=N_("Port for --serve (0 = any free port)."),
)
@click.option(
    "--no-fetch",
    is_flag=True,
    help=N_("Do not fetch Pyodide / cbor2 when missing from the cache: fail instead."),
)
def playground(out: Path, serve_it: bool, port: int, no_fetch: bool) -> None:
    """``kvlab playground`` (its help is the decorator's)."""
    from kvlab.playground.build import build_playground
    from kvlab.playground.vendor import VendorError

    try:
        report = build_playground(out, fetch_missing=not no_fetch)
    except VendorError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise click.ClickException(
            _("cannot write {out}: {error}").format(out=out, error=exc)
        ) from exc
    click.echo(
        _("kvlab playground: wrote {n} files ({size}) to {out}").format(
            n=len(report.sizes), size=f"{report.total_bytes / 1e6:.1f} MB", out=out
        )
    )
    if not serve_it:
        click.echo(
            _(
                "Browsers run it only from a web server: kvlab playground --out {out} --serve"
            ).format(out=out)
        )
        return
    try:
        server = serve(out, port)
    except OSError as exc:
        raise click.ClickException(
            _("cannot serve on port {port} of 127.0.0.1: {error}").format(port=port, error=exc)
        ) from exc
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    click.echo(
        _("Serving {out} at {url} (Ctrl+C stops; {url}?lang=zh in Chinese)").format(
            out=out, url=url
        ),
        err=False,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
