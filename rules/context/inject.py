"""inject: what the proxy knows, told to the model in blocks wrapped in ``INJECT_OPEN`` …
``INJECT_CLOSE``. Sections in fixed order, empty ones left out: "Recent context" (entities, newest
first), "Resolved references" (from ``resolve_refs``' report), "Working set" (the ledger of
``working_set``). Capped at ``max_tokens``: the oldest entity lines go first, then the working set
is cut (``inject_text``).

A block goes after everything the client sent (appended to the last message when that is a user
or tool message, or as a trailing user message). Once forwarded it is history (``sticky``): later
requests carry it with the same bytes in the same place, so the prompt cache hits past it. A new
block is added only when what it would say changed, and then it says only the change. After a
compaction (prune's report) the stored blocks are stale copies: they are dropped and one whole
block goes at the tail. Nothing is injected when there is nothing new to say.

Only what the model can no longer see (design section 4): with the history intact and the cache
warm, a working-set section repeats what is in front of the model and only adds uncached tokens.
So "Working set" (and entities shown without a reference) is said only where the history was cut
(the request prune compacted, when the prefix is re-billed anyway) or the cache is cold (the
prompt is billed whole either way), and then without the lines the model can still read in the
forwarded messages (``seen``). A resolved reference is always said: its pointer line is
new to the model. A block is redacted as it is rendered, so the bytes stored are the bytes
forwarded, and a stored block is replayed as stored (never rendered or redacted again).
"""

from __future__ import annotations

import operator
from typing import Any, Literal

from pydantic import Field

from rules.base import Context, Messages, RuleConfig, RuleResult
from rules.context import overlay, replay, seen, sticky, working_set
from rules.context.inject_sections import history_hidden, sections
from rules.context.inject_text import (
    DELTA_HEADER,
    HEADER,
    Sections,
    delta,
    recent_lines,
    reference_lines,
    render,
    ws_text,
)
from rules.context.side_call import structured_side_call
from rules.messages import INJECT_CLOSE, INJECT_OPEN, append_text, role, text_of, with_content
from rules.redact import redact_text
from rules.report import InjectSummary, Report
from rules.workspace import workspace_map

SETTLED_MEMO = "inject_settled"  # ``Context.recall`` name: a list, its blocks, the map, options
_NOTICES = ("system", "developer")  # a client's notices in the conversation: not a turn

__all__ = ["HEADER", "Config", "apply", "recent_lines", "reference_lines", "render"]


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
    max_tokens: int = Field(default=1_000, ge=50, description="cap of one block")
    working_set_min_messages: int = Field(
        default=6,
        ge=0,
        description='a shorter request shows its goal and state already: no "Working set" '
        "section, so a plain short request is forwarded byte-identical",
    )
    sticky: bool = Field(
        default=True,
        description="blocks stay where they were forwarded and later ones say only what changed "
        "(prompt-cache neutral); false: one whole block at the tail of every request",
    )
    working_set_when: Literal["hidden", "always"] = Field(
        default="hidden",
        description="`hidden`: the working set (and recent context with no reference) only where "
        "the model can no longer see it: the request a compaction cut the history, or a cold "
        "cache; `always`: whenever it changed",
    )
    say_visible: bool = Field(
        default=False,
        description="false: a working-set line the model can still read in the messages "
        "forwarded with the block (its evidence not elided) is left out; true: said anyway",
    )
    max_blocks: int = Field(
        default=32,
        ge=1,
        description="stored blocks at most: one more collapses them into one whole block",
    )


def _turn_end(messages: Messages) -> int:
    """The index of the latest message that is not a system notice (the last one when none
    follows it): Claude Code sends its deferred-tools notice as a system message after the
    prompt, and the block belongs to the user's turn, not after the client's own notice."""
    i = len(messages) - 1
    while i > 0 and role(messages[i]) in _NOTICES:
        i -= 1
    return i


def _place(messages: Messages, block: str, cfg: Config) -> tuple[Messages, str, int]:
    """``messages`` with ``block`` placed, how, and the index of the message it is on (or
    after)."""
    at = _turn_end(messages)
    host = messages[at]
    if cfg.position == "append" and role(host) in ("user", "tool"):
        return [*messages[:at], append_text(host, block), *messages[at + 1 :]], "append", at
    return [*messages, {"role": "user", "content": block}], "message", len(messages) - 1


def _placed_tokens(ctx: Context, messages: Messages, tokens: int, out: Messages) -> int:
    """``count_messages(out)`` for ``out = _place(messages, …)``, ``tokens`` being
    ``count_messages(messages)``: only one message is new (counts add up per message), at the
    tail or before the system notices that end both lists."""
    count = ctx.tokens.count_message
    if len(out) == len(messages):
        at = next((i for i in range(len(out) - 1, -1, -1) if out[i] is not messages[i]), None)
        return tokens if at is None else tokens - count(messages[at]) + count(out[at])
    return tokens + count(out[-1])


def _without_block(messages: Messages) -> list[Messages]:
    """``messages`` as they might have been before a block was placed at the tail (or on the
    turn before the trailing system notices), when one seems to be there (``apply`` then checks
    it is exactly the block it would place)."""
    out = _without_tail_block(messages)
    at = _turn_end(messages)
    if at < len(messages) - 1:
        notices = messages[at + 1 :]
        out += [[*base, *notices] for base in _without_tail_block(messages[: at + 1])]
    return out


def _without_tail_block(messages: Messages) -> list[Messages]:
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


def _ws_hint(ctx: Context) -> int:
    """The working-set section's cap, as the ledger stores it."""
    return int((ctx.state.get(working_set.NAMESPACE) or {}).get("section_tokens") or 400)


def _rendered(*args: Any) -> str | None:
    """``render``, redacted: the stored block (state is redacted) is then the forwarded one."""
    block = render(*args)
    return None if block is None else redact_text(block)


def _fit(
    ctx: Context,
    cfg: Config,
    messages: Messages,
    parts: Sections,
    is_delta: bool,
) -> tuple[str | None, InjectSummary, tuple[Messages, str, int] | None]:
    """The block saying ``parts``, shrunk to the room left under ``ctx.budget`` (messages and
    tools schema counted); with no room at all, the resolved references alone. Facts for the
    report, and ``_place``'s answer for the block when it was computed on the way."""
    ws = ws_text(parts.ws, is_delta, _ws_hint(ctx))
    header = DELTA_HEADER if is_delta else HEADER
    facts: InjectSummary = {"entities": len(parts.recent), "references": len(parts.refs)}
    block = _rendered(parts.recent, parts.refs, ws, ctx.tokens, cfg.max_tokens, header)
    if block is None or ctx.budget is None:
        return block, facts, None
    limit = ctx.budget - ctx.tokens.count_tools(ctx.tools)  # what the messages may take
    total = ctx.tokens.count_messages(messages)
    room = limit - total
    facts["room"] = room
    cap = min(cfg.max_tokens, room)
    for _ in range(4):  # the block's count is exact; the message around it adds a token or two
        if cap <= 0:
            break
        # render is pure: at the full cap it is the block already rendered
        fitted = (
            block
            if cap == cfg.max_tokens
            else _rendered(parts.recent, parts.refs, ws, ctx.tokens, cap, header)
        )
        if fitted is None:
            break
        out = _place(messages, fitted, cfg)
        over = _placed_tokens(ctx, messages, total, out[0]) - limit
        if over <= 0:
            if fitted != block:
                facts["shrunk"] = True
            return fitted, facts, out
        cap -= over
    if parts.refs:  # even with no room, what the user's words refer to is worth the overrun
        facts["shrunk"] = True
        return _rendered([], parts.refs, None, ctx.tokens, cfg.max_tokens, header), facts, None
    facts["skipped"] = "no room under the budget"
    return None, facts, None


def _shown_after(
    shown: Sections, said: Sections, ws_now: list[tuple[str, str]], block: str, ws_text_: str | None
) -> Sections:
    """What the blocks say together once ``block`` (saying ``said``, maybe shrunk to fit) is
    added: its lines that made it in, and the working set as it now stands when its section made
    it in whole (else the next block tries again)."""
    whole = ws_text_ is None or ws_text_ in block
    return Sections(
        (shown.recent + [x for x in said.recent if x in block])[-100:],
        (shown.refs + [x for x in said.refs if x in block])[-50:],
        ws_now if whole else shown.ws,
    )


def _anchors(ctx: Context, messages: Messages) -> list[str]:
    """The messages' anchors; shared with prune's when it passed the list on unchanged."""
    if messages is ctx.messages:
        return ctx.derived(overlay.MEMO, lambda m: replay.anchors_in(ctx, m))
    return replay.anchors_in(ctx, messages)


class _Plan:
    """One request's placing: the stored blocks replayed, and maybe one new block at the tail."""

    def __init__(self, ctx: Context, cfg: Config, stored: sticky.Stored, clean: Messages) -> None:
        self.report: InjectSummary = {}
        pruned = ctx.report.get("prune") or {}
        compacted = bool(pruned.get("compacted"))
        collapse = bool(stored.blocks) and (compacted or len(stored.blocks) >= cfg.max_blocks)
        # the anchors cost a hash per message: only with blocks to place or to add
        anchors: list[str] | None = _anchors(ctx, clean) if stored.blocks else None
        # each anchor's index (they are unique): which blocks' hosts are here, and where
        index = {} if anchors is None else overlay.anchor_index(ctx, anchors)
        kept = [b for b in stored.blocks if b.at in index]
        lost = len(stored.blocks) - len(kept)
        if collapse:
            # blocks placed before the compaction's first edit are still the cached prefix:
            # they stay (removing one would re-bill everything after it); later ones go
            start = index.get(str(pruned.get("compacted_from")), -1) if compacted else -1
            kept = [b for b in kept if index[b.at] < start]
            self.report["collapsed"] = len(stored.blocks) - lost - len(kept)
        elif lost:
            self.report["lost"] = lost  # their hosts left the conversation (client-side trim)
        # what the model can still read; after a collapse or a loss, the next block is whole
        shown = stored.shown if kept and not lost and not collapse else Sections()
        view = (
            sticky.replay(clean, anchors, kept, ctx.renders, ctx.hash_of, index)
            if anchors is not None
            else clean
        )
        if stored.blocks:
            self.report["sticky"] = len(kept)
        self.messages, self.stored = view, sticky.Stored(kept, shown)
        self.block: str | None = None
        self.warning: int | None = None
        # nothing new to say: the placing is the stored blocks' alone
        self.settled = role(clean[-1]) == "assistant" or structured_side_call(ctx)
        if self.settled:
            return  # a prefill: nothing may follow it; a side call: no help to the agent
        now = sections(ctx, cfg, clean, shown)
        is_delta = not shown.empty()
        said = delta(now, shown) if is_delta else now
        ws_now = now.ws
        if said.ws and not cfg.say_visible:
            unseen = seen.unseen(ctx, clean, said.ws)
            if len(unseen) < len(said.ws):  # left out, not said: the next block judges it again
                left_out = set(said.ws).difference(unseen)
                ws_now = [i for i in now.ws if i not in left_out]
            said = Sections(said.recent, said.refs, unseen)
        self.settled = said.empty()
        if self.settled:
            return
        block, facts, placed = _fit(ctx, cfg, view, said, is_delta)
        self.report.update(facts)
        if block is None:
            return
        out, where, at = placed if placed is not None else _place(view, block, cfg)
        tokens = ctx.tokens.count_text(block)
        # the view's replayed blocks are messages of their own after their hosts: the host is
        # the clean list's message the view's ``at`` stands for (both end the same way)
        host = (anchors if anchors is not None else _anchors(ctx, clean))[at - len(view)]
        block_at = at if where == "append" else at + 1
        self.report.update(
            {"added": True, "delta": is_delta, "position": where, "index": block_at}
        )
        self.report["tokens"] = tokens
        said_ws = ws_text(said.ws, is_delta, _ws_hint(ctx))
        self.stored = sticky.Stored(
            [*kept, sticky.Block(host, where, block, tokens)],
            _shown_after(shown, said, ws_now, block, said_ws),
        )
        self.messages, self.block = out, block
        if ctx.budget is not None:
            total = _placed_tokens(ctx, view, ctx.tokens.count_messages(view), out)
            total += ctx.tokens.count_tools(ctx.tools)
            if total > ctx.budget:
                self.warning = total


def _quiet(ctx: Context, cfg: Config) -> bool:
    """Whether this request's report can add nothing to say (no reference resolved, the
    history neither cut nor cold): what a placing then makes is a function of the messages,
    the stored blocks, the workspace map's namespace and the options, up to a new block."""
    return (
        cfg.working_set_when == "hidden"
        and not ctx.report.get("references")
        and history_hidden(ctx) is None
    )


def apply(ctx: Context, cfg: Config) -> RuleResult:
    messages = ctx.messages
    if not messages:
        return RuleResult.unchanged(ctx)
    raw = ctx.state.get(sticky.NAMESPACE)
    # a resent body on a quiet request: the placing kept for these messages, blocks, options
    # and the anchors prune told of this very list (a view a compaction tried and did not keep
    # is told none: its blocks' hosts are looked up by the view's own anchors)
    key = (
        (raw, ctx.state.get(workspace_map.NAMESPACE), cfg, ctx.told(overlay.MEMO))
        if _quiet(ctx, cfg)
        else None
    )
    if key is not None:
        found, kept = ctx.recall(SETTLED_MEMO, key)
        if found:
            out, facts = kept[0], kept[1].copy()  # the report's own dict, as a fresh one is
            report: Report = {"inject": facts} if facts else {}
            return RuleResult(messages if out is None else list(out), ctx.state, report)
    stored = sticky.Stored.load(raw) if cfg.sticky else sticky.Stored()
    clean = sticky.strip(messages, {b.text for b in stored.blocks}, ctx.memo)
    bases = _without_block(clean)
    for base in bases:  # idempotent: exactly its block is already there
        if _Plan(ctx, cfg, stored, base).messages == messages:
            return RuleResult.unchanged(ctx)
    plan = _Plan(ctx, cfg, stored, clean)
    state = ctx.state
    if cfg.sticky and (raw is not None or plan.stored.blocks):
        value = plan.stored.to_json()
        if value != raw:
            state = state.with_value(sticky.NAMESPACE, value)
    report = {"inject": plan.report} if plan.report else {}
    if plan.warning is not None:
        report["warnings"] = [
            {"kind": "over_budget", "tokens": plan.warning, "budget": ctx.budget, "rule": "inject"}
        ]
    out = plan.messages
    if out is not messages and (
        (len(out) == len(messages) and all(map(operator.is_, out, messages))) or out == messages
    ):
        out = messages
    if key is not None and plan.settled and not bases and state is ctx.state:
        # kept only what no budget, token count or clock decided: nothing new was said
        ctx.keep(SETTLED_MEMO, key, (None if out is messages else tuple(out), plan.report.copy()))
    return RuleResult(out, state, report)
