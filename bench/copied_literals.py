"""Literals an agent copies from earlier tool output into a tool call: the ground truth of
``bench/next_action.py``. Pure functions over chat messages; every regex is bounded.

**The rule.** For the assistant message at index ``k`` with tool calls (the request that produced
it is ``messages[:k]``), each call's arguments are parsed as JSON (unparsable: the raw string) and
every string value in them, recursively, gives candidates:

(a) *lines*: each line of a string value, stripped, of at least ``LINE_MIN`` (12) characters with
    at least 6 letters or digits, cut to its first ``LINE_MAX`` (300) characters. Every line of
    a value whose key is not ``command``/``cmd`` (``old_str``, ``new_str``, file contents, a
    pattern), and the lines of a multi-line command (a heredoc), not a one-line command as a
    whole (it would only be found where the agent's own call is echoed);
(b) *tokens*: each run of ``[\\w./~@:+-]`` of 6 to 200 characters (leading ``:@+~`` and
    trailing ``.,:;`` trimmed, at least ``TOKEN_MIN`` (6) left) that has the shape of a path or
    an identifier: it contains ``/`` and a letter, or a dot between word characters (``a.py``,
    ``pkg.mod.Class``), or ``_`` and a letter (snake_case), or a lowercase letter followed by an
    uppercase one (CamelCase), or it is hex-ish (hex digits and dashes, with a digit and a
    letter: a SHA, a uuid). Tokens starting with ``-`` (flags), made of digits and punctuation
    only, or in ``COMMON`` are skipped.

A candidate counts (a *copied literal*) when it occurs verbatim in the text of some tool result
before ``k`` and in no user or system message before ``k``, nor in the text or call arguments of
any assistant message before ``k``: its origin is tool output alone (a path the agent typed in
an earlier call, or one the task names, is not a copy). Literals are deduplicated per assistant
message, at most ``MAX_PER_CALL`` (200) per message, each string value read up to
``MAX_VALUE_CHARS``. Its *source* is the most recent tool result before ``k`` containing it; its
*age* is the number of assistant messages in ``messages[source + 1 : k + 1]`` (a result answered
by the call right before ``k`` is 1 turn old).

**Kept.** A literal is kept by a forwarded request when it occurs verbatim in the request's text:
every message's text content (a string, or the text of its parts), placeholders and injected
blocks included, and the string values of every tool call's arguments (parsed as above), joined.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rules.activity.observations import load_arguments
from rules.base import Message
from rules.messages import INJECT_CLOSE, INJECT_OPEN, call_arguments_text, role, text_of, tool_calls

LINE_MIN = 12
LINE_MAX = 300
TOKEN_MIN = 6
MAX_PER_CALL = 200
MAX_VALUE_CHARS = 200_000
COMMAND_KEYS = frozenset({"command", "cmd"})
AGE_BUCKETS = ("<=5", "6-20", ">20")
# Generic tokens found in every tree and every shell session: no evidence of reading a result.
COMMON = frozenset(
    {
        "__init__", "__init__.py", "__main__", "__main__.py", "__name__", "/dev/null", "/tmp",
        "setup.py", "python3", "/usr/bin/env", "site-packages", "README.md", "self.assertEqual",
        "utf-8", "__file__", "print_function",
    }
)  # fmt: skip

_TOKEN = re.compile(r"[\w./~@:+-]{6,200}")  # bounded: at most 200 steps from each start
_DOTTED = re.compile(r"\w\.\w")
_CAMEL = re.compile(r"[a-z][A-Z]")
_HEXISH = re.compile(r"[0-9a-fA-F-]{6,200}")
_LETTER = re.compile(r"[A-Za-z]")
MIN_SAMPLES = 20  # a pack's bucket needs this many samples


def _token_shape(token: str) -> bool:
    """A path or identifier shape (see the module docstring)."""
    if token.startswith("-") or token in COMMON or not _LETTER.search(token):
        return False
    if "/" in token or _DOTTED.search(token) or "_" in token or _CAMEL.search(token):
        return True
    return bool(_HEXISH.fullmatch(token)) and any(c.isdigit() for c in token)


def is_name(literal: str) -> bool:
    """A candidate of the *tokens* kind (a path, identifier or id), not a line."""
    return _TOKEN.fullmatch(literal) is not None and _token_shape(literal)


def _tokens(text: str) -> Iterator[str]:
    for m in _TOKEN.finditer(text):
        token = m.group().lstrip(":@+~").rstrip(".,:;")
        if len(token) >= TOKEN_MIN and _token_shape(token):
            yield token


def _lines(text: str) -> Iterator[str]:
    for line in text.splitlines():
        line = line.strip()[:LINE_MAX]
        if len(line) >= LINE_MIN and sum(c.isalnum() for c in line) >= 6:
            yield line


def _strings(value: Any, key: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """(key, string) for every string value, recursively (bounded depth)."""
    if isinstance(value, str):
        yield key, value[:MAX_VALUE_CHARS]
    elif depth < 8 and isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k), depth + 1)
    elif depth < 8 and isinstance(value, list):
        for v in value:
            yield from _strings(v, key, depth + 1)


def call_strings(call: dict[str, Any]) -> list[tuple[str, str]]:
    """The string values of a call's arguments (the raw text when it is not a JSON object)."""
    raw = call_arguments_text(call)
    args = load_arguments(raw)
    return list(_strings(args)) if args else [("", raw[:MAX_VALUE_CHARS])]


def candidates(message: Message) -> list[str]:
    """Every candidate literal of an assistant message's tool calls, deduplicated, in order."""
    out: dict[str, None] = {}
    for call in tool_calls(message):
        for key, value in call_strings(call):
            if key not in COMMAND_KEYS or "\n" in value:
                out.update(dict.fromkeys(_lines(value)))
            out.update(dict.fromkeys(_tokens(value)))
    return list(out)


def message_text(message: Message) -> str:
    """A message's text and its calls' argument strings, as the kept check reads them."""
    parts = [text_of(message.get("content"))]
    for call in tool_calls(message):
        parts += [v for _, v in call_strings(call)]
    return "\n".join(p for p in parts if p)


def request_text(messages: list[Message]) -> str:
    """The text a forwarded request holds (the kept check: ``literal in request_text(...)``)."""
    return "\x00".join(message_text(m) for m in messages)


def inject_blocks(text: str) -> str:
    """inject's blocks in ``text``, joined (a find loop: linear)."""
    out, at = [], text.find(INJECT_OPEN)
    while at >= 0:
        end = text.find(INJECT_CLOSE, at)
        if end < 0:
            break
        out.append(text[at:end])
        at = text.find(INJECT_OPEN, end)
    return "\x00".join(out)


@dataclass(frozen=True)
class Copied:
    """A literal the assistant message at ``call_index`` copied from tool output."""

    call_index: int
    literal: str
    source: int  # the most recent tool result before call_index that contains it
    age: int  # assistant messages in messages[source + 1 : call_index + 1]


def age_bucket(age: int) -> str:
    return AGE_BUCKETS[0] if age <= 5 else AGE_BUCKETS[1] if age <= 20 else AGE_BUCKETS[2]


def copied_literals(messages: list[Message], until: int | None = None) -> list[Copied]:
    """Every copied literal of the assistant messages before ``until`` (all: None), in order."""
    end = len(messages) if until is None else min(until, len(messages))
    tools: list[tuple[int, str]] = []  # (index, text) of the tool results so far
    tool_text: list[str] = []
    other_text: list[str] = []  # user, system and assistant text and arguments so far
    assistants = [0]  # assistant messages among messages[:i], for each i
    out: list[Copied] = []
    for k in range(end):
        m = messages[k]
        r = role(m)
        assistants.append(assistants[-1] + (r == "assistant"))
        if r == "assistant" and tool_calls(m) and tools:
            found = _copied_at(k, m, tools, "\x00".join(tool_text), "\x00".join(other_text))
            out += [
                Copied(k, lit, src, assistants[k + 1] - assistants[src + 1]) for lit, src in found
            ]
        if r == "tool":
            text = text_of(m.get("content"))
            tools.append((k, text))
            tool_text.append(text)
        else:
            other_text.append(message_text(m))
    return out


def _copied_at(
    k: int, message: Message, tools: list[tuple[int, str]], tool_blob: str, other_blob: str
) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for literal in candidates(message):
        if literal in tool_blob and literal not in other_blob:
            source = next((i for i, text in reversed(tools) if literal in text), None)
            if source is None:  # across two results' boundary
                continue
            found.append((literal, source))
            if len(found) >= MAX_PER_CALL:
                break
    return found


# ---------------------------------------------------------------- reuse samples


def learn_table(learn: Counter[tuple[str, bool, str, bool]]) -> dict[str, dict[str, list[int]]]:
    """Feature -> value -> [samples, copied later]."""
    table: dict[str, dict[str, list[int]]] = {}
    for (kind, in_use, age, copied), n in learn.items():
        keys = {
            "base": "all",
            "by_kind": kind,
            "in_use": str(in_use).lower(),
            "by_age": age,
            "by_kind_in_use": f"{kind}|{str(in_use).lower()}",
        }
        for feature, value in keys.items():
            cell = table.setdefault(feature, {}).setdefault(value, [0, 0])
            cell[0] += n
            cell[1] += n * copied
    return table
