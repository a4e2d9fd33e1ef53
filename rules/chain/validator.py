"""The one validator of tool chains: used by ``repair_tool_chain`` (nothing to do when it finds
nothing), by the pipeline's final integrity check, and by the tests.

It checks what providers enforce (design section 5):

- ``orphan_result``: a ``tool`` message that does not answer a call of the assistant message
  directly before its block of tool messages (or has no string ``tool_call_id``), unless it is
  marked as answering a call the provider holds (``rules.messages.HELD``) whose id no call
  and no such result before it has;
- ``unanswered_call``: a call not answered before the next non-tool message (or the end);
- ``duplicate_result``: a call answered twice in its block;
- ``duplicate_call_id`` / ``invalid_call_id``: call ids must be unique in the request and be
  ids the upstream accepts (``rules.chain.call_ids``: ``^[a-zA-Z0-9_-]+$`` where its rule is
  not known);
- ``invalid_call``: a call that is not an object with a ``function`` holding a string ``name``
  and ``type: "function"`` (or a ``custom`` holding one and ``type: "custom"``: a custom
  tool's call);
- ``invalid_arguments``: ``arguments`` not a string holding a JSON object (a custom call's
  ``input``: not a string);
- ``empty_tool_calls``: ``tool_calls`` present but an empty array (or not an array);
- ``empty_assistant``: an assistant message with neither text nor calls (nor a refusal, audio
  or a legacy ``function_call``, which answer without either);
- ``null_tool_content``: a tool message whose content is null/missing.

Each violation is ``{kind, index, tool_call_id, message}``.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from rules.base import Context, ListMemo, Message, Messages, shared_prefix
from rules.chain.call_ids import STRICTEST, CallIdRule, rule_named
from rules.messages import HELD, custom_call, text_of
from rules.report import Violation

MEMO = "chain_validator"  # the name of its table in ``Context.table``
VIOLATIONS = "chain_violations"  # ``Context.derived``: a messages list's violations, by id rule


def arguments_ok(call: dict[str, Any]) -> bool:
    """``function.arguments`` is a string holding a JSON object; a custom call's ``input`` is
    a string (free-form: no JSON to hold)."""
    custom = custom_call(call)
    if custom is not None:
        return isinstance(custom.get("input"), str)
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if not isinstance(args, str):
        return False
    try:
        return isinstance(orjson.loads(args), dict)
    except orjson.JSONDecodeError:
        return False


def call_shape_ok(call: Any) -> bool:
    """A function call (``type: "function"``, a ``function`` with a name) or a custom tool's
    (``type: "custom"``, a ``custom`` with a name)."""
    if not isinstance(call, dict):
        return False
    kind = call.get("type")
    fn = call.get("function") if kind == "function" else call.get("custom")
    if kind not in ("function", "custom") or not isinstance(fn, dict):
        return False
    return isinstance(fn.get("name"), str) and bool(fn["name"])


def empty_content(content: Any) -> bool:
    """No readable text (Anthropic rejects empty and whitespace-only text blocks)."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return all(isinstance(p, dict) and p.get("type") == "text" for p in content) and not (
            text_of(content).strip()
        )
    return False


def answered_otherwise(message: Message) -> bool:
    """An assistant turn whose answer is not its content: a refusal, audio (its ``id`` stands for
    what was said), or a legacy ``function_call``. No text, and still not an empty turn."""
    refusal = message.get("refusal")
    return (
        (isinstance(refusal, str) and bool(refusal.strip()))
        or isinstance(message.get("audio"), dict)
        or isinstance(message.get("function_call"), dict)
    )


def _v(kind: str, index: int, tool_call_id: Any, message: str) -> Violation:
    return {
        "kind": kind,
        "index": index,
        "tool_call_id": tool_call_id if isinstance(tool_call_id, str) else None,
        "message": message,
    }


# What one assistant message's own checks found, independent of its position, of the other
# messages and of the upstream's id rule. Memoised per message object for one request. The common
# case, every call well-formed with a string id and no other violation, is just the tuple of its
# ids; otherwise a _Faults: tool_calls present but empty or not an array, (id, shape/arguments
# violation or None) per call, neither text nor calls.
class _Faults(NamedTuple):
    empty_array: bool
    calls: tuple[tuple[Any, str | None], ...]
    empty_assistant: bool


_INVALID_CALL = "call lacks type 'function' or a name"
_INVALID_ARGUMENTS = "arguments are not a JSON object string"


def _facts(m: Message) -> tuple[str, ...] | _Faults:
    calls: Any = m.get("tool_calls")
    empty_array = False
    if calls is None:  # missing or null
        calls = ()
    elif not isinstance(calls, list) or not calls:
        empty_array = True
        calls = ()
    checked = []
    clean = not empty_array
    for call in calls:
        # call_shape_ok and arguments_ok inlined (every call of every request)
        cid: Any = None  # the id as the client sent it: anything
        bad: str | None = "invalid_call"
        if isinstance(call, dict):
            cid = call.get("id")
            fn = call.get("function")
            if call.get("type") == "function" and isinstance(fn, dict):
                name = fn.get("name")
                if isinstance(name, str) and name:
                    bad = "invalid_arguments"
                    args = fn.get("arguments")
                    if isinstance(args, str):
                        try:
                            if isinstance(orjson.loads(args), dict):
                                bad = None
                        except orjson.JSONDecodeError:
                            pass
            elif call.get("type") == "custom" and call_shape_ok(call):
                bad = None if arguments_ok(call) else "invalid_arguments"
        if bad is not None or cid.__class__ is not str:
            clean = False
        checked.append((cid, bad))
    empty_assistant = not calls and empty_content(m.get("content")) and not answered_otherwise(m)
    if clean and not empty_assistant:
        return tuple([c[0] for c in checked])
    return _Faults(empty_array, tuple(checked), empty_assistant)


def _invalid_id(i: int, cid: Any) -> Violation:
    return _v("invalid_call_id", i, cid, f"call id {cid!r} is not one the upstream accepts")


def _replay(
    i: int,
    faults: _Faults,
    seen: set[str],
    out: list[Violation],
    added: list[str],
    accepts: Callable[[Any], bool],
) -> list[Any]:
    """The violations of an assistant message with faults, at index ``i``; its call ids (those
    new to ``seen`` also appended to ``added``)."""
    if faults.empty_array:
        out.append(_v("empty_tool_calls", i, None, "tool_calls is present but empty"))
    ids: list[Any] = []
    for cid, bad in faults.calls:
        ids.append(cid)
        if bad is not None:
            text = _INVALID_CALL if bad == "invalid_call" else _INVALID_ARGUMENTS
            out.append(_v(bad, i, cid, text))
        if not accepts(cid):
            out.append(_invalid_id(i, cid))
        elif cid in seen:
            out.append(_v("duplicate_call_id", i, cid, f"call id {cid!r} is used twice"))
        else:
            seen.add(cid)
            added.append(cid)
    if faults.empty_assistant:
        out.append(_v("empty_assistant", i, None, "assistant message has neither text nor calls"))
    return ids


@dataclass(frozen=True, slots=True)
class Checked:
    """A list's violations, and where a longer list of the same messages first may differ: the
    last unit (an assistant message and its block of tool messages, or an orphan block) may be
    answered or extended by messages after it; the units before it ended on a message of the
    list."""

    violations: list[Violation]
    resume: int  # the index the last unit began at
    kept: int  # the violations found before it
    added: list[str]  # the call ids seen, in order
    added_before: int  # how many of them were seen before it
    held: list[str]  # the ids of results of calls the provider holds (``HELD``), in order
    held_before: int  # how many of them were seen before it


def find_violations(
    messages: Messages,
    memo: dict[int, tuple[Message, Any]] | None = None,
    rule: CallIdRule = STRICTEST,
) -> list[Violation]:
    """Every violation, in message order, call ids judged by ``rule``. ``memo`` (one request's
    table, see ``Context.table``) keeps each assistant message's own checks, so a second pass
    over mostly the same message objects (the final integrity check) re-checks only the new
    ones."""
    return check(messages, memo, rule=rule).violations


def check(
    messages: Sequence[Message],
    memo: dict[int, tuple[Message, Any]] | None = None,
    base: Checked | None = None,
    rule: CallIdRule = STRICTEST,
) -> Checked:
    """``find_violations``; ``base``: the check of a list these messages start with (the very
    same objects) under the same rule, taken over up to its last unit."""
    accepts = rule.accepts
    if memo is None:
        memo = {}
    if base is None:
        out: list[Violation] = []
        added: list[str] = []
        i = 0
        held: list[str] = []
    else:
        out, added, i = base.violations[: base.kept], base.added[: base.added_before], base.resume
        held = base.held[: base.held_before]
    seen_ids: set[str] = set(added)
    n = len(messages)
    held_ids: set[str] = set(held)
    last = (i, len(out), len(added), len(held))
    while i < n:
        m = messages[i]
        r = m.get("role")  # a role that is not a string is neither of these
        if r == "assistant":
            last = (i, len(out), len(added), len(held))
            hit = memo.get(id(m))
            if hit is not None and hit[0] is m:
                facts = hit[1]
            else:
                facts = _facts(m)
                memo[id(m)] = (m, facts)
            if facts.__class__ is tuple:  # well-formed calls with string ids
                ids: Any = facts
                for cid in facts:
                    if not accepts(cid):
                        out.append(_invalid_id(i, cid))
                    elif cid in seen_ids:
                        out.append(
                            _v("duplicate_call_id", i, cid, f"call id {cid!r} is used twice")
                        )
                    else:
                        seen_ids.add(cid)
                        added.append(cid)
                if len(facts) == 1 and i + 1 < n:
                    # The usual turn: one call, answered by the one tool message after it.
                    t = messages[i + 1]
                    if (
                        t.get("role") == "tool"
                        and t.get("tool_call_id") == facts[0]
                        and t.get("content") is not None
                        and (i + 2 >= n or messages[i + 2].get("role") != "tool")
                    ):
                        i += 2
                        continue
                pending: Container[str] = set(facts)  # the ids of the calls to answer
            else:
                ids = _replay(i, facts, seen_ids, out, added, accepts)
                pending = {cid for cid in ids if isinstance(cid, str)}
            if not ids and (i + 1 >= n or messages[i + 1].get("role") != "tool"):
                i += 1  # no calls and no block: nothing more to check here
                continue
            j = i + 1
        elif r == "tool":
            last = (i, len(out), len(added), len(held))
            ids = pending = ()
            j = i  # a tool message reached here is not in an assistant message's block: an orphan
        else:
            i += 1
            continue
        answered: set[str] = set()
        while j < n:
            t = messages[j]
            if t.get("role") != "tool":
                break
            tid = t.get("tool_call_id")
            if t.get("content") is None:
                out.append(_v("null_tool_content", j, tid, "tool message content is null"))
            if tid.__class__ is not str and not isinstance(tid, str):
                out.append(
                    _v("orphan_result", j, tid, "tool message answers no call directly before it")
                )
            elif tid in answered:
                out.append(_v("duplicate_result", j, tid, f"call {tid!r} is answered twice"))
            elif tid in pending:
                answered.add(tid)
            elif t.get(HELD) is True and tid not in seen_ids and tid not in held_ids:
                answered.add(tid)  # its call is in the provider's own history
                held_ids.add(tid)
                held.append(tid)
            else:
                out.append(
                    _v("orphan_result", j, tid, "tool message answers no call directly before it")
                )
            j += 1
        for cid in ids:
            if not isinstance(cid, str):
                out.append(_v("unanswered_call", i, None, "call without an id has no result"))
            elif cid not in answered:
                out.append(_v("unanswered_call", i, cid, f"call {cid!r} has no result"))
        i = max(j, i + 1)
    return Checked(out, last[0], last[1], added, last[2], held, last[3])


def violations_of(ctx: Context) -> list[Violation]:
    """``find_violations(ctx.messages)`` under the upstream's id rule, once per messages list
    (``Context.derived``: a list of the very same messages, as a session's next request holds,
    is not walked again)."""
    memo, table, rule = ctx.memo, ctx.table(MEMO), rule_named(ctx.call_ids)
    name = VIOLATIONS if rule is STRICTEST else f"{VIOLATIONS}:{rule.name}"
    found: Checked = ctx.derived(
        name, lambda messages: _extended(memo, name, messages, table, rule)
    )
    return found.violations


def _extended(
    memo: ListMemo,
    name: str,
    messages: Sequence[Message],
    table: dict[int, tuple[Message, Any]],
    rule: CallIdRule,
) -> Checked:
    """The check of ``messages`` from the kept list whose messages before its last unit are at
    their start, the latest such unit first."""
    base: Checked | None = None
    longest = 0
    for seen, kept in memo.get(name) or ():
        if seen.__class__ is tuple and kept.resume >= longest:  # noqa: SIM102
            # the kept check holds up to its last unit's start: the messages before it must
            # be the same objects (the last one may come back re-lowered, as a moved marker)
            if shared_prefix(seen, messages) > kept.resume:  # after the cheap tests
                base, longest = kept, kept.resume + 1
    return check(messages, table, base, rule)
