"""The conversations under one session id, for ``/ui``'s session page. Claude Code sends its Task
sub-agents' and its title calls' requests under the lead's session id: charted together, a
sub-agent's small contexts sat between the lead's turns as falls and rises that never happened.
Each request's report names its conversation by two hashes (prune's ``conversation``, of its first
message, the system prompt; ``opening``, of its first message past that): two requests sharing
either are one conversation (a client that changes its system prompt keeps its opening; one that
compacts its own history keeps its system prompt), a sub-agent, with its own system prompt and
task, is another. The lead is the conversation with the most requests (the first of those tied),
and a request whose report names none (prune did not run) counts as the lead's. Sessions that
name this one their parent (``X-Parent-Session-Id``) are sessions of their own, listed apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.inspect import report_view as rv

LEAD = "lead"
MAX_CHILDREN = 100


@dataclass
class Conversation:
    key: str  # its first request's id ("" for requests naming none)
    label: str = ""  # "lead", "side 1", "side 2" …
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def peak(self) -> int:
        """Its largest billed input sent (``rv.with_billed`` has set it)."""
        return max((int(r.get("billed_before") or 0) for r in self.rows), default=0)


def hashes_of(row: dict[str, Any]) -> list[str]:
    """The row's conversation hashes (none when its report names none)."""
    prune = rv.report_of(row).get("prune")
    if not isinstance(prune, dict) or not isinstance(prune.get("conversation"), str):
        return []
    out = [f"s:{prune['conversation']}"]
    opening = prune.get("opening")
    if isinstance(opening, str) and opening:
        out.append(f"o:{opening}")
    return out


def conversations(rows: list[dict[str, Any]]) -> list[Conversation]:
    """``rows`` (turn order) by conversation: the lead first, the others in the order they
    started, labelled ``side 1`` …; a row naming none is the lead's."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for row in rows:
        keys = hashes_of(row)
        for k in keys:
            parent.setdefault(k, k)
        for k in keys[1:]:
            a, b = find(keys[0]), find(k)
            if a != b:
                parent[b] = a
    groups: dict[str, Conversation] = {}
    unnamed: list[dict[str, Any]] = []
    for row in rows:
        keys = hashes_of(row)
        if not keys:
            unnamed.append(row)
            continue
        group = groups.setdefault(find(keys[0]), Conversation(str(row.get("id") or "")))
        group.rows.append(row)
    if not groups:
        return [Conversation("", LEAD, list(rows))]
    named = list(groups.values())
    lead = max(named, key=lambda c: len(c.rows))  # the first of those tied (dicts keep order)
    if unnamed:  # prune did not run on them: the lead's, in turn order
        order = {id(r): i for i, r in enumerate(rows)}
        lead.rows = sorted(lead.rows + unnamed, key=lambda r: order[id(r)])
    lead.label = LEAD
    others = [c for c in named if c is not lead]
    for i, c in enumerate(others, 1):
        c.label = f"side {i}"
    return [lead, *others]


def chosen(groups: list[Conversation], wanted: str | None) -> Conversation:
    """The conversation ``?conversation=`` names (its first request's id), else the lead."""
    if wanted:
        for c in groups:
            if c.key and c.key == wanted:
                return c
    return groups[0]


async def child_sessions(store: Any, sid: str) -> list[dict[str, Any]]:
    """The sessions naming ``sid`` their parent (at most ``MAX_CHILDREN``, first first):
    (session id, requests, first seen)."""
    rows = await store.fetchall(store.dialect.child_sessions, (sid, MAX_CHILDREN))
    return [
        {"session_id": r[0], "requests": int(r[1]), "first_seen": float(r[2])}
        for r in rows
        if isinstance(r[0], str)
    ]
