"""inject: one compact, deterministic block at the tail of the forwarded request, wrapped in
``INJECT_OPEN`` … ``INJECT_CLOSE``. Sections in fixed order, empty ones left out: "Recent
context" (entities, newest first), "Resolved references" (from ``resolve_refs``' report),
"Working set" (``rules.context.working_set.render_section``). Capped at ``max_tokens``: the oldest
entity lines go first, then the working set is cut.

It goes after everything the client sent (appended to the last message when that is a user or
tool message, or as a trailing user message), never into the cached prefix, and it is not stored:
the next request gets a fresh one. Nothing is injected when every section is empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from rules.base import Context, Messages, RuleConfig, RuleResult, TokenCounter
from rules.context import working_set
from rules.entities import cache as entity_cache
from rules.messages import INJECT_CLOSE, INJECT_OPEN, append_text, role, text_of, with_content
from rules.report import InjectSummary, Reference, Report

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


class Config(RuleConfig):
    position: Literal["append", "message"] = Field(
        default="append",
        description="`append`: to the last user/tool message; `message`: a new user message",
    )
    recent_context: Literal["on_reference", "always", "never"] = Field(
        default="on_reference",
        description='when to show "Recent context": `on_reference` (a reference resolved or '
        "was ambiguous), `always` (whenever entities are known), `never`",
    )
    max_entities: int = Field(
        default=10, ge=1, le=100, description='lines of "Recent context" at most'
    )
    ttl_seconds: float = Field(
        default=300.0, gt=0, description="entities older than this are not shown"
    )
    max_tokens: int = Field(default=1_000, ge=50, description="cap of the whole block")
    working_set_min_messages: int = Field(
        default=6,
        ge=0,
        description='a shorter request shows its goal and state already: no "Working set" '
        "section, so a plain short request is forwarded byte-identical",
    )


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
        source = chain[-1] if chain and isinstance(chain[-1], Mapping) else {}
        if (source.get("depth") or 0) > 0:  # the entry that yielded it (a search or a pick)
            line += f", from parent session {source.get('session')}"
        lines.append(line)
    return lines


def render(
    recent: list[str], refs: list[str], ws: str | None, tokens: TokenCounter, max_tokens: int
) -> str | None:
    """The block, or None when every section is empty; shortened to fit ``max_tokens``."""
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


def _place(messages: Messages, block: str, cfg: Config) -> tuple[Messages, str]:
    last = messages[-1]
    if cfg.position == "append" and role(last) in ("user", "tool"):
        return [*messages[:-1], append_text(last, block)], "append"
    return [*messages, {"role": "user", "content": block}], "message"


def _without_block(messages: Messages) -> list[Messages]:
    """``messages`` as they might have been before a block was placed at the tail, when one seems
    to be there (``apply`` then checks it is exactly the block it would place)."""
    last = messages[-1]
    content = last.get("content")
    if isinstance(content, list):
        tail = content[-1] if content else None
        text = tail.get("text") if isinstance(tail, dict) else None
        if isinstance(text, str) and text.startswith(INJECT_OPEN):
            return [[*messages[:-1], with_content(last, content[:-1])]]
        return []
    text = text_of(content)
    if not text.endswith(INJECT_CLOSE):
        return []
    out = []
    if role(last) == "user" and text.startswith(INJECT_OPEN) and len(messages) > 1:
        out.append(messages[:-1])  # a trailing message
    cut = 0 if text.startswith(INJECT_OPEN) else text.rfind("\n\n" + INJECT_OPEN)
    if cut >= 0:
        out.append([*messages[:-1], with_content(last, text[:cut])])  # appended
    return out


def _block(
    ctx: Context,
    cfg: Config,
    messages: Messages,
    placed: dict[str, tuple[tuple[Messages, str], int]] | None = None,
) -> tuple[str | None, InjectSummary]:
    """The block for ``messages``, shrunk to the room left under ``ctx.budget`` (messages and tools
    schema counted); with no room at all, the resolved references alone. Facts for the report.
    ``placed`` receives ``_place``'s answer for the block it returns, with its messages' tokens,
    when it computed them."""
    refs: list[Reference] = list(ctx.report.get("references") or [])
    ref_lines = reference_lines(refs)
    show_recent = cfg.recent_context == "always" or (
        cfg.recent_context == "on_reference"
        and any(r.get("entity") or r.get("abstained") == "ambiguous" for r in refs)
    )
    events = entity_cache.fresh(
        ctx.state.get(entity_cache.NAMESPACE) or [], ctx.now, cfg.ttl_seconds
    )
    recent = recent_lines(events, cfg.max_entities) if show_recent else []
    ws = (
        working_set.render_section(ctx.state)
        if len(messages) >= cfg.working_set_min_messages
        else None
    )
    facts: InjectSummary = {"entities": len(recent), "references": len(ref_lines)}
    block = render(recent, ref_lines, ws, ctx.tokens, cfg.max_tokens)
    if block is None or ctx.budget is None:
        return block, facts
    limit = ctx.budget - ctx.tokens.count_tools(ctx.tools)  # what the messages may take
    room = limit - ctx.tokens.count_messages(messages)
    facts["room"] = room
    cap = min(cfg.max_tokens, room)
    for _ in range(4):  # the block's count is exact; the message around it adds a token or two
        if cap <= 0:
            break
        # render is pure: at the full cap it is the block already rendered
        fitted = block if cap == cfg.max_tokens else render(recent, ref_lines, ws, ctx.tokens, cap)
        if fitted is None:
            break
        out = _place(messages, fitted, cfg)
        size = ctx.tokens.count_messages(out[0])
        over = size - limit
        if over <= 0:
            if fitted != block:
                facts["shrunk"] = True
            if placed is not None:
                placed[fitted] = (out, size)
            return fitted, facts
        cap -= over
    if ref_lines:  # even with no room, what the user's words refer to is worth the overrun
        facts["shrunk"] = True
        return render([], ref_lines, None, ctx.tokens, cfg.max_tokens), facts
    facts["skipped"] = "no room under the budget"
    return None, facts


def apply(ctx: Context, cfg: Config) -> RuleResult:
    messages = ctx.messages
    if not messages or role(messages[-1]) == "assistant":
        return RuleResult.unchanged(ctx)  # a prefill: nothing may follow it
    for base in _without_block(messages):  # idempotent: exactly its block is already there
        block, _ = _block(ctx, cfg, base)
        if block is not None and _place(base, block, cfg)[0] == messages:
            return RuleResult.unchanged(ctx)
    placed: dict[str, tuple[tuple[Messages, str], int]] = {}
    block, facts = _block(ctx, cfg, messages, placed)
    if block is None:
        if "skipped" not in facts:
            return RuleResult.unchanged(ctx)
        return RuleResult.unchanged(
            ctx, {"inject": {"skipped": facts["skipped"], "room": facts["room"]}}
        )
    known = placed.get(block)
    (out, where), size = known if known is not None else (_place(messages, block, cfg), None)
    report: Report = {
        "inject": {
            "position": where,
            "index": len(out) - 1,
            "tokens": ctx.tokens.count_text(block),
            **facts,
        }
    }
    if ctx.budget is not None:
        if size is None:
            size = ctx.tokens.count_messages(out)
        total = size + ctx.tokens.count_tools(ctx.tools)
        if total > ctx.budget:
            report["warnings"] = [
                {"kind": "over_budget", "tokens": total, "budget": ctx.budget, "rule": "inject"}
            ]
    return RuleResult(out, ctx.state, report)
