"""working_set: a persisted ledger of the task. Goal (first user request, latest instruction when
it differs), changed files, latest successful writes, open diagnostics from build/test output
(a newer run of the same command supersedes the older one; a passing run closes it), plan items,
and the next repair target. ``inject`` renders it with ``render_section``; messages pass unchanged.

The ledger is persisted, so text enters it redacted (``rules.redact``): a key in the task, a
password in a command or in test output is never stored, and the rendered section says
``[REDACTED]`` from the first request on, the same bytes on every later one.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import Field

from rules.activity.diagnostics import LIBRARY
from rules.activity.observations import (
    Observation,
    high_water,
    observations,
    of_context,
)
from rules.activity.storable import storable, stored_id
from rules.base import Context, ListMemo, Message, RuleConfig, RuleResult, SessionState
from rules.context.assent import answered, is_assent
from rules.context.block_line import one_line
from rules.context.ledger_record import record
from rules.messages import (
    EXAMPLES_END_TURN,
    INJECT_OPEN,
    INTERRUPTED,
    PLACEHOLDER_PREFIX,
    after_examples,
    content_hash,
    harness_turn,
    last_where,
    lenient_hash,
    text_of,
    without_harness,
)
from rules.redact import PREFIX_MARGIN, redacted_prefix
from rules.report import WorkingSetSummary
from rules.text_cache import text_cache

NAMESPACE = "working_set"
DIAGNOSTICS_MEMO = "open_diagnostics"  # its ``Context.table``: a ledger -> its diagnostics
SEEN_WINDOW = 256  # keys of the newest results read: where the previous request stopped
MAX_PENDING = 64  # calls answered only by a proxy placeholder so far
LAST_TURN_MEMO = "working_set_last_turn"  # ``Context.memo`` name: ``last_users_turn``'s
TASK_TEXT_MEMO = "working_set_task_text"  # its ``Context.table``: a user turn -> (limit, text)
EXAMPLES_SCAN = 32  # messages a harness's worked examples may span (Aider's: a few pairs)
LEDGER_MEMO = "working_set_ledger"  # ``Context.keyed`` name: the ledger a list and a ledger gave


class Config(RuleConfig):
    max_changed_files: int = Field(
        default=20, ge=1, description="changed files kept in the ledger (newest last)"
    )
    max_runs: int = Field(
        default=10, ge=1, description="commands whose latest failing diagnostics are kept"
    )
    max_goal_chars: int = Field(
        default=400, ge=40, description="goal and latest instruction, each clipped to this length"
    )
    section_tokens: int = Field(
        default=400,
        ge=50,
        description='cap of the rendered "Working set" section (stored in the ledger)',
    )


def _user_text(message: Message) -> str:
    text = text_of(message.get("content"))
    cut = text.find(INJECT_OPEN)
    text = after_examples(without_harness(text[:cut] if cut >= 0 else text)).strip()
    if text.startswith(INTERRUPTED):  # Claude Code's mark; the user's words, if any, follow it
        end = text.find("]")
        text = text[end + 1 :].strip() if end >= 0 else ""
    return text


def _users_own(message: Message) -> bool:
    text = _user_text(message)
    return bool(text) and not (text.startswith(PLACEHOLDER_PREFIX) or harness_turn(text))


def _is_users_turn(message: Message) -> bool:
    # role(m) == "user", inlined: every message of a request may be looked at
    return message.get("role") == "user" and _users_own(message)


def _first_users_turn(messages: list[Message]) -> Message | None:
    """The user's first own turn past a harness's worked examples (Aider's, ended by its
    ``EXAMPLES_END_TURN``: looked for among the first ``EXAMPLES_SCAN`` messages)."""
    first = None
    for i, m in enumerate(messages):
        if i >= EXAMPLES_SCAN and first is not None:
            break
        if m.get("role") != "user":
            continue
        if i < EXAMPLES_SCAN and text_of(m.get("content")).startswith(EXAMPLES_END_TURN):
            first = None  # the turns before were examples
        elif first is None and _users_own(m):
            first = m
    return first


def last_users_turn(messages: list[Message], memo: ListMemo | None = None) -> int | None:
    """The index of the user's latest own turn (``_is_users_turn``), or None; ``memo``:
    ``last_where``'s."""
    return last_where(messages, _is_users_turn, memo, LAST_TURN_MEMO)


def _clip(text: str, limit: int) -> str:
    """``text`` with its whitespace runs collapsed, cut to ``limit`` characters ("…" last)."""
    # A long text (a pasted task) is normalised from a prefix only: the normalised prefix is a
    # prefix of the normalised whole, so once it is over the limit the cut is the same.
    head = text[: 4 * limit + 64]
    if len(head) < len(text):
        clipped = " ".join(head.split())
        if len(clipped) > limit:
            return clipped[: limit - 1] + "…"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def task_text(message: Message, limit: int) -> str:
    """A user turn as the ledger keeps it: redacted, then clipped. Only a prefix is redacted,
    with room to spare beyond what ``_clip`` reads, so a long pasted task costs no more; it is
    read past its cut (``redacted_prefix``), so a key the cut would split is not kept in part."""
    return _redacted_clip(_user_text(message)[: 4 * (_prefix(limit) + PREFIX_MARGIN)], limit)


def _prefix(limit: int) -> int:
    return 4 * limit + 256


# the latest user turn is the same on every request of an agent's tool loop
@text_cache(max_chars=1_000_000, max_text_chars=100_000)
def _redacted_clip(text: str, limit: int) -> str:
    return _clip(redacted_prefix(text, _prefix(limit)), limit)


def _task_text_of(message: Message, limit: int, texts: dict[int, tuple[Any, Any]]) -> str:
    """``task_text``, kept by the very object (a tool loop's requests resend the same turn)."""
    hit = texts.get(id(message))
    if hit is not None and hit[0] is message and hit[1][0] == limit:
        return hit[1][1]  # type: ignore[no-any-return]
    text = task_text(message, limit)
    texts[id(message)] = (message, (limit, text))
    return text


def build(
    messages: list[Message],
    ledger: dict[str, Any],
    cfg: Config,
    obs_list: list[Observation] | None = None,
    hash_of: Callable[[Message], str] = content_hash,
    memo: ListMemo | None = None,
    texts: dict[int, tuple[Any, Any]] | None = None,
) -> dict[str, Any]:
    """The ledger after reading ``messages``; tool results already read are skipped.
    ``memo``: ``last_users_turn``'s; ``texts``: the user turns' texts (``_task_text_of``)."""
    ledger, texts = {k: v for k, v in ledger.items()}, {} if texts is None else texts
    # The user's own turns: not text the proxy wrote (an orphan result turned into a user
    # message starts with PLACEHOLDER_PREFIX; an injected block alone says nothing either).
    # The first such turn only while there is no goal yet, the latest from the end
    at = last_users_turn(messages, memo)
    last = messages[at] if at is not None else None
    if last is not None and "goal" not in ledger:
        first = _first_users_turn(messages) or last
        ledger["goal"] = _task_text_of(first, cfg.max_goal_chars, texts)
    if last is not None and at is not None:
        latest = _task_text_of(last, cfg.max_goal_chars, texts)
        if is_assent(latest):  # "yes" answers the agent: the instruction it answered stands
            turn_text = partial(_task_text_of, limit=cfg.max_goal_chars, texts=texts)
            latest = answered(messages, at, _is_users_turn, turn_text) or ""
        ledger["instruction"] = latest if latest and latest != ledger.get("goal") else None
    # Only results after the newest one already read (see ``observations.high_water``), plus
    # earlier ones that were only a placeholder then: a client may send a late result in place.
    obs_all = observations(messages) if obs_list is None else obs_list

    def key(obs: Observation) -> str:
        return f"{stored_id(obs.call_id)}:{lenient_hash(hash_of, messages[obs.result_index])[:8]}"

    seen = list(ledger.get("seen", []))[-SEEN_WINDOW:]
    seen_set = set(seen)
    pending = list(ledger.get("pending", []))
    start = high_water(len(obs_all), lambda i: key(obs_all[i]), seen_set)
    todo = [o for o in obs_all[:start] if stored_id(o.call_id) in pending] if pending else []
    calls_at: dict[int, dict[Any, dict[str, Any]]] = {}
    for obs in [*todo, *obs_all[start:]]:
        k = key(obs)
        if k in seen_set:
            continue
        if text_of(messages[obs.result_index].get("content")).startswith(PLACEHOLDER_PREFIX):
            if stored_id(obs.call_id) not in pending:
                pending.append(stored_id(obs.call_id))
            continue
        if stored_id(obs.call_id) in pending:
            pending.remove(stored_id(obs.call_id))
        seen.append(k)
        seen_set.add(k)
        record(ledger, messages, obs, cfg.max_changed_files, cfg.max_runs, calls_at)
    ledger["seen"] = seen[-SEEN_WINDOW:]
    if pending or "pending" in ledger:
        ledger["pending"] = pending[-MAX_PENDING:]
    ledger["section_tokens"] = cfg.section_tokens  # read by render_section (inject's default)
    return storable(ledger)


def diagnostics_of(ctx: Context, ledger: dict[str, Any]) -> list[dict[str, Any]]:
    """``open_diagnostics(ledger)``, once per request for each ledger: this rule's report and
    inject's section read the same one (read-only)."""
    table = ctx.table(DIAGNOSTICS_MEMO)
    hit = table.get(id(ledger))
    if hit is not None and hit[0] is ledger:
        return hit[1]  # type: ignore[no-any-return]
    diags = open_diagnostics(ledger)
    table[id(ledger)] = (ledger, diags)
    return diags


def open_diagnostics(ledger: dict[str, Any]) -> list[dict[str, Any]]:
    """Open diagnostics, newest failing run first."""
    runs = sorted(ledger.get("runs", {}).items(), key=lambda kv: -kv[1]["seq"])
    out, seen = [], set()
    for cmd, run in runs:
        for d in run["diagnostics"]:
            key = (d["file"], d["line"], d["code"], d["message"])
            if key not in seen:  # the same failure from two commands is one open item
                seen.add(key)
                out.append({**d, "command": cmd})
    return out


def next_target(ledger: dict[str, Any]) -> str | None:
    return _first_target(open_diagnostics(ledger))


def _first_target(diagnostics: list[dict[str, Any]]) -> str | None:
    """``next_target`` of the ledger whose ``open_diagnostics`` these are: a place in the
    project's code, not in an installed package or the interpreter's (a ``pip install`` that
    timed out raised in ``ssl.py``: nothing there for the agent to repair)."""
    for d in diagnostics:
        if d.get("file") and d.get("line") and not LIBRARY.search(str(d["file"])):
            return f"{d['file']}:{d['line']}"
    return None


def summary(ledger: dict[str, Any], diags: list[dict[str, Any]] | None = None) -> WorkingSetSummary:
    """The report fragment: data, not prose. ``diags``: ``open_diagnostics(ledger)``, if known."""
    if diags is None:
        diags = open_diagnostics(ledger)  # once: the report and the target both read it
    return {
        "goal": ledger.get("goal") or None,  # redacted and clipped as the ledger holds it
        "instruction": ledger.get("instruction") or None,
        "changed_files": list(ledger.get("changed", [])),
        "latest_writes": [w["path"] for w in ledger.get("writes", [])],
        "open_diagnostics": diags[:10],
        "plan": list(ledger.get("plan", [])),
        "next_target": _first_target(diags),
    }


def section_items(
    state: SessionState,
    open_of: Callable[[dict[str, Any]], list[dict[str, Any]]] = open_diagnostics,
) -> list[tuple[str, str]]:
    """The working set as (key, value) items, in the section's order; a list-valued key (changed
    files, latest writes) gives one item per path. ``inject`` diffs these between blocks."""
    ledger = state.get(NAMESPACE) or {}
    items: list[tuple[str, str]] = []
    if ledger.get("goal"):
        items.append(("Goal", ledger["goal"]))
    if ledger.get("instruction"):
        items.append(("Latest instruction", ledger["instruction"]))
    marks = {"completed": "x", "done": "x", "in_progress": "~", "in-progress": "~",
             "cancelled": "-", "canceled": "-"}  # fmt: skip
    for item in ledger.get("plan", [])[:12]:
        items.append(("Plan", f"[{marks.get(item['status'], ' ')}] {_clip(item['text'], 120)}"))
    items.extend(("Changed files", path) for path in reversed(ledger.get("changed") or []))
    items.extend(("Latest writes", w["path"]) for w in reversed(ledger.get("writes") or []))
    diags = open_of(ledger)  # ``open_diagnostics``, or a request's memo of it
    items.extend(("Open", open_item(d)) for d in diags[:8])
    if len(diags) > 8:
        items.append(("Open", f"… {len(diags) - 8} more"))
    target = _first_target(diags)
    if target:
        items.append(("Next repair target", target))
    return items


def open_item(d: dict[str, Any]) -> str:
    """The "Open" item of a diagnostic: its tool, place, code and message (clipped)."""
    where = f"{d['file']}:{d['line']}" if d.get("file") and d.get("line") else d.get("file")
    parts = [p for p in (d["tool"], where, d.get("code"), _clip(d["message"], 160)) if p]
    return " ".join(str(p) for p in parts)


GROUPED = ("Changed files", "Latest writes", "Folders touched")  # one line each, joined


def render_items(items: list[tuple[str, str]]) -> list[str]:
    """Item lines as the section shows them: grouped keys on one line, the others one each (each
    value the agent's or a tool's text: ``one_line``)."""
    lines: list[str] = []
    grouped: dict[str, list[str]] = {}
    for key, value in ((k, one_line(v)) for k, v in items):
        if key in GROUPED:
            if key not in grouped:
                grouped[key] = []
                lines.append(key)  # its place; filled below
            grouped[key].append(value)
        elif key == "Plan":
            lines.append(f"Plan {value}")
        else:
            lines.append(f"{key}: {value}")
    return [f"{line}: {', '.join(grouped[line])}" if line in grouped else line for line in lines]


def render_section(state: SessionState, max_tokens_hint: int | None = None) -> str | None:
    """The "Working set" section of the injected block, or None when there is nothing to say.

    Deterministic; capped at about ``max_tokens_hint`` tokens (4 characters a token), by default
    the rule's ``section_tokens`` as stored in the ledger."""
    ledger = state.get(NAMESPACE) or {}
    if max_tokens_hint is None:
        max_tokens_hint = int(ledger.get("section_tokens") or 400)
    lines = render_items(section_items(state))
    if not lines:
        return None
    out = "Working set:\n" + "\n".join(f"- {line}" for line in lines)
    limit = max_tokens_hint * 4
    return out if len(out) <= limit else out[: limit - 1] + "…"


def apply(ctx: Context, cfg: Config) -> RuleResult:
    before = ctx.state.get(NAMESPACE) or {}

    def read() -> dict[str, Any]:  # ``before`` itself when nothing new was read
        texts = ctx.table(TASK_TEXT_MEMO)
        new = build(ctx.messages, before, cfg, of_context(ctx), ctx.hash_of, ctx.memo, texts)
        return before if new == before else new

    ledger = ctx.keyed(LEDGER_MEMO, (before, cfg), read)  # the same messages, the same ledger
    state = ctx.state if ledger is before else ctx.state.with_value(NAMESPACE, ledger)
    summed = summary(ledger, diagnostics_of(ctx, ledger))  # the ledger inject reads
    return RuleResult(ctx.messages, state, {"working_set": summed})
