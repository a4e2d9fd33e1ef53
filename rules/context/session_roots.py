"""prune's memory of the requests, kept per conversation within a session.

The schedule's memory (``session_memory``: the requests counted, the growth per request, when the
last compaction came, whether the cache is expected warm) describes one conversation's requests.
A session can hold several: Claude Code's title call and its Task sub-agents send the main
conversation's session id. Counted together, a side request between two of the main one's made
the main conversation compact two requests after its last cut instead of five, and measured its
growth against the side request's size. So the memory is kept per conversation root, the content
hash of the conversation's first message (its system prompt, else its first turn): a sub-agent
or a title call has its own; a rewind, or an agent compacting its own history, keeps the
conversation's. The memory of the last request's conversation is the stored value itself (its
fields at the top, as before); the others' are kept under ``OTHERS``, the newest
``MAX_OTHERS``."""

from __future__ import annotations

from typing import Any

ROOT = "root"
OTHERS = "others"
MAX_OTHERS = 4


def mine(stored: Any, root: str) -> Any:
    """The memory of the conversation whose root is ``root``: the stored value when the last
    request was its own (or stored no root), else the one kept for it, else None (a new one)."""
    if not isinstance(stored, dict) or stored.get(ROOT, root) == root:
        return stored
    others = stored.get(OTHERS)
    return others.get(root) if isinstance(others, dict) else None


def kept(stored: Any, memo: Any, root: str) -> dict[str, Any]:
    """The value to store: ``memo`` as the memory of ``root``'s conversation, with the others
    kept (the one the stored value was, when it was another's)."""
    out = (
        {k: v for k, v in memo.items() if k not in (ROOT, OTHERS)} if isinstance(memo, dict) else {}
    )
    out[ROOT] = root
    if not isinstance(stored, dict):
        return out
    others = stored.get(OTHERS)
    others = {r: m for r, m in others.items() if r != root} if isinstance(others, dict) else {}
    previous = stored.get(ROOT)
    if isinstance(previous, str) and previous != root:
        others[previous] = {k: v for k, v in stored.items() if k not in (ROOT, OTHERS)}
    if others:
        out[OTHERS] = dict(list(others.items())[-MAX_OTHERS:])
    return out


def switched(stored: Any, root: str) -> bool:
    """Whether the stored memory is another conversation's (its per-step figures are then not
    this one's)."""
    return isinstance(stored, dict) and stored.get(ROOT, root) != root
