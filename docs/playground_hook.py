"""mkdocs hook of the Playground page: the playground's folder inside the site, and its frame.

* ``on_page_content``: on ``playground.md`` (both languages), the placeholder
  ``<div class="kvlab-playground-frame"></div>`` becomes an iframe on
  ``assets/playground/index.html`` (``?lang=zh`` on the Chinese side), the same page that
  ``kvlab playground`` writes; the app reads the parent page's ``?preset=`` and ``#s=`` and
  reports its height so the frame grows with it.
* ``on_post_build``: writes that folder to ``<site>/assets/playground/``
  (``kvlab.playground.build_playground``, Pyodide and cbor2 from the vendor cache, fetched with
  npm / pip if missing); once, on the English build (the Chinese side shares it).
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.utils import get_relative_url

log = logging.getLogger("mkdocs.plugins.kvlab.playground")

APP = "assets/playground/index.html"
PLACEHOLDER = '<div class="kvlab-playground-frame"></div>'
FRAME = (
    '<iframe class="kvlab-playground" src="{src}" title="kvlab playground" loading="eager" '
    'style="width:100%;height:2200px;border:1px solid #c8c8c8;border-radius:8px"></iframe>\n'
    "<script>addEventListener('message', (e) => {{"
    " const h = e.data && e.data.kvlabPlaygroundHeight;"
    " if (h) document.querySelector('iframe.kvlab-playground').style.height = `${{h + 24}}px`; }});"
    "</script>"
)


def _language(config) -> str:
    return config.theme.get("language") or "en"


def on_page_content(html: str, page, config, files) -> str:
    """Put the playground's iframe where the page asks for it."""
    if PLACEHOLDER not in html:
        return html
    src = get_relative_url(APP, page.url)
    if _language(config) != "en":
        src += f"?lang={_language(config)}"
    return html.replace(PLACEHOLDER, FRAME.format(src=src))


def on_post_build(config) -> None:
    """Write the playground folder into the site (English build only: one copy serves both)."""
    if _language(config) != "en":
        return
    from kvlab.playground.build import build_playground
    from kvlab.playground.vendor import VendorError

    out = Path(config.site_dir) / Path(APP).parent
    try:
        report = build_playground(out)
    except VendorError as exc:
        log.error("the Playground page needs its files: %s", exc)
        return
    log.info(
        "playground: %d files, %.1f MB in %s", len(report.sizes), report.total_bytes / 1e6, out
    )
