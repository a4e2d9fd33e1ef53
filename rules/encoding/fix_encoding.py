"""fix_encoding: tool output that was decoded with the wrong code page (UTF-8 read as cp1252 or
latin-1, or as cp949 on Korean Windows) is repaired before the model reads it (see
``rules.encoding.mojibake``). Each fixed message is reported under ``repairs`` as
``{kind: "mojibake", index, tool_call_id, action: "utf8_read_as_<codec>", lines}``.
Text that is already correct is untouched; with nothing to fix the rule returns its input list.
A file read's result is left as it is: what a read shows is what the file holds (the harness
decoded its bytes as UTF-8), mojibake included, and the agent copies its lines into an edit's
``old_str``, which must match the file's text, not a repaired one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rules.activity.observations import classify
from rules.activity.run_class import only_shows
from rules.base import Context, Message, RuleConfig, RuleResult, frozen
from rules.encoding.mojibake import Fix, fix_text
from rules.messages import call_arguments_text, call_name, shared_prefix
from rules.report import Repair

CLEAN_MEMO = "fix_encoding_clean"  # ``Context.memo`` name: the last list with nothing to fix


class Config(RuleConfig):
    roles: tuple[Literal["tool", "user", "assistant", "system"], ...] = Field(
        default=("tool",),
        description="whose messages to repair (tool, user, assistant, system): tool output "
        "by default",
    )
    cp949: bool = Field(
        default=True,
        description="also undo UTF-8 read as cp949 (Korean Windows); ftfy covers the "
        "single-byte code pages",
    )
    max_chars: int = Field(
        default=500_000,
        ge=1,
        description="longer texts are left alone, so the time per request stays bounded",
    )


def _fix_content(content: Any, cfg: Config) -> tuple[Any, list[Fix]]:
    if isinstance(content, str):
        if len(content) > cfg.max_chars:
            return content, []
        return fix_text(content, cp949=cfg.cp949)
    if not isinstance(content, list):
        return content, []
    fixes: list[Fix] = []
    parts: list[Any] = []
    for part in content:
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str) and len(text) <= cfg.max_chars:
            fixed, found = fix_text(text, cp949=cfg.cp949)
            if found:
                part = {**part, "text": fixed}
                fixes.extend(found)
        parts.append(part)
    return (parts, fixes) if fixes else (content, [])


class _CallsBefore:
    """The assistant calls by id before a position, the nearest of an id winning: one pass
    over the list, advanced only when a tool message has something to fix (a search back
    from each such message was quadratic in them)."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages, self.read_to = messages, 0
        self.by_id: dict[str, dict[str, Any]] = {}

    def answers_a_read(self, index: int) -> bool:
        """Whether the tool message at ``index`` answers a call that read a file (a read tool,
        an editor's view, ``cat``/``sed -n`` of one file) or a command that only shows what
        files hold (``grep``, ``git diff``, ``cat`` of several: ``run_class.only_shows``)."""
        for m in self.messages[self.read_to : index]:
            calls = m.get("tool_calls") if m.get("role") == "assistant" else None
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    self.by_id[call["id"]] = call
        self.read_to = max(self.read_to, index)
        tid = self.messages[index].get("tool_call_id")
        call = self.by_id.get(tid) if isinstance(tid, str) else None
        if call is None:
            return False
        action = classify(call_name(call), call_arguments_text(call))
        # a command that only shows what files hold (`grep -rn Ã data/`, `git diff`, `cat a b`)
        return action.kind == "read" or (bool(action.command) and only_shows(action.command))


def apply(ctx: Context, cfg: Config) -> RuleResult:
    out: list[Message] | None = None
    repairs: list[Repair] = []
    roles, messages = cfg.roles, ctx.messages
    # the messages the session's last list shares at the start (the same objects): that list
    # had nothing to fix under these options (``Context.memo``), so they have none
    kept = ctx.memo.get(CLEAN_MEMO)
    # (the options: the very object first, pydantic's ``==`` costs ~2 µs)
    same = bool(kept) and (kept[0][1] is cfg or kept[0][1] == cfg)  # type: ignore[index]
    start = shared_prefix(kept[0][0], messages) if same else 0  # type: ignore[index]
    calls: _CallsBefore | None = None  # made once a tool message has something to fix
    for i in range(start, len(messages)):
        m = messages[i]
        if m.get("role") not in roles:  # role(m), inlined (roles are non-empty strings)
            continue
        content = m.get("content")
        if content.__class__ is str and content.isascii():
            continue  # nothing to fix in ASCII (fix_text's own first answer)
        content, fixes = _fix_content(content, cfg)
        if not fixes:
            continue
        if m.get("role") == "tool":
            calls = _CallsBefore(messages) if calls is None else calls
            if calls.answers_a_read(i):
                continue
        if out is None:
            out = list(ctx.messages)
        out[i] = {**m, "content": content}
        tid = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
        for fix in fixes:
            repairs.append(
                {
                    "kind": "mojibake",
                    "index": i,
                    "tool_call_id": tid,
                    "action": f"utf8_read_as_{fix.codec}",
                    "lines": fix.lines,
                }
            )
    if out is None:
        ctx.memo[CLEAN_MEMO] = [(frozen(messages), cfg)]
        return RuleResult.unchanged(ctx)
    return RuleResult(out, ctx.state, {"repairs": repairs})
