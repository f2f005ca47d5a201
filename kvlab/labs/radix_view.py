"""The radix lab's divergence drawn: SGLang's tree beside the learner's, the differing nodes marked.

Lab ``radix_cache`` compares the tree after every call as a flat listing (``radix.tree_state``:
each node's tokens from the root and slots, sorted, with ``node_id``, ``lock_ref`` and
``last_access_time`` in the same order). Here that listing becomes a tree again (a node's parent
is the longest listed proper prefix of its tokens; the root lists nothing) and both trees are
drawn by kvlab.viz's radix view (``render_radix_tree``: tokens, lock_ref, last_access_time, the
LRU eviction rank of unlocked leaves) as static HTML, side by side. A node differs when the other
tree has no node with the same tokens from the root, or has one with other slots, node_id,
lock_ref or last_access_time; such nodes end in ``≠`` on a red background.
"""

from __future__ import annotations

import html
from numbers import Real
from typing import Any

from kvlab.i18n import _
from kvlab.labs.result import source_name

__all__ = ["differing_paths", "radix_divergence_html", "snapshot_from_state"]

_FIELDS = ("node_id", "lock_ref", "last_access_time")


def _nodes(state: dict) -> dict[tuple[int, ...], tuple] | None:
    """Tokens from the root -> (slots, node_id, lock_ref, last_access_time); None if unreadable."""
    try:
        listing, columns = state["tree"], [state[f] for f in _FIELDS]
        if not all(len(c) == len(listing) for c in columns):
            return None
        out = {}
        for i, (path, slots) in enumerate(listing):
            row = (tuple(int(s) for s in slots), *(c[i] for c in columns))
            if not all(isinstance(v, Real) and not isinstance(v, bool) for v in row[1:]):
                return None
            out[tuple(int(t) for t in path)] = row
    except (KeyError, TypeError, ValueError):
        return None
    return out if all(out) else None  # the empty path is the root's: never listed


def snapshot_from_state(state: dict) -> Any:
    """The tree of a lab state (``radix.tree_state``) as a ``kvlab.sglang`` ``RadixSnapshot``.

    Children are in token order (the listing does not keep insertion order). Node ids are the
    tree's own when they are distinct and not 0 (the root's), else 1, 2, ... in listing order.

    Returns:
        The snapshot (``free_slots`` from ``"free slots"``), or None when the state has no
        readable tree (a field missing, lengths that disagree, a non-number lock_ref ...).
    """
    from kvlab.sglang.recording import NodeView, RadixSnapshot

    nodes = _nodes(state)
    if nodes is None:
        return None
    paths = sorted(nodes)
    ids = [nodes[p][1] for p in paths]
    if len(set(ids)) != len(ids) or 0 in ids or not all(isinstance(i, int) for i in ids):
        ids = list(range(1, len(paths) + 1))
    id_of = dict(zip(paths, ids))
    parent = {}
    for p in paths:
        parent[p] = next((p[:n] for n in range(len(p) - 1, 0, -1) if p[:n] in id_of), ())
    children: dict[tuple, list[int]] = {}
    for p in paths:
        children.setdefault(parent[p], []).append(id_of[p])
    views = {id_of[p]: NodeView(id_of[p], id_of.get(parent[p], 0), p[len(parent[p]):], nodes[p][0],
                                nodes[p][2], nodes[p][3], tuple(children.get(p, ())))
             for p in paths}  # fmt: skip
    free = state.get("free slots")
    free = tuple(s for s in free if isinstance(s, int)) if isinstance(free, list) else ()
    return RadixSnapshot(views, tuple(children.get((), ())), free, 0)


def differing_paths(want: dict, got: dict) -> set[tuple[int, ...]]:
    """Tokens from the root of each node that differs between two lab states (either side's)."""
    a, b = _nodes(want) or {}, _nodes(got) or {}
    return {p for p in a.keys() | b.keys() if a.get(p) != b.get(p)}


def _panel(title: str, state: dict, differs: set[tuple[int, ...]]) -> str:
    from kvlab.viz.compare_radix import render_radix_tree
    from kvlab.viz.terminal import to_html

    snap = snapshot_from_state(state)
    if snap is None:
        return ""
    marked = {nid for nid in snap.nodes if snap.path_key(nid) in differs}
    tree = render_radix_tree(snap, max_nodes=80, title=title, highlight=marked)
    return f"<div class='kvlab-radix-panel'>{to_html(tree, width=72)}</div>"


def radix_divergence_html(div: Any) -> str:
    """Both trees after the divergent call, side by side (static HTML, current language).

    Returns:
        ``""`` when the divergence carries no tree on either side (vLLM labs, a learner's
        exception before any state).
    """
    want, got = div.want_state or {}, div.got_state or {}
    if "tree" not in want or "tree" not in got:
        return ""
    differs = differing_paths(want, got)
    reference = _("{reference}, at the divergence").format(reference=source_name(div.source))
    left = _panel(reference, want, differs)
    right = _panel(_("yours, after the same call"), got, differs)
    if not left or not right:
        return ""
    legend = _("≠: the other tree has no node with these tokens from the root, or one "
               "with other slots, node_id, lock_ref or last_access_time")
    legend = html.escape(legend)
    grid = "display:grid;grid-template-columns:1fr 1fr;gap:8px;font-size:11px"
    return (f"<div class='kvlab-radix-divergence'><div style='{grid}'>{left}{right}</div>"
            f"<div style='font-size:11px'>{legend}</div></div>")
