"""The final integrity check of a forwarded Anthropic or Responses body, in each protocol's own
terms (the chat view's check runs in the pipeline). It firing is a bug of ours, logged and
reported: the tests run the same checks on what reached the upstream.

Anthropic: each ``tool_use`` is answered by a ``tool_result`` at the start of the next (user)
message, no result answers nothing, ids are unique and match ``^[a-zA-Z0-9_-]+$``, text blocks
are not empty. Responses: each ``function_call`` / ``custom_tool_call`` has an output with its
``call_id`` and no output lacks its call, nor answers a call of another kind (a
``function_call_output`` for a ``custom_tool_call``: the upstream pairs them by type); a
reasoning item is followed by an item of the turn.

Both can resume from the state they had, in a session's previous request, a few messages before
its end (``checked_violations``, ``responses_checked``): an agent's next request forwards the same
messages up to there, and checking only the rest keeps the check's cost to what changed. Anthropic
proves it by the facts' identity (kept with the reused liftings), Responses by its adapter's
reused lifting (the same JSON items)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import is_
from typing import Any

from proxy.protocols.responses_parts import References, output_call_id, provider_history

_ID = re.compile(r"[a-zA-Z0-9_-]+")


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _leading_results(message: Any) -> list[Any]:
    """The ``tool_use_id``s of the results a message starts with."""
    leading: list[Any] = []
    for b in _blocks(message):
        if not (isinstance(b, dict) and b.get("type") == "tool_result"):
            break
        leading.append(b.get("tool_use_id"))
    return leading


def _answered(uid: Any, ids: set[Any]) -> bool:
    try:
        return uid in ids
    except TypeError:  # an unhashable id (a list …) answers nothing
        return False


# What the check reads of one message (``message_facts``): whether it is an assistant's, its
# blank text blocks, its ``tool_use`` ids (an assistant's), its ``tool_result`` ids (another's),
# the ids of the results it starts with, and whether every id it uses is a string and every
# ``tool_use`` id well-formed (the check's common case, taken on a shorter path)
Facts = tuple[bool, int, tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], bool]
_SCALARS = (str, int, float, bool, type(None))
_NONE: frozenset[Any] = frozenset()
_DICT = repeat(dict)


def message_facts(message: dict[str, Any]) -> Facts:
    assistant = message.get("role") == "assistant"
    blanks = 0
    uses: list[Any] = []
    results: list[Any] = []
    for b in _blocks(message):
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            text = b.get("text")
            # most texts start with a visible character: no strip (a copy) needed
            if not isinstance(text, str) or ((not text or text[0].isspace()) and not text.strip()):
                blanks += 1
        elif kind == "tool_use":
            if assistant:
                uses.append(b.get("id"))
        elif kind == "tool_result" and not assistant:
            results.append(b.get("tool_use_id"))
    plain = all(u.__class__ is str and _ID.fullmatch(u) for u in uses) and all(
        r.__class__ is str for r in results
    )
    leading = tuple(_leading_results(message))
    return assistant, blanks, tuple(uses), tuple(results), leading, plain


def kept_facts(message: dict[str, Any]) -> Facts | None:
    """``message_facts``, to keep with a message's content across requests: None when an id is
    not a scalar (a list, say: the facts would share an object the forwarded body holds)."""
    facts = message_facts(message)
    for ids in facts[2:5]:
        if any(x.__class__ not in _SCALARS for x in ids):
            return None
    return facts


def anthropic_violations(
    body: dict[str, Any], known: Sequence[Facts | None] | None = None
) -> list[str]:
    """``known``: the facts of ``body["messages"]``, one per message (None: read from it), where
    the caller has them from the messages' content."""
    return anthropic_checked(body, known)[0]


def anthropic_checked(
    body: dict[str, Any],
    known: Sequence[Facts | None] | None = None,
    resume: Checked | None = None,
    keep: int = -1,
) -> tuple[list[str], Checked | None]:
    """``anthropic_violations``, resumed from ``resume`` where it holds, and the state to resume
    the next request's check from (its ``keep``-th fact, counted from the end)."""
    messages = body.get("messages") or []
    if known is None or len(known) != len(messages):
        known = None
    if known is not None and None not in known and all(map(isinstance, messages, _DICT)):
        facts: Sequence[Facts] = known  # type: ignore[assignment]
    else:
        facts = [
            (known[i] if known is not None else None) or message_facts(m)
            for i, m in enumerate(messages)
            if isinstance(m, dict)
        ]
    return checked_violations(facts, resume, len(facts) + keep if keep < 0 else keep)


@dataclass(frozen=True, slots=True)
class Checked:
    """``violations_of``'s state after the first ``len(facts) - 1`` facts (it read one more: a
    message's calls are answered at the start of the next), kept to resume the next request's
    check when its facts start with these very objects. Identity, not equality: facts equal as
    tuples (an id ``1`` and an id ``True``) can be worded differently in a finding."""

    facts: tuple[Facts, ...]
    out: tuple[str, ...]
    unknown: tuple[str, ...]
    seen: frozenset[Any]
    answered: frozenset[Any]


def violations_of(facts: Sequence[Facts]) -> list[str]:
    """The findings for messages with these facts, in order; results for unknown ids are listed
    after the other findings, as they always were."""
    return checked_violations(facts)[0]


def _resumes(resume: Checked | None, facts: Sequence[Facts]) -> bool:
    n = len(resume.facts) if resume is not None else 0
    return 0 < n <= len(facts) and all(map(is_, resume.facts, facts))  # type: ignore[union-attr]


def checked_violations(
    facts: Sequence[Facts], resume: Checked | None = None, keep: int = -1
) -> tuple[list[str], Checked | None]:
    """``violations_of``, from ``resume`` on where these facts start with its very facts, and
    the state before the ``keep``-th fact (None: ``keep`` out of range)."""
    last = len(facts) - 1
    if resume is not None and _resumes(resume, facts):
        start = len(resume.facts) - 1
        out, unknown = list(resume.out), list(resume.unknown)
        seen: set[Any] = set(resume.seen)
        answered_ok: Any = resume.answered
    else:
        start, out, unknown, seen = 0, [], [], set()
        answered_ok = _NONE  # the ids the previous message's tool_use blocks called
    checked = None
    for i in range(start, last + 1):
        if i == keep:  # every message before it had a next one: valid wherever these facts are
            checked = Checked(tuple(facts[: i + 1]), tuple(out), tuple(unknown), frozenset(seen),
                              frozenset(answered_ok))  # fmt: skip
        assistant, blanks, uses, results, _, plain = facts[i]
        if blanks and not (i == last and assistant):
            out.extend([f"messages[{i}]: empty text block"] * blanks)
        if not assistant:
            for uid in results:
                if not (uid in answered_ok if plain else _answered(uid, answered_ok)):
                    unknown.append(f"messages[{i}]: tool_result for an unknown tool_use id")
            answered_ok = _NONE
            continue
        if not uses:
            answered_ok = _NONE
            continue
        if plain:  # strings, each well-formed: only uniqueness to check
            answered_ok = set(uses)
            for uid in uses:
                if uid in seen:
                    out.append(f"messages[{i}]: tool_use id {uid!r} is not unique")
                seen.add(uid)
        else:
            answered_ok = set()
            for uid in uses:
                with contextlib.suppress(TypeError):  # an unhashable id calls nothing
                    answered_ok.add(uid)
                if not isinstance(uid, str) or not _ID.fullmatch(uid):
                    out.append(f"messages[{i}]: tool_use id {str(uid)[:40]!r} is malformed")
                    continue
                if uid in seen:
                    out.append(f"messages[{i}]: tool_use id {uid!r} is not unique")
                seen.add(uid)
        if i < last:  # a request may end on the calls (a prefill): nothing to answer
            leading: Collection[Any] = facts[i + 1][4]
            if len(uses) > 8 and len(leading) > 8:  # thousands of parallel calls: not N × N
                with contextlib.suppress(TypeError):  # an unhashable id: compared one by one
                    leading = frozenset(leading)
            missing = [u for u in uses if u not in leading]
            if missing:
                out.append(f"messages[{i}]: tool_use ids {missing[:3]} without tool_result after")
    return out + unknown, checked


# the calls a client answers with an output of the same id (a computer's is not checked: the
# repair writes none of its outputs)
_CALL_KINDS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call"}
)
_OUTPUT_KINDS = frozenset(f"{k}_output" for k in _CALL_KINDS)
# a function's and a custom call's output must be of its call's type (the upstream pairs them so);
# a local shell call is answered by a ``function_call_output`` too (Codex)
_TYPED: dict[Any, str] = {
    "function_call": "function",
    "function_call_output": "function",
    "custom_tool_call": "custom",
    "custom_tool_call_output": "custom",
}


def responses_violations(body: dict[str, Any], known: Any = None) -> list[str]:
    return responses_checked(body)[0]


@dataclass(frozen=True, slots=True)
class ItemsChecked:
    """``responses_checked``'s state after the first ``count`` items (it read one more: a
    reasoning item is followed by an item of its turn), kept to resume the check of a body whose
    first ``count + 1`` items are the same JSON values (the caller knows which)."""

    count: int
    calls: dict[Any, int]
    outputs: dict[Any, int]
    ids: dict[str, int]  # each item's own id, where first said
    out: tuple[str, ...]
    held: bool  # found for a body continuing the provider's history: only such a body resumes it


def responses_checked(
    body: dict[str, Any], resume: ItemsChecked | None = None, keep: int = -1
) -> tuple[list[str], ItemsChecked | None]:
    """``responses_violations``, from ``resume`` on (None: from the start), and the state
    before item ``keep`` (None: out of range)."""
    items = body.get("input")
    if not isinstance(items, list):
        return [], None
    last = len(items) - 1
    held = provider_history(body)
    references = References(items)
    if resume is not None and resume.count <= last and resume.held == held:
        start, out = resume.count, list(resume.out)
        calls, outputs, ids = dict(resume.calls), dict(resume.outputs), dict(resume.ids)
    else:
        start, out, calls, outputs, ids = 0, [], {}, {}, {}
    checked = None
    for i in range(start, last + 1):
        if i == keep:  # every item before it had a next one
            checked = ItemsChecked(i, dict(calls), dict(outputs), dict(ids), tuple(out), held)
        item = items[i]
        kind = item.get("type") if isinstance(item, dict) else None
        own = (
            item.get("id") if kind != "local_shell_call_output" and isinstance(item, dict) else None
        )
        if isinstance(own, str):  # a local shell output's id names its call
            if own in ids:
                out.append(f"input[{i}]: id {own[:40]!r} said again (first at input[{ids[own]}])")
            else:
                ids[own] = i
        if kind in _CALL_KINDS:
            calls.setdefault(item.get("call_id"), i)
        elif kind in _OUTPUT_KINDS:
            cid = output_call_id(item)
            outputs.setdefault(cid, i)
            at, typed = calls.get(cid), _TYPED.get(kind)
            if at is None:
                if not (held or references.before(i)):
                    out.append(f"input[{i}]: output for call_id not called before")
            elif typed is not None and _TYPED.get(items[at].get("type"), typed) != typed:
                out.append(f"input[{i}]: {kind} for the {items[at].get('type')} at input[{at}]")
        elif kind == "reasoning":
            nxt = items[i + 1] if i < last else None
            if (
                not isinstance(nxt, dict)
                or str(nxt.get("type")).endswith("_output")
                or (nxt.get("role") in ("user", "system", "developer"))
            ):
                out.append(f"input[{i}]: reasoning item without the item that followed it")
    if body.get("previous_response_id") is None:
        for cid, i in calls.items():
            if cid not in outputs and i != last:
                out.append(f"input[{i}]: call {str(cid)[:40]!r} has no output")
    return out, checked
