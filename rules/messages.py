"""Message helpers shared by the rules: reading content in any of its shapes, the markers that tag
text the proxy itself wrote (so ``measure`` can count it and nothing re-processes it), hashing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import orjson

from rules.base import ListMemo, Message, frozen
from rules.base import content_hash as content_hash  # re-exported for the rules
from rules.base import shared_prefix as shared_prefix  # re-exported for the rules

# Text written by the proxy is always tagged, so it can be measured, recognised and never leaks
# into the agent's own transcript as if the model had written it.
INJECT_OPEN = "<ctxproxy-context>"
INJECT_CLOSE = "</ctxproxy-context>"
PLACEHOLDER_PREFIX = "[ctxproxy:"
# On a tool message (set by a protocol adapter, never forwarded): it answers a call the provider
# holds in its own history, not one of the messages (a Responses request continuing a stored
# response or conversation, or after an ``item_reference``). It stands without a visible call.
HELD = "ctxproxy_held"
# On a tool message (set by a protocol adapter whose chat view reads a result's text only, never
# forwarded): the result also holds other blocks (images, documents), named by a digest of them
# that tells two results' blocks apart. A message the chain repair writes from such results (a
# duplicate merged into the first, orphans kept as user text) lists them under ``ABSORBED``, so
# the adapter writes their blocks back.
MEDIA = "ctxproxy_media"
ABSORBED = "ctxproxy_absorbed"
# On a message a protocol adapter lowered (never forwarded): which part of the client's body it
# stands for (``proxy.protocols.base.TAG``).
SOURCE_TAG = "ctxproxy_src"
# On a message the chain repair wrote from tool results whose calls are gone (orphans kept as the
# user's text) that an adapter lowered (they carry ``SOURCE_TAG``): those results, so the adapter
# keeps what the chat view does not hold of their blocks (Anthropic's cache breakpoint).
ORPHANS = "ctxproxy_orphans"
# Beside ``MEDIA``: the estimated tokens of those blocks (``rules.media``), so the proxy's count
# of the request sees them. An elision takes both marks off, and the adapter then leaves the
# blocks out of the result it writes.
MEDIA_TOKENS = "ctxproxy_media_tokens"
MEDIA_MARKS = (MEDIA, MEDIA_TOKENS, ABSORBED)
# On a message (set by a protocol adapter, never forwarded): it loads the definitions of deferred
# tools (Anthropic's tool search: a ``tool_reference`` block in a tool result, a server
# ``tool_search_tool_result``). Gone, the tools it loaded are gone for the model: pruning keeps it.
LOADS_TOOLS = "ctxproxy_loads_tools"
# On an assistant message (set by a protocol adapter, never forwarded): the ids of calls and of
# their outputs among its items that the chat view cannot show (a Responses ``local_shell_call``,
# ``computer_call``, ``shell_call`` and their ``*_output``, an MCP approval request and response),
# as ``{"calls": [...], "outputs": [...]}``. An output can lie in a later turn than its call (made
# beside a function call, answered after its output): such turns go together or not at all.
OPAQUE_PAIRS = "ctxproxy_opaque_pairs"


def text_of(content: Any) -> str:
    """The readable text of a message's ``content``: a string, a list of parts, or None."""
    if isinstance(content, str):  # the common shape first
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif isinstance(part.get("content"), (str, list)):
                    parts.append(text_of(part.get("content")))
        return "\n".join(parts)
    return str(content)


def role(message: Message) -> str:
    r = message.get("role")
    return r if isinstance(r, str) else ""


def id_text(value: Any) -> str | None:
    """A call's or a result's id as text: a string as it is, an integer as its digits (some
    clients number their calls; the provider takes strings only, and both sides of a pair say
    the same number), anything else none."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def tool_calls(message: Message) -> list[dict[str, Any]]:
    """The assistant message's tool calls, or [] (None, missing or malformed all read as [])."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, dict)]


def call_id(call: dict[str, Any]) -> str:
    cid = call.get("id")
    return cid if isinstance(cid, str) else ""


def custom_call(call: dict[str, Any]) -> dict[str, Any] | None:
    """A custom tool's call (Chat Completions' ``{"type": "custom", "custom": {"name", "input"}}``,
    free-form input for a tool with no JSON schema): its ``custom`` object, else None."""
    custom = call.get("custom")
    return custom if call.get("type") == "custom" and isinstance(custom, dict) else None


def call_name(call: dict[str, Any]) -> str:
    fn = call.get("function")
    if not isinstance(fn, dict):
        fn = custom_call(call)
    if isinstance(fn, dict):
        name = fn.get("name")
        if isinstance(name, str):
            return name
    return ""


def call_arguments_text(call: dict[str, Any]) -> str:
    """The call's arguments as JSON text; a custom call's input as ``{"input": …}``, as the
    Responses adapter lowers a ``custom_tool_call``."""
    fn = call.get("function")
    custom = custom_call(call) if not isinstance(fn, dict) else None
    if custom is not None:
        raw = custom.get("input")
        return orjson.dumps({"input": raw if isinstance(raw, str) else ""}).decode()
    if isinstance(fn, dict):
        args = fn.get("arguments")
        if isinstance(args, str):
            return args
        if args is not None:
            # sorted keys: the same arguments are the same text (and the same token count)
            # whatever order the client wrote them in
            return orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    return ""


def call_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """Arguments parsed as a JSON object; {} when they are not one."""
    raw = call_arguments_text(call)
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def iter_tool_pairs(messages: list[Message]) -> Iterator[tuple[int, dict[str, Any], int | None]]:
    """(assistant index, call, index of the tool message answering it or None), in order."""
    return iter(tool_pairs(messages))


def tool_pairs(messages: list[Message]) -> list[tuple[int, dict[str, Any], int | None]]:
    """``iter_tool_pairs`` as a list (for ``Context.derived``: track_entities and the
    observations of working_set and prune share one pass)."""
    # role(), tool_calls() and call_id() inlined, one pass: this runs over every message of a
    # request (``m.get("role") == "tool"`` is ``role(m) == "tool"``: only a string equals one)
    answered: dict[str, int] = {}
    calls: list[tuple[int, dict[str, Any], str]] = []
    for i, m in enumerate(messages):
        r = m.get("role")
        if r == "tool":
            tid = m.get("tool_call_id")
            if isinstance(tid, str) and tid not in answered:
                answered[tid] = i
        elif r == "assistant":
            listed = m.get("tool_calls")
            if isinstance(listed, list):
                for call in listed:
                    if isinstance(call, dict):
                        cid = call.get("id")
                        calls.append((i, call, cid if isinstance(cid, str) else ""))
    find = answered.get
    return [(i, call, find(cid)) for i, call, cid in calls]


def with_content(message: Message, content: Any) -> Message:
    """A copy of ``message`` with new content (the original is left as it was)."""
    new = dict(message)
    new["content"] = content
    return new


def append_text(message: Message, text: str) -> Message:
    """A copy of ``message`` with ``text`` appended to its content, keeping the content's shape."""
    content = message.get("content")
    if isinstance(content, list):
        return with_content(message, [*content, {"type": "text", "text": text}])
    base = text_of(content)
    return with_content(message, f"{base}\n\n{text}" if base else text)


def last_index(messages: list[Message], roles: Iterable[str]) -> int | None:
    wanted = set(roles)
    for i in range(len(messages) - 1, -1, -1):
        if role(messages[i]) in wanted:
            return i
    return None


# Text an agent harness wraps into the user's turn, not the user's words: Claude Code's
# ``<system-reminder>`` blocks and its slash commands' echo and output (``/model opus``:
# ``<command-name>``, ``<command-message>``, ``<command-args>``, ``<local-command-stdout>``; a
# custom command's expanded prompt, outside them, stays), Codex's ``<environment_context>`` and
# ``<user_instructions>``, Gemini CLI's ``<session_context>`` (date, OS, workspace and its
# listing, before the prompt).
HARNESS_TAGS = (
    "system-reminder",
    "environment_context",
    "user_instructions",
    "session_context",
    "command-name",
    "command-message",
    "command-args",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",  # Claude Code's note before a local command's output
    "bash-input",  # Claude Code's ``!`` command and what it printed
    "bash-stdout",
    "bash-stderr",
    "INSTRUCTIONS",  # Codex's AGENTS.md, under its "# AGENTS.md instructions for …" heading
)
# A user turn a harness writes, not the user: Claude Code's summary after a compaction of its
# own and its mark of an interruption, OpenHands' nudge when the model answered without a tool
# call, Codex's AGENTS.md. Read from the turn's start (``harness_turn``).
HARNESS_TURNS = (
    "This session is being continued from a previous conversation",
    "Please continue working on the task on whatever approach you think is suitable",
    "# AGENTS.md instructions for ",  # Codex, ahead of the <INSTRUCTIONS> block
    "[Request interrupted by user",  # Claude Code's marker, the user's words come after it
    "Tool call error:",  # mini-swe-agent's answer to a call it could not parse
    # Aider's context turns: the repository's map, the files in the chat (or none), the read-only
    # ones, and the turn that ends its worked examples (``EXAMPLES_END_TURN``)
    "Here are summaries of some files present in my git repo",
    "I am working with you on code in a git repository.",
    "I have *added these files to the chat*",
    "I am not sharing any files that you can edit yet.",
    "I am not sharing the full contents of any files with you yet.",
    "Don't try and edit any existing code without asking me to add the files to the chat!",
    "Here are some READ ONLY files, provided for your reference.",
    "I switched to a new code base. Please don't consider the above files",
    "# Fix any errors below, if possible.",  # its lint reflection, the linter's output after it
)
# Aider's words on the edits it applied, each its whole turn: a user may start a turn so ("I
# updated the files. Now run the tests"), and that turn is the user's
_HARNESS_WHOLE_TURNS = frozenset(
    {"I updated the files.", "I edited the files myself.",
     "I didn't see any properly formatted edits in your reply?!"}
)  # fmt: skip
_COMMIT_REPORT = "I committed the changes with git hash "  # one line: "… & commit msg: …"


def harness_turn(text: str) -> bool:
    """Whether the user turn ``text`` (its leading blanks stripped) is one a harness wrote."""
    if text.startswith(HARNESS_TURNS):
        return True
    text = text.rstrip()
    return text in _HARNESS_WHOLE_TURNS or (text.startswith(_COMMIT_REPORT) and "\n" not in text)

# Aider's turn after its worked examples (a user's ask and the edit answering it, each): the user
# turns before it are the examples', not the user's
EXAMPLES_END_TURN = "I switched to a new code base. Please don't consider the above files"
INTERRUPTED = "[Request interrupted by user"
# A harness's worked example ahead of the task in the first user turn (OpenHands' "--- START OF
# EXAMPLE --- … --- END OF EXAMPLE ---", SWE-agent's "--- DEMONSTRATION --- … --- END OF
# DEMONSTRATION ---"): the task is what follows its end line.
_EXAMPLE_ENDS = ("END OF EXAMPLE", "END OF DEMONSTRATION")


_TASK_HEADING = "NEW TASK DESCRIPTION"  # OpenHands frames the task after its example so
_TASK_END = "END OF NEW TASK DESCRIPTION"  # and closes it so (its format rules follow)


def after_examples(text: str) -> str:
    """``text`` from the line after its last worked example's end line (all of it when none);
    when a "NEW TASK DESCRIPTION" heading follows that line closely (OpenHands' "Do NOT assume
    the environment is the same as in the example above." first), from the line after it, up to
    its "END OF NEW TASK DESCRIPTION" line."""
    at = max(text.rfind(end) for end in _EXAMPLE_ENDS)
    if at < 0:
        return text
    line_end = text.find("\n", at)
    if line_end < 0:
        return ""
    text = text[line_end + 1 :]
    heading = text.find(_TASK_HEADING, 0, 400)
    if heading < 0 or text.endswith("END OF ", 0, heading):
        return text
    line_end = text.find("\n", heading)
    text = "" if line_end < 0 else text[line_end + 1 :]
    end = text.rfind(_TASK_END)
    return text if end < 0 else text[: text.rfind("\n", 0, end) + 1]


def without_harness(text: str) -> str:
    """``text`` without the harness's tagged blocks (found with ``str.find``: linear)."""
    if "<" not in text:
        return text
    for tag in HARNESS_TAGS:
        opening, closing = f"<{tag}>", f"</{tag}>"
        kept: list[str] = []
        pos = 0
        start = text.find(opening)
        while start >= 0:
            end = text.find(closing, start)
            if end < 0:
                break
            kept.append(text[pos:start])
            pos = end + len(closing)
            start = text.find(opening, pos)
        if kept:
            kept.append(text[pos:])
            text = "".join(kept)
    return text


def last_where(
    messages: Sequence[Message],
    found: Callable[[Message], bool],
    memo: ListMemo | None = None,
    name: str = "",
) -> int | None:
    """The index of the last message ``found`` holds for, or None. ``found`` depends on the
    message alone. ``memo`` (``Context.memo``, kept per session) under ``name``: the last list
    looked at and its answer; only the messages after those it shares as the very same objects
    are looked at, unless its answer lay past them (then the shared ones are, from their end)."""
    kept = memo.get(name) if memo is not None else None
    start = shared_prefix(kept[0][0], messages) if kept else 0
    at = _last_in(messages, found, start, len(messages))
    if at is None and kept and start:
        before: int | None = kept[0][1]
        if before is not None and before < start:  # the shared messages end with it
            at = before
        elif before is not None:  # it was not shared: the shared ones are looked at
            at = _last_in(messages, found, 0, start)
        # before is None: the last list had none, nor have the messages it shares
    if memo is not None:
        memo[name] = [(frozen(messages), at)]
    return at


def _last_in(
    messages: Sequence[Message], found: Callable[[Message], bool], start: int, end: int
) -> int | None:
    return next((i for i in range(end - 1, start - 1, -1) if found(messages[i])), None)


def last_of_role(
    messages: Sequence[Message], role: str, near: int, memo: ListMemo, name: str
) -> int | None:
    """The index of the last message of ``role``, or None. Looked for among the last ``near``
    first (most often there: a walk of a few costs less than the memo), then with ``memo``
    (``Context.memo``, kept per session) under ``name``: an answer and the messages from it to
    the end of a list looked at then. When the list holds the same messages at the same place,
    none of them but the first is of ``role``, so only the messages after them are looked at:
    an agent's tool loop resends them with a few more, however far back its user's message
    lies (a chat tool loop: hundreds of calls and results). The slices are compared in C, the
    very objects at once; another object counts only if it is equal (then its role is the
    same). A memo older than the last list is as good: it holds for the messages it names."""
    n = len(messages)
    walked = max(0, n - near)  # from here on, none is of ``role``
    for i in range(n - 1, walked - 1, -1):
        if messages[i].get("role") == role:  # role(), inlined: called on every request
            return i
    kept = memo.get(name)
    start, at = 0, None
    if kept:
        tail, before = kept[0]
        begin = before or 0  # None: that list had none, and the tail is all of it
        end = begin + len(tail)
        if end <= n and messages[begin:end] == tail:
            start, at = end, before
    for i in range(walked - 1, start - 1, -1):
        if messages[i].get("role") == role:
            at = i
            break
    memo[name] = [(messages[at or 0 :], at)]
    return at


def lenient_hash(hash_of: Callable[[Message], str], message: Message) -> str:
    """``hash_of(message)``, or the hash of its JSON where orjson refuses it (lone surrogates,
    ``"\\udcff"``)."""
    try:
        return hash_of(message)
    except (TypeError, UnicodeEncodeError):
        data = json.dumps(message, sort_keys=True, ensure_ascii=True).encode()
        return hashlib.blake2b(data, digest_size=10).hexdigest()
