"""Rich view of a radix-tree prefix cache (kvlab.sglang's RadixCache, SGLang's own tree).

One line per node, nested as the tree: its edge's first tokens, length, lock_ref and last
access time. Locked nodes (a running request's path) are green, unlocked ones amber; the
unlocked leaves carry their place in the LRU eviction order (``evict #1`` goes first); nodes
named in ``highlight`` (a lab's divergence: what differs from the other tree) end in ``≠`` on a
red background::

    radix tree · 4 nodes · 14 tokens (evictable 6, protected 8) · pool 32 slots, 18 free
    root
    ├── #1 [1 2 3 4 …] 8 tok · lock 1 · t=3
    │   ├── #2 [5 6] 2 tok · lock 1 · t=3
    │   └── #3 [9 9 9 9] 4 tok · lock 0 · t=2 · evict #1

Takes a ``RadixSnapshot`` (``RadixCache.snapshot()``, ``RadixRecorder.state_at(i)``), or any
object with a ``snapshot()`` method; kvlab.viz does not import kvlab.sglang.

Examples:
    >>> print(to_text(render_radix_tree(cache.snapshot())))   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from rich.tree import Tree

__all__ = ["render_radix_tree"]

LOCKED_STYLE = "bold #16a34a"
EVICTABLE_STYLE = "#b45309"
NEXT_EVICT_STYLE = "bold #dc2626"
DIFFERS_STYLE = "on #fde2e1"
DIFFERS_MARK = " ≠"


def _tokens(key: tuple[int, ...], max_tokens: int) -> str:
    shown = " ".join(str(t) for t in key[:max_tokens])
    return f"[{shown}{' …' if len(key) > max_tokens else ''}]"


def _label(node: Any, max_tokens: int, evict_rank: dict[int, int], differs: bool = False) -> Text:
    style = LOCKED_STYLE if node.lock_ref > 0 else EVICTABLE_STYLE
    text = Text(f"#{node.node_id} ", style="bold")
    text.append(_tokens(node.key, max_tokens), style=style)
    text.append(f" {len(node.key)} tok · lock {node.lock_ref} · t={node.last_access_time}")
    rank = evict_rank.get(node.node_id)
    if rank is not None:
        text.append(f" · evict #{rank}", style=NEXT_EVICT_STYLE if rank == 1 else "dim")
    if differs:
        text.append(DIFFERS_MARK, style="bold #b42318")
        text.stylize(DIFFERS_STYLE)
    return text


def render_radix_tree(
    snapshot: Any,
    max_tokens: int = 8,
    max_nodes: int = 200,
    title: str | None = None,
    highlight: Collection[int] = (),
) -> RenderableType:
    """The radix tree at one moment.

    Args:
        snapshot: A RadixSnapshot, or an object with ``snapshot()`` (a live RadixCache).
        max_tokens: Token ids shown per edge (tokens), >= 1.
        max_nodes: Nodes drawn at most; the rest are counted.
        title: First line; None = node / token / pool counts.
        highlight: Node ids drawn as differing (``≠``, red background).

    Raises:
        ValueError: If max_tokens or max_nodes < 1.
        TypeError: If ``snapshot`` has no ``nodes`` / ``root_children``.
    """
    if max_tokens < 1 or max_nodes < 1:
        raise ValueError(f"max_tokens and max_nodes must be >= 1, got {max_tokens}, {max_nodes}")
    if callable(getattr(snapshot, "snapshot", None)) and not hasattr(snapshot, "root_children"):
        snapshot = snapshot.snapshot()
    if not hasattr(snapshot, "nodes") or not hasattr(snapshot, "root_children"):
        raise TypeError(f"expected a RadixSnapshot, got {type(snapshot).__name__}")
    evict_rank = {nid: i + 1 for i, nid in enumerate(snapshot.eviction_order())}
    head = title or (
        f"radix tree · {len(snapshot.nodes)} nodes · {snapshot.total_size} tokens "
        f"(evictable {snapshot.evictable_size}, protected {snapshot.protected_size}) · "
        f"pool {snapshot.pool_size} slots, {len(snapshot.free_slots)} free"
    )
    tree = Tree(Text("root", style="bold"))
    stack = [(tree, nid) for nid in reversed(snapshot.root_children)]
    drawn = 0
    while stack and drawn < max_nodes:
        parent, nid = stack.pop()
        node = snapshot.nodes[nid]
        branch = parent.add(_label(node, max_tokens, evict_rank, nid in highlight))
        drawn += 1
        stack.extend((branch, c) for c in reversed(node.children))
    parts: list[RenderableType] = [Text(head, style="bold"), tree]
    if len(snapshot.nodes) > drawn:
        parts.append(Text(f"… {len(snapshot.nodes) - drawn} more nodes not drawn", style="dim"))
    return Group(*parts)
