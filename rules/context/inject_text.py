"""The text of inject's blocks: the lines of each section, what changed since the blocks already
in the history (a delta), and the block itself, capped to a token limit. Pure functions."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from rules.base import TokenCounter
from rules.context import working_set
from rules.context.block_line import one_line
from rules.entities import cache as entity_cache
from rules.entities.ref_pointer import named, with_age
from rules.messages import INJECT_CLOSE, INJECT_OPEN

_VERBS = {
    "create": "created",
    "delete": "deleted",
    "copy": "copied",
    "move": "moved",
    "modify": "modified",
    "read": "read",
    "open": "opened",
}
HEADER = "Context noted by ctxproxy (not written by the user):"
DELTA_HEADER = "Context noted by ctxproxy (not written by the user), changed since its last note:"
# Items a delta leaves out: the latest writes repeat the changed files' news, in recency order.
_NOT_IN_DELTA = ("Latest writes",)
# Items whose disappearance is news (a diagnostic closed); others are replaced or just age out.
_CLOSED = {"Open": "Closed"}
def _entity_line(e: Mapping[str, Any]) -> str:
    verb = _VERBS.get(str(e.get("action")), str(e.get("action")))
    if "id" in e:  # beyond files: "- created git branch feat/x", "- listed customer Globex"
        verb = {"delete": "ended", "list": "listed"}.get(str(e.get("action")), verb)
        return one_line(f"- {verb} {named(e)}")
    line = f"- {verb} {e.get('type')} {e.get('path')}"
    if e.get("from"):
        line += f" (from {e['from']})"
    return one_line(line)


def recent_lines(
    events: Sequence[Mapping[str, Any]], limit: int, in_view: AbstractSet[str] = frozenset()
) -> list[str]:
    """Newest first, one line per path (its latest action), of the newest ``limit`` paths;
    less those whose latest action's call (``call_id``) is one of ``in_view``."""
    lines: list[str] = []
    paths: set[Any] = set()
    for e in entity_cache.query(events):
        if e["path"] not in paths and len(paths) < limit:
            paths.add(e["path"])
            if not e.get("call_id") or e.get("call_id") not in in_view:
                lines.append(_entity_line(e))
    return lines


def reference_lines(refs: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per resolved reference; a mention repeated in the turn ("the folder … the
    folder") resolves the same way, and says so once."""
    lines: list[str] = []
    for r in refs:
        ent = r.get("entity")
        if not isinstance(ent, Mapping):
            continue
        verb = _VERBS.get(str(ent.get("action")), str(ent.get("action")))
        since = f"; since {r['since']}" if r.get("since") else ""  # the agent's own doing
        verb += since
        line = f'- "{r.get("mention")}" means the {ent.get("type")} {ent.get("path")} ({verb})'
        if ent.get("description"):  # beyond files: in the model's terms, with its identifier
            age = r.get("age_s")
            said = with_age(str(ent["description"]), age if isinstance(age, int) else None)
            line = f'- "{r.get("mention")}" means the {said}'
            line += f", since {r['since']}" if since else ""
        chain = r.get("chain") or []
        source = chain[-1] if chain and isinstance(chain[-1], Mapping) else {}
        if (source.get("depth") or 0) > 0:  # the entry that yielded it (a search or a pick)
            line += f", from parent session {source.get('session')}"
        line = one_line(line)
        if line not in lines:
            lines.append(line)
    return lines


@dataclass
class Sections:
    """What a block says: entity lines, reference lines and working-set items."""

    recent: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    ws: list[tuple[str, str]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.recent or self.refs or self.ws)

    def to_json(self) -> dict[str, Any]:
        return {"recent": self.recent, "refs": self.refs, "ws": [list(i) for i in self.ws]}

    @classmethod
    def from_json(cls, value: Any) -> Sections:
        value = value if isinstance(value, dict) else {}
        ws = [(str(i[0]), str(i[1])) for i in value.get("ws") or [] if len(i) == 2]
        return cls(list(value.get("recent") or []), list(value.get("refs") or []), ws)


def delta(now: Sections, shown: Sections) -> Sections:
    """What ``now`` says that the blocks already forwarded (``shown``) did not: new lines and
    items, and diagnostics no longer open."""
    # The common request: the working set as the blocks last showed it (nothing new, nothing
    # closed) and no entity or reference lines; every request asks, so no sets are built then.
    ws = [] if now.ws == shown.ws else _ws_delta(now.ws, shown.ws)
    refs = [r for r in _new_lines(now.refs, shown.refs) if _unended(r) not in shown.refs]
    return Sections(_new_lines(now.recent, shown.recent), refs, ws)


# What a reference line says of its entity's end since the question (``ref_since``)
_SINCE = re.compile(r"(?:; |, )since (?:deleted|moved)\b")


def _unended(line: str) -> str:
    """``line`` as it read before its entity was ended: no news to say again mid-loop (it would
    go after the agent's own result of ending it); a block said anew says it."""
    return _SINCE.sub("", line, count=1) if "since" in line else line


def _new_lines(now: list[str], shown: list[str]) -> list[str]:
    if not now:
        return []
    seen = set(shown)
    return [line for line in now if line not in seen]


def _ws_delta(now: list[tuple[str, str]], shown: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen, current = set(shown), set(now)
    ws = [i for i in now if i not in seen and i[0] not in _NOT_IN_DELTA]
    ws += [(_CLOSED[k], v) for k, v in shown if k in _CLOSED and (k, v) not in current]
    if any(k == "Next repair target" for k, _ in shown) and not any(
        k == "Next repair target" for k, _ in now
    ):
        ws.append(("Next repair target", "none"))
    return ws


def ws_text(items: list[tuple[str, str]], is_delta: bool, max_tokens_hint: int) -> str | None:
    """The working-set section for ``items``, capped at about ``max_tokens_hint`` tokens."""
    lines = working_set.render_items(items)
    if not lines:
        return None
    title = "Working set changes:" if is_delta else "Working set:"
    out = title + "\n" + "\n".join(f"- {line}" for line in lines)
    limit = max_tokens_hint * 4
    return out if len(out) <= limit else out[: limit - 1] + "…"


def render(
    recent: list[str],
    refs: list[str],
    ws: str | None,
    tokens: TokenCounter,
    max_tokens: int,
    header: str = HEADER,
) -> str | None:
    """The block, or None when every section is empty; shortened to fit ``max_tokens``: the
    oldest entity lines go first, then the working set is cut, then dropped."""
    recent = list(recent)
    while True:
        parts = []
        if recent:
            parts.append("Recent context (newest first):\n" + "\n".join(recent))
        if refs:
            parts.append("Resolved references:\n" + "\n".join(refs))
        if ws:
            parts.append(
                ws if ws.lstrip().lower().startswith("working set") else "Working set:\n" + ws
            )
        if not parts:
            return None
        block = "\n".join([INJECT_OPEN, header, *parts, INJECT_CLOSE])
        over = tokens.count_text(block) - max_tokens
        if over <= 0:
            return block
        if len(recent) > 1:
            recent.pop()  # the oldest entity line first
        elif ws and len(ws) > 60:
            ws = ws[: min(len(ws) - 20, max(40, len(ws) - over * 4))].rstrip() + " …"
        elif ws:
            ws = None
        elif recent:
            recent = []
        else:
            refs = refs[:-1]
