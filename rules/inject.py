"""inject: one compact, deterministic block at the tail of the forwarded request, wrapped in
``INJECT_OPEN`` … ``INJECT_CLOSE``. Sections in fixed order, empty ones left out: "Recent
context" (entities, newest first), "Resolved references" (from ``resolve_refs``' report),
"Working set" (``rules.working_set.render_section``). Capped at ``max_tokens``: the oldest
entity lines go first, then the working set is cut.

It goes after everything the client sent (appended to the last message when that is a user or
tool message, or as a trailing user message), never into the cached prefix, and it is not stored:
the next request gets a fresh one. Nothing is injected when every section is empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from rules import entity_cache, working_set
from rules.base import Context, RuleConfig, RuleResult, TokenCounter
from rules.messages import INJECT_CLOSE, INJECT_OPEN, append_text, role, text_of

_VERBS = {"create": "created", "delete": "deleted", "copy": "copied", "move": "moved",
          "modify": "modified", "read": "read", "open": "opened"}
HEADER = "Context noted by ctxproxy (not written by the user):"


class Config(RuleConfig):
    position: Literal["append", "message"] = "append"  # append to the last user/tool message
    # When to show "Recent context": on_reference (a reference was resolved, or was ambiguous),
    # always (whenever entities are known), never.
    recent_context: Literal["on_reference", "always", "never"] = "on_reference"
    max_entities: int = Field(default=10, ge=1, le=100)
    ttl_seconds: float = Field(default=300.0, gt=0)
    max_tokens: int = Field(default=1_000, ge=50)
    # The working set restates the goal and state; in a request shorter than this the model sees
    # all of that in the conversation itself, so the section would only cost tokens.
    working_set_min_messages: int = Field(default=6, ge=0)


def _entity_line(e: Mapping[str, Any]) -> str:
    verb = _VERBS.get(str(e.get("action")), str(e.get("action")))
    line = f"- {verb} {e.get('type')} {e.get('path')}"
    if e.get("from"):
        line += f" (from {e['from']})"
    return line


def recent_lines(events: Sequence[Mapping[str, Any]], limit: int) -> list[str]:
    """Newest first, one line per path (its latest action)."""
    lines, paths = [], set()
    for e in entity_cache.query(events):
        if e["path"] not in paths:
            paths.add(e["path"])
            lines.append(_entity_line(e))
    return lines[:limit]


def reference_lines(refs: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for r in refs:
        ent = r.get("entity")
        if not isinstance(ent, Mapping):
            continue
        verb = _VERBS.get(str(ent.get("action")), str(ent.get("action")))
        line = f'- "{r.get("mention")}" means the {ent.get("type")} {ent.get("path")} ({verb})'
        chain = r.get("chain") or []
        if len(chain) > 1:
            line += f", from parent session {chain[-1].get('session')}"
        lines.append(line)
    return lines


def render(recent: list[str], refs: list[str], ws: str | None, tokens: TokenCounter,
           max_tokens: int) -> str | None:
    """The block, or None when every section is empty; shortened to fit ``max_tokens``."""
    recent = list(recent)
    while True:
        parts = []
        if recent:
            parts.append("Recent context (newest first):\n" + "\n".join(recent))
        if refs:
            parts.append("Resolved references:\n" + "\n".join(refs))
        if ws:
            parts.append(ws if ws.lstrip().lower().startswith("working set") else
                         "Working set:\n" + ws)
        if not parts:
            return None
        block = "\n".join([INJECT_OPEN, HEADER, *parts, INJECT_CLOSE])
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


def apply(ctx: Context, cfg: Config) -> RuleResult:
    messages = ctx.messages
    if not messages or role(messages[-1]) == "assistant":
        return RuleResult.unchanged(ctx)  # a prefill: nothing may follow it
    last = messages[-1]
    if text_of(last.get("content")).rstrip().endswith(INJECT_CLOSE):
        return RuleResult.unchanged(ctx)  # already injected (idempotent)
    refs: list[Mapping[str, Any]] = list(ctx.report.get("references") or [])
    ref_lines = reference_lines(refs)
    show_recent = cfg.recent_context == "always" or (
        cfg.recent_context == "on_reference"
        and any(r.get("entity") or r.get("abstained") == "ambiguous" for r in refs)
    )
    events = entity_cache.fresh(ctx.state.get(entity_cache.NAMESPACE) or [], ctx.now,
                                cfg.ttl_seconds)
    recent = recent_lines(events, cfg.max_entities) if show_recent else []
    ws = (working_set.render_section(ctx.state)
          if len(messages) >= cfg.working_set_min_messages else None)
    block = render(recent, ref_lines, ws, ctx.tokens, cfg.max_tokens)
    if block is None:
        return RuleResult.unchanged(ctx)
    if cfg.position == "append" and role(last) in ("user", "tool"):
        out = [*messages[:-1], append_text(last, block)]
        where = "append"
    else:
        out = [*messages, {"role": "user", "content": block}]
        where = "message"
    report = {"inject": {"position": where, "index": len(out) - 1,
                         "tokens": ctx.tokens.count_text(block),
                         "entities": len(recent), "references": len(ref_lines)}}
    return RuleResult(out, ctx.state, report)
