"""``kvlab whatif --html``: one self-contained page (English and Chinese) of a what-if.

No file beside it and no network: the curve is inline SVG (matplotlib), the style and the
language switch are inline. What it shows, in both languages (a button switches; without
JavaScript the English part shows):

* the hit-rate curve (``plot.hit_rate_figure``, its labels in the section's language and kept
  as SVG text, measured with kvlab's CJK font and drawn by the browser with its own fonts) and
  the table of every row;
* where Belady ran: the split of the infinite cache's hits at each capacity into hits lost to
  capacity (infinite - belady) and hits lost to LRU (belady - vllm);
* a model sized in bytes: the blocks each budget buys;
* a fleet: each routing's hit rate, load imbalance and hits lost to routing;
* the most reused prefixes (``insight.top_prefixes``);
* a few misses explained (``insight.explain_request``): the first requests that the infinite
  cache would have served but vLLM, at the smallest capacity, did not.

Examples:
    >>> rows = [{"cache": "infinite", "capacity_tokens": None, "block_size": 512,
    ...          "hit_rate": 0.5, "hit_tokens": 1, "prompt_tokens": 2}]
    >>> "<svg" in report_html([], rows, [], title="t", block_size=512)
    False
    >>> page = report_html([], rows, [], title={"en": "trace", "zh": "轨迹"}, block_size=512)
    >>> "<h1>trace</h1>" in page and "<h1>轨迹</h1>" in page
    True
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvlab.i18n import N_, _, use_language

__all__ = ["report_html", "write_report"]

_STYLE = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.2em .6em;
text-align:right}th{background:#f4f4f4}td:first-child{text-align:left}pre{background:#f7f7f7;
padding:.6em;overflow:auto;font-size:.85em}body.zh .en,body:not(.zh) .zh{display:none}
nav button{margin-right:.5em}"""
_SWITCH = """function kvlabLang(l){document.body.classList.toggle('zh',l==='zh')}"""
# NOTE: not "lang": inside an onclick attribute that name is the button's own lang property


def _table(head: list[str], body: list[list[Any]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                  for row in body)  # fmt: skip
    return f"<table><tr>{th}</tr>{trs}</table>"


def _cell(row: dict, col: str) -> str:
    """One cell of the table of every row: no capacity is ∞, an uncounted eviction empty."""
    if col == "cache":
        return row["cache"]
    if col == "evicted_blocks" and row.get(col) is None:
        return ""  # NOTE: libCacheSim's policies do not count their evictions
    return _num(row.get(col))


def _num(v: Any) -> str:
    if v is None:
        return "∞"
    return f"{v:.4f}" if isinstance(v, float) else f"{v:,}"


def _section(rows: list[dict], fleet: list[dict], prefixes: list, misses: list,
             lang: str) -> str:  # fmt: skip
    out = []
    with use_language(lang):
        cols = ["cache", "block_size", "capacity_tokens", "hit_rate", "hit_tokens",
                "evicted_blocks", "rejected"]  # fmt: skip
        out.append("<h2>" + _("hit rate at each capacity") + "</h2>")
        out.append(_table([_("cache"), _("block size"), _("capacity (tokens)"), _("hit rate"),
                           _("hit tokens"), _("evicted blocks"), _("rejected")],
                          [[_cell(r, c) for c in cols] for r in rows]))
        split = [r for r in rows if r["cache"] == "vllm" and "hits_lost_to_lru" in r]
        if split:
            out.append("<h2>" + _("where the hits went") + "</h2><p>" + _(SPLIT_TEXT) + "</p>")
            out.append(_table([_("capacity (tokens)"), _("vLLM hit tokens"),
                               _("lost to capacity"), _("lost to LRU")],
                              [[_num(r["capacity_tokens"]), _num(r["hit_tokens"]),
                                _num(r["hits_lost_to_capacity"]), _num(r["hits_lost_to_lru"])]
                               for r in split]))  # fmt: skip
        sized = [r for r in rows if "num_gpu_blocks" in r]
        if sized:
            out.append("<h2>" + _("the model in bytes") + "</h2>")
            out.append(_table([_("model"), _("KV cache (GiB)"), _("blocks"), _("groups"),
                               _("hit rate")],
                              [[r["model"], f"{r['kv_cache_memory_bytes'] / 2**30:.2f}",
                                _num(r["num_gpu_blocks"]), r["kv_cache_groups"],
                                _num(r["hit_rate"])] for r in sized]))  # fmt: skip
        if fleet:
            out.append("<h2>" + _("routing across replicas") + "</h2><p>" + _(FLEET_TEXT)
                       + "</p>")
            out.append(_table([_("routing"), _("replicas"), _("capacity per replica (tokens)"),
                               _("hit rate"), _("hits lost to routing"),
                               _("busiest / mean load")],
                              [[r["routing"], r["replicas"], _num(r["capacity_tokens"]),
                                _num(r["hit_rate"]), _num(r["hits_lost_to_routing"]),
                                f"{r['load_imbalance']:.2f}"] for r in fleet]))  # fmt: skip
        if prefixes:
            out.append("<h2>" + _("most reused prefixes") + "</h2>")
            out.append(_table([_("tokens"), _("requests"), _("reuse count"), _("first request")],
                              [[_num(p.num_tokens), _num(p.num_requests), _num(p.reuse_count),
                                p.first_request] for p in prefixes]))  # fmt: skip
        if misses:
            out.append("<h2>" + _("a few misses explained") + "</h2>")
            out.extend(f"<pre>{html.escape(text[lang])}</pre>" for text in misses)
    return "\n".join(out)


SPLIT_TEXT = N_("Of the hits an infinite cache would get, some are lost because no eviction "
              "policy of this size could keep them (Belady's rule, which reads the future, "
              "loses them too: lost to capacity), the rest because vLLM evicts the least "
              "recently freed block (lost to LRU). In tokens.")
FLEET_TEXT = N_("Each replica has the capacity shown; hits lost to routing are those one pool "
              "of all replicas would get and the fleet does not.")


def _misses(reqs: list, rows: list[dict], block_size: int, limit: int = 2) -> list[dict]:
    """Explain the first ``limit`` requests the infinite cache serves better than vLLM at the
    smallest capacity (en and zh)."""
    from kvlab.traffic.blocks import prepare_blocks
    from kvlab.traffic.insight import explain_request
    from kvlab.traffic.replay import infinite_hits

    caps = sorted(r["capacity_tokens"] for r in rows if r["cache"] == "vllm"
                  and r["block_size"] == block_size and "routing" not in r
                  and r.get("kv_cache_groups", 1) == 1)  # fmt: skip
    if not caps or not reqs:
        return []
    blocked = prepare_blocks(reqs, block_size)
    best = infinite_hits(blocked)
    from kvlab.traffic.stack import lru_curve

    got = lru_curve(blocked, [caps[0]], stop_after=2000)[0].per_request_hit_tokens
    chosen = [i for i, (a, b) in enumerate(zip(best, got, strict=False)) if a > b][:limit]
    out = []
    for i in chosen:
        texts = {}
        for lang in ("en", "zh"):
            with use_language(lang):
                texts[lang] = str(explain_request(blocked, caps[0], i))
        out.append(texts)
    return out


def _curve_svg(rows: list[dict], lang: str) -> str:
    """The hit-rate curve with ``lang``'s labels, as inline SVG whose ids start with ``lang``
    (no title: the page's heading is right above it).

    Text stays text (``svg.fonttype: none``): the reader's browser draws it, Chinese included,
    and the page stays small. matplotlib only measures the labels, Chinese ones with the CJK
    font kvlab ships (``plot.hit_rate_figure``), so the layout is the same on every machine;
    the browser, which has no ``kvlab CJK``, is told to draw them with its own sans-serif font.
    """
    from matplotlib import rc_context

    from kvlab.charts import figure_svg
    from kvlab.fonts import CJK_FAMILY
    from kvlab.traffic.plot import hit_rate_figure

    with rc_context({"svg.fonttype": "none"}):
        svg = figure_svg(hit_rate_figure(rows, lang=lang))
    svg = svg[svg.index("<svg") :]  # NOTE: inline: no XML prologue
    svg = svg.replace(f"'{CJK_FAMILY}'", f"'{CJK_FAMILY}', sans-serif")
    # NOTE: both languages' curves sit in one page: their ids (clip paths, markers) must differ
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{lang}-\1"', svg)
    return re.sub(r'(url\(#|href="#)([^")]+)', rf"\1{lang}-\2", svg)


def report_html(reqs: list, rows: list[dict], fleet: list[dict], *,
                title: str | Mapping[str, str], block_size: int) -> str:  # fmt: skip
    """The page (see the module docstring) as a string.

    Args:
        reqs: The requests replayed (TrafficRequest), for the top prefixes and the misses
            explained; [] leaves those sections out.
        rows: ``kvlab whatif`` result rows (``sweep_rows``).
        fleet: Fleet rows (``sweep_rows`` of ``sweep_fleet``), or [].
        title: The page's title, one string for both languages or {"en": ..., "zh": ...}.
        block_size: The block size (tokens) of the prefixes and misses shown.

    Raises:
        KeyError: If ``title`` is a mapping without "en" or "zh".
    """
    titles = {lang: title if isinstance(title, str) else title[lang] for lang in ("en", "zh")}
    curve = any(r["cache"] != "infinite" for r in rows)
    prefixes: list = []
    if reqs:
        from kvlab.traffic.blocks import prepare_blocks
        from kvlab.traffic.insight import top_prefixes

        prefixes = top_prefixes(prepare_blocks(reqs, block_size), 5)
    misses = _misses(reqs, rows, block_size)
    parts = [f'<div class="{lang}" lang="{lang}"><h1>{html.escape(titles[lang])}</h1>'
             f"{_curve_svg(rows, lang) if curve else ''}"
             f"{_section(rows, fleet, prefixes, misses, lang)}</div>"
             for lang in ("en", "zh")]  # fmt: skip
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>'
            f"{html.escape(titles['en'])}</title><style>{_STYLE}</style><script>{_SWITCH}"
            "</script></head><body>"
            '<nav><button onclick="kvlabLang(\'en\')">English</button>'
            '<button onclick="kvlabLang(\'zh\')">中文</button></nav>'
            f"{''.join(parts)}</body></html>\n")


def write_report(path: str | Path, reqs: list, rows: list[dict], fleet: list[dict], *,
                 title: str | Mapping[str, str], block_size: int) -> None:  # fmt: skip
    """Write ``report_html`` to ``path`` atomically (the user's normal file mode)."""
    from kvlab.trace.atomic_file import atomic_write

    text = report_html(reqs, rows, fleet, title=title, block_size=block_size)
    with atomic_write(Path(path), "w") as f:
        f.write(text)
