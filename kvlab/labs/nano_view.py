"""The nano-vllm lab's divergence drawn: the reference BlockManager beside the learner's.

Lab ``nano_block_manager`` compares the BlockManager after every call as a flat state
(``kvlab.labs.nano.NanoSide.state``: ``free_block_ids`` in deque order, ``used_block_ids``, per
block ``ref_count``, ``block hash`` and ``token_ids``, ``hash_to_block_id`` as sorted pairs, per
sequence ``block_table`` and ``num_cached_tokens``). Here both states are drawn as static HTML,
side by side: the blocks in use (block_id, ref_count, hash as 8 hex digits or -1, tokens held),
``free_block_ids`` head first (the next allocate takes the head), the ``hash_to_block_id``
entries, and each sequence's block_table (sequences holding nothing on either side are left
out). An entry differs when the other side's entry at the same place (same block_id, same
position in the deque or the table, same hash, same sequence) is missing or other; such entries
end in ``≠`` on the red background the field table uses.
"""

from __future__ import annotations

import html
from typing import Any

from kvlab.i18n import _
from kvlab.labs.result import source_name

__all__ = ["nano_divergence_html", "read_state"]

_KEYS = ("free_block_ids", "used_block_ids", "ref_count", "block hash", "token_ids",
         "hash_to_block_id", "block_table", "num_cached_tokens")  # fmt: skip


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(v)
    return v


def read_state(state: dict) -> dict | None:
    """A lab state (``NanoSide.state``) checked and normalised; None if unreadable.

    Returns:
        ``{"blocks": {block_id: (ref_count, hash, token_ids)} for blocks in use, "free": [...],
        "hashes": {hash: block_id}, "tables": {seq: (block_table, num_cached_tokens)}}``.
    """
    try:
        if not all(k in state for k in _KEYS):
            return None
        refs, hashes, toks = state["ref_count"], state["block hash"], state["token_ids"]
        if not len(refs) == len(hashes) == len(toks):
            return None
        blocks = {}
        for b in sorted(_int(b) for b in state["used_block_ids"]):
            blocks[b] = (_int(refs[b]), _int(hashes[b]), tuple(_int(t) for t in toks[b]))
        tables = {str(rid): (tuple(_int(b) for b in table), _int(state["num_cached_tokens"][rid]))
                  for rid, table in state["block_table"].items()}  # fmt: skip
        return {"blocks": blocks, "free": [_int(b) for b in state["free_block_ids"]],
                "hashes": {_int(h): _int(b) for h, b in state["hash_to_block_id"]},
                "tables": tables}  # fmt: skip
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


def _hex(h: int) -> str:
    return "-1" if h == -1 else format(h % 2**64, "016x")[:8]


def _panel(title: str, me: dict, other: dict, seqs: list[str]) -> str:
    from rich.text import Text

    from kvlab.viz.compare_radix import DIFFERS_MARK, DIFFERS_STYLE
    from kvlab.viz.terminal import to_html

    out = Text(title, style="bold")

    def entry(line: Text, label: str, differs: bool, sep: str = "  ") -> None:
        if len(line) > 2:
            line.append(sep)
        line.append(label + (DIFFERS_MARK if differs else ""), style=DIFFERS_STYLE if differs else "")

    def section(head: str, items: list[tuple[str, bool]], per_line: int, sep: str = "  ") -> None:
        out.append("\n" + head, style="bold")
        if not items:
            out.append("\n  —")
        for i in range(0, len(items), per_line):
            line = Text("  ")
            for label, differs in items[i:i + per_line]:
                entry(line, label, differs, sep)
            out.append("\n").append_text(line)

    blocks = [(f"#{b} ref {r} · hash {_hex(h)} · {len(t)} tok", other["blocks"].get(b) != (r, h, t))
              for b, (r, h, t) in me["blocks"].items()]  # fmt: skip
    section(_("blocks in use"), blocks, 1)
    free = [(str(b), i >= len(other["free"]) or other["free"][i] != b) for i, b in enumerate(me["free"])]
    section(_("free_block_ids (head first: the next allocate takes it)"), free, 12, " ")
    pairs = [(f"{_hex(h)}→{b}", other["hashes"].get(h) != b) for h, b in sorted(me["hashes"].items())]
    section("hash_to_block_id", pairs, 4)
    out.append("\n" + _("block_table per sequence"), style="bold")
    for rid in seqs:
        table, cached = me["tables"].get(rid, ((), 0))
        o_table, o_cached = other["tables"].get(rid, ((), 0))
        line = Text(f"  {rid}:")
        for i, b in enumerate(table):
            entry(line, str(b), i >= len(o_table) or o_table[i] != b, " ")
        if not table:
            entry(line, "[]", bool(o_table), " ")
        entry(line, f"· num_cached_tokens {cached}", cached != o_cached, " ")
        out.append("\n").append_text(line)
    return f"<div class='kvlab-nano-panel'>{to_html(out, width=72)}</div>"


def nano_divergence_html(div: Any) -> str:
    """Both BlockManagers after the divergent call, side by side (static HTML, current language).

    Returns:
        ``""`` unless both sides' states are a nano-vllm BlockManager's and readable (vLLM and
        SGLang labs, a learner's exception before any state, a state the learner broke).
    """
    want, got = read_state(div.want_state or {}), read_state(div.got_state or {})
    if want is None or got is None:
        return ""
    seqs = [rid for rid in {**want["tables"], **got["tables"]}
            if any(side["tables"].get(rid, ((), 0)) != ((), 0) for side in (want, got))]  # fmt: skip
    reference = _("{reference}, at the divergence").format(reference=source_name(div.source))
    left = _panel(reference, want, got, seqs)
    right = _panel(_("yours, after the same call"), got, want, seqs)
    legend = html.escape(_("≠: the other BlockManager has another entry here (the block's "
                           "ref_count, hash or token_ids; the id at this place in the deque or "
                           "the table; the block a hash maps to)"))
    grid = "display:grid;grid-template-columns:1fr 1fr;gap:8px;font-size:11px"
    return (f"<div class='kvlab-nano-divergence'><div style='{grid}'>{left}{right}</div>"
            f"<div style='font-size:11px'>{legend}</div></div>")
