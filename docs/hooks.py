"""mkdocs hooks of the kvlab site: the notebooks and figures, and widgets that work offline.

* ``on_files``: the figures (``figures/*.svg``) become ``figures/*.svg`` and the course notebooks
  (``notebooks/NN_*.ipynb``) ``tutorials/NN_*.ipynb`` pages, read from where they live in the
  repository (no copies under docs/). The site is built once per language by
  mkdocs-static-i18n (English at ``/``, Chinese at ``/zh/``); the notebooks are added after the
  plugin has sorted the docs/ files by language, so that each language gets its own: on the
  Chinese side ``notebooks/zh/NN_*.ipynb`` where it exists, else the English notebook under a
  visible 「本节尚未翻译」 note. mkdocs-jupyter then renders them from their stored outputs.
* ``on_nav``: hands mkdocs-jupyter the notebooks' source paths (see the function).
* ``on_page_content``: a notebook's code cells are left out of the search index (a search hit
  shows the prose, not a raw code cell); on the Chinese side, a page shown in English (an
  untranslated notebook, a page without a ``.zh.md`` version) says so at its top.
* ``on_page_markdown``: counts the course states (``<!-- kvlab:count notebooks -->13<!--
  /kvlab:count -->``) are rewritten from the notebooks there are (``course_counts``), so a page
  never says "ten notebooks" when there are thirteen; tests/docs/test_counts.py checks the
  committed numbers too.
* ``on_post_page``: nbconvert's page fragments load require.js and the Jupyter widget manager
  from CDNs (cdnjs, unpkg), and would load anywidget from jsDelivr; offline the players would be
  blank. The hook points them at the copies vendored under ``docs/assets/vendor`` (see
  ``docs/vendor.py``), registers anywidget's AMD module with require.js, and drops the mermaid
  loader (no notebook uses mermaid). It also drops the ``<link rel="alternate" hreflang>``
  tags: Material fetches ``sitemap.xml`` next to each of them (a 404 on every page), and the
  language switch works without them. On the Chinese side it points the theme's ``base`` at
  ``zh/``, so search there reads the Chinese index (below) and links into the Chinese site.
* ``on_post_build``: splits the search index by language (``search/search_index.json`` holds
  the English pages, ``zh/search/search_index.json`` the Chinese side's, English fallbacks
  under ``zh/`` included), so a search, in English words or Chinese, stays on the side it was
  typed on; and fails the build (an error under ``--strict``) if any built page still asks the
  network for a script, a stylesheet or a module.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import shutil
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.utils import get_relative_url

log = logging.getLogger("mkdocs.plugins.kvlab")

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
ZH_NOTEBOOKS = NOTEBOOKS / "zh"
FIGURES = REPO / "figures"
DEFAULT_LANGUAGE = "en"

UNTRANSLATED_NOTEBOOK = (
    '<div class="admonition note kvlab-untranslated" lang="zh">'
    '<p class="admonition-title">本节尚未翻译</p>'
    "<p>本节的中文版尚未完成，下面是英文原版笔记本（代码与输出两种语言完全相同）。</p></div>"
)
UNTRANSLATED_PAGE = (
    '<div class="admonition note kvlab-untranslated" lang="zh">'
    '<p class="admonition-title">本页尚未翻译</p>'
    "<p>本页暂无中文版，下面是英文原文。</p></div>"
)
API_PAGE = (
    '<div class="admonition info kvlab-untranslated" lang="zh">'
    '<p class="admonition-title">API 参考保留英文</p>'
    "<p>本页由 kvlab 源码中的 docstring 自动生成，与代码一同维护，因此保留英文；"
    '术语的中文译名见<a href="{glossary}">术语表</a>。</p></div>'
)
# Pages shown as they are on the Chinese side: already bilingual.
BILINGUAL_PAGES = {"reference/glossary.md"}

REQUIRE_CDN = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"
WIDGETS_CDN = "https://unpkg.com/@jupyter-widgets/html-manager@*/dist/embed-amd.js"
OLD_WIDGETS_CDN = "https://unpkg.com/@jupyter-js-widgets@*/dist/embed.js"
VENDOR = {
    "require": "assets/vendor/requirejs/require.js",
    "embed": "assets/vendor/html-manager/embed-amd.js",
    "anywidget": "assets/vendor/anywidget/index",  # AMD module id: no ".js"
}
_MERMAID_SCRIPT = re.compile(
    r"<script type=\"module\">(?:(?!</script>).)*?mermaid(?:(?!</script>).)*?</script>", re.DOTALL
)
_EMPTY_SCRIPT = re.compile(r"<script src=\"\">\s*</script>")
_CODE_CELL = re.compile(r'<div class="jp-Cell jp-CodeCell\b[^"]*"')
_DIV_TAG = re.compile(r"<(/?)div\b")
SEARCH_EXCLUDED = "kvlab-code"
_ALTERNATE_LINK = re.compile(r'<link rel="alternate" href="[^"]*" hreflang="[^"]*"\s*/?>\n?')
_THEME_CONFIG = re.compile(r'(<script id="__config" type="application/json">)(.*?)(</script>)', re.S)
_REMOTE = re.compile(
    r"""(?:<script[^>]*\bsrc=|<link[^>]*\bhref=|\bimport\(|\bwidgetRendererSrc\s*=\s*)["'](https?:)?//""",
    re.IGNORECASE,
)


class _DocstringBrackets(logging.Filter):
    """Demote autorefs' "Could not find cross-reference target" warnings that come from
    docstrings (``from /path/kvlab/x.py:N``) to INFO.

    Markdown reads text like ``req_to_blocks[request_id][group]`` in a docstring as a reference
    link; those docstrings are fixed at their source (see /work/notes/notebook_requests.md),
    but until then one of them must not fail the whole strict build. Unresolved references in
    the docs pages themselves stay warnings.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (
            record.levelno == logging.WARNING
            and "Could not find cross-reference target" in message
            and re.search(r"from \S+\.py:\d+", message)
        ):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def on_config(config):
    """Install the docstring-bracket filter on mkdocs-autorefs' loggers."""
    for name in ("plugin", "references", "backlinks"):
        logger = logging.getLogger(f"mkdocs.plugins.mkdocs_autorefs._internal.{name}")
        if not any(isinstance(f, _DocstringBrackets) for f in logger.filters):
            logger.addFilter(_DocstringBrackets())
    return config


def current_language(config) -> str:
    """The language being built: mkdocs-static-i18n sets ``theme.language`` for each build."""
    return config.theme.get("language") or DEFAULT_LANGUAGE


def notebook_source(name: str, lang: str) -> tuple[Path, bool]:
    """The notebook shown as ``tutorials/<name>`` in ``lang``, and whether it is translated.

    Chinese: ``notebooks/zh/<name>`` if present, else the English notebook (not translated).
    """
    if lang != DEFAULT_LANGUAGE and (ZH_NOTEBOOKS / name).is_file():
        return ZH_NOTEBOOKS / name, True
    return NOTEBOOKS / name, lang == DEFAULT_LANGUAGE


class _Alternate:
    """What mkdocs-static-i18n's language switch reads of another language's page: its url."""

    def __init__(self, url: str) -> None:
        self.url = url


def on_pre_build(config) -> None:
    """Start each language's build with mkdocs-autorefs' maps of this build only.

    mkdocs-static-i18n builds the Chinese side with the same plugin objects; autorefs would
    otherwise still hold the English side's anchors and warn that every API object has two
    primary URLs (``reference/core/#...`` and ``zh/reference/core/#...``).
    """
    autorefs = config.plugins.get("autorefs")
    if autorefs is None:
        return
    for name in ("_primary_url_map", "_secondary_url_map", "_title_map", "_breadcrumbs_map"):
        mapping = getattr(autorefs, name, None)
        if isinstance(mapping, dict):
            mapping.clear()
    backlinks = getattr(autorefs, "_backlinks", None)
    if isinstance(backlinks, dict):
        backlinks.clear()


@event_priority(-200)  # after mkdocs-static-i18n (-100) has sorted docs/ by language
def on_files(files: Files, config) -> Files:
    """Add the figures as figures/*.svg (one copy at the site's root, for both languages) and
    the course notebooks as tutorials/NN_*.ipynb pages of the language being built.

    The notebooks are wrapped for mkdocs-jupyter here (its own ``on_files`` has already run).
    """
    from mkdocs_jupyter.plugin import NotebookFile

    for path in sorted(FIGURES.glob("*.svg")):
        files.append(File.generated(config, f"figures/{path.name}", abs_src_path=str(path)))
    lang = current_language(config)
    languages = [lang_config.locale for lang_config in _i18n_languages(config)] or [lang]
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        source, translated = notebook_source(path.name, lang)
        inner = File.generated(config, f"tutorials/{path.name}", abs_src_path=str(source))
        file = NotebookFile(inner, **config)
        if lang != DEFAULT_LANGUAGE:
            file.dest_path = f"{lang}/{file.dest_path}"
            file.abs_dest_path = str(Path(config.site_dir) / file.dest_path)
            file.url = f"{lang}/{file.url}"
        stem = f"tutorials/{path.stem}/"
        file.locale = lang if translated else DEFAULT_LANGUAGE
        file.locale_alternate_of = lang
        file.alternates = {
            other: _Alternate(stem if other == DEFAULT_LANGUAGE else f"{other}/{stem}")
            for other in languages
        }
        file.kvlab_untranslated = not translated
        file.kvlab_english_source = path if source != path else None
        files.append(file)
    return files


def _i18n_languages(config) -> list:
    plugin = config.plugins.get("i18n")
    return list(plugin.config.languages) if plugin is not None else []


_HEADING = re.compile(r"^(#{2,3}) (.+)$", re.M)
_HEADING_HTML = re.compile(r'<h([23]) id="([^"]*)".*?</h\1>', re.DOTALL)


def heading_slugs(notebook: Path) -> list[str]:
    """The ids mkdocs gives the ``##``/``###`` headings of a notebook's markdown, in order."""
    import nbformat
    from markdown.extensions.toc import slugify

    nb = nbformat.read(notebook, as_version=4)
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += [slugify(re.sub(r"[`*]", "", m.group(2)), "-") for m in _HEADING.finditer(cell.source)]
    return found


def english_anchors(html: str, page, english: Path) -> str:
    """Give a Chinese notebook's section headings the ids of the English notebook's.

    Links into a section (``12_misconceptions.ipynb#5-evict_blocks-is-the-lru-eviction``, from
    the errata and the seed map, on both sides) then work in both languages, and switching the
    language keeps the reader's place. Only when both notebooks have the same headings, one for
    one (the translation keeps the cells); otherwise the Chinese ids stay.
    """
    headings = list(_HEADING_HTML.finditer(html))
    slugs = heading_slugs(english)
    if len(headings) != len(slugs):
        log.info("%s: %d headings, English %d: ids kept", page.file.src_uri, len(headings), len(slugs))
        return html
    renamed = {}
    out, last = [], 0
    for match, new in zip(headings, slugs):
        old = match.group(2)
        renamed[old] = new
        segment = match.group(0).replace(f'id="{old}"', f'id="{new}"', 1)
        segment = segment.replace(f'href="#{old}"', f'href="#{new}"')
        out += [html[last : match.start()], segment]
        last = match.end()
    out.append(html[last:])

    def rename(items) -> None:
        for item in items:
            item.id = renamed.get(item.id, item.id)
            rename(item.children)

    rename(page.toc or [])
    return "".join(out)


def on_page_context(context, page, config, nav):
    """Make the language switch's links site-relative (runs after mkdocs-static-i18n's).

    The plugin leaves the home pages' links absolute (``/``, ``/zh/``), which break when the
    site is opened from a folder or served under a path; ``./`` and ``zh/`` are resolved
    against the site's root by the theme's ``url`` filter, like every other link.
    """
    # the plugin sets config.extra.alternate as an attribute (what the theme reads)
    alternates = getattr(config.extra, "alternate", None) or config.extra.get("alternate") or []
    for alternate in alternates:
        link = alternate.get("link", "")
        if link.startswith("/") and not link.startswith("//"):
            alternate["link"] = link.lstrip("/") or "./"
    return context


def exclude_code_cells(html: str) -> str:
    """Wrap each notebook code cell (input and output) in ``<kvlab-code data-search-exclude>``.

    NOTE: Material's search parser compares elements by tag name only, so a
    ``data-search-exclude`` on the cell's own ``<div>`` stops applying at the first inner
    ``</div>``; a tag that never occurs inside a cell holds. The wrapper is ``display:
    contents`` (kvlab.css): the page looks the same.
    """
    out, last = [], 0
    for start in _CODE_CELL.finditer(html):
        if start.start() < last:
            continue  # NOTE: a code cell inside a code cell does not happen; be safe
        depth, end = 0, None
        for tag in _DIV_TAG.finditer(html, start.start()):
            depth += -1 if tag.group(1) else 1
            if depth == 0:
                end = html.index(">", tag.end()) + 1
                break
        if end is None:
            break  # NOTE: unbalanced HTML: leave the rest as it is
        out += [html[last : start.start()], f"<{SEARCH_EXCLUDED} data-search-exclude>",
                html[start.start() : end], f"</{SEARCH_EXCLUDED}>"]  # fmt: skip
        last = end
    out.append(html[last:])
    return "".join(out)


def on_page_content(html: str, page, config, files) -> str:
    """Keep code cells out of search; on the Chinese side, say at the top of a page that it is
    shown in English."""
    html = exclude_code_cells(html)
    if current_language(config) == DEFAULT_LANGUAGE:
        return html
    file = page.file
    if getattr(file, "kvlab_untranslated", False):
        return UNTRANSLATED_NOTEBOOK + html
    if getattr(file, "kvlab_english_source", None) is not None:
        return english_anchors(html, page, file.kvlab_english_source)
    src = getattr(file, "norm_src_uri", file.src_uri)
    if getattr(file, "localization", None) or src in BILINGUAL_PAGES or src.endswith(".ipynb"):
        return html
    if src.startswith("reference/") and src != "reference/index.md":
        glossary = get_relative_url(f"{current_language(config)}/reference/glossary/", page.url)
        return API_PAGE.format(glossary=glossary) + html
    return UNTRANSLATED_PAGE + html


COUNT = re.compile(r"<!-- kvlab:count (\w+) -->(.*?)<!-- /kvlab:count -->")
"""A generated count in a docs page: the marker names what is counted (see ``course_counts``)."""


def course_counts() -> dict[str, int]:
    """What the course has: numbered notebooks (``notebooks/NN_*.ipynb``) and build-it labs
    (``notebooks/labs/*.ipynb``)."""
    return {
        "notebooks": len(list(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))),
        "labs": len(list((NOTEBOOKS / "labs").glob("*.ipynb"))),
    }


def fill_counts(markdown: str) -> str:
    """``markdown`` with every ``kvlab:count`` marker holding the current count.

    Raises:
        KeyError: A marker names something ``course_counts`` does not count.
    """
    counts = course_counts()
    return COUNT.sub(
        lambda m: f"<!-- kvlab:count {m[1]} -->{counts[m[1]]}<!-- /kvlab:count -->", markdown
    )


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the generated counts (``fill_counts``)."""
    return fill_counts(markdown)


def on_nav(nav, config, files: Files):
    """Give mkdocs-jupyter's wrappers of the added notebooks their source path.

    ``NotebookFile`` recomputes ``abs_src_path`` from ``src_dir``, which a generated file does
    not have; the wrapped file knows the path, so it is copied onto the wrapper.
    """
    for file in files:
        inner = getattr(file, "file", None)
        if inner is not None and file.__dict__.get("abs_src_path") is None:
            file.__dict__["abs_src_path"] = inner.abs_src_path
    return nav


def _local(output: str, page_url: str) -> str:
    rel = {name: get_relative_url(path, page_url) for name, path in VENDOR.items()}
    require = (
        f'<script src="{rel["require"]}"></script>\n'
        f'<script>require.config({{paths: {{anywidget: "{rel["anywidget"]}"}}}});</script>'
    )
    output = output.replace(f'<script src="{REQUIRE_CDN}"></script>', require)
    output = output.replace(WIDGETS_CDN, rel["embed"]).replace(OLD_WIDGETS_CDN, rel["embed"])
    output = _MERMAID_SCRIPT.sub("", output)
    return _EMPTY_SCRIPT.sub("", output)


def on_post_page(output: str, page, config) -> str:
    """Point a notebook page's widget loaders at the vendored copies; drop the alternate links
    (no sitemap fetches); on the Chinese side, make ``zh/`` the theme's base."""
    if REQUIRE_CDN in output or WIDGETS_CDN in output or "mermaid" in output:
        output = _local(output, page.url)
    output = _ALTERNATE_LINK.sub("", output)
    lang = DEFAULT_LANGUAGE if config is None else current_language(config)
    if lang != DEFAULT_LANGUAGE:
        output = language_base(output, lang)
    return output


def language_base(output: str, lang: str) -> str:
    """Material's ``__config`` with ``base`` pointing at the ``lang/`` side of the site: its
    search then loads ``lang/search/search_index.json`` and links results under ``lang/``."""

    def rebase(match: re.Match) -> str:
        theme = json.loads(match.group(2))
        theme["base"] = posixpath.join(theme.get("base") or ".", lang) + "/"
        return match.group(1) + json.dumps(theme) + match.group(3)

    return _THEME_CONFIG.sub(rebase, output, count=1)


def split_search_index(site: Path, languages: list[str]) -> None:
    """Move each non-default language's entries (``zh/...``) from the site's search index to
    ``<lang>/search/search_index.json`` (locations relative to ``<lang>/``), and give that side
    a ``sitemap.xml`` (the theme fetches one from its base). Running it again changes nothing."""
    path = site / "search" / "search_index.json"
    if not path.is_file():
        return
    index = json.loads(path.read_text(encoding="utf-8"))
    for lang in languages:
        prefix = f"{lang}/"
        mine = [d for d in index["docs"] if d["location"].startswith(prefix)]
        if not mine:
            continue
        index["docs"] = [d for d in index["docs"] if not d["location"].startswith(prefix)]
        docs = [{**d, "location": d["location"][len(prefix):]} for d in mine]
        target = site / lang / "search" / "search_index.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({**index, "docs": docs}, ensure_ascii=False), encoding="utf-8")
        if (site / "sitemap.xml").is_file():
            shutil.copyfile(site / "sitemap.xml", site / lang / "sitemap.xml")
    path.write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")


def remote_loads(html: str) -> list[str]:
    """The remote addresses a page would load scripts, stylesheets or modules from."""
    found = []
    for match in _REMOTE.finditer(html):
        found.append(html[match.start() : html.find(">", match.start()) + 1][:160])
    return found


@event_priority(-200)  # after mkdocs-static-i18n (-100) has written the whole search index
def on_post_build(config) -> None:
    """Split the search index by language; check that the site needs no network: vendored
    files present, no remote loads."""
    site = Path(config.site_dir)
    others = [lc.locale for lc in _i18n_languages(config) if lc.locale != DEFAULT_LANGUAGE]
    split_search_index(site, others)
    for path in VENDOR.values():
        target = site / (path if path.endswith(".js") else path + ".js")
        if not target.is_file():
            log.error("vendored asset missing from the site: %s (run docs/vendor.py)", target)
    for page in sorted(site.rglob("*.html")):
        for load in remote_loads(page.read_text(encoding="utf-8")):
            log.error("%s loads from the network: %s", page.relative_to(site), load)
