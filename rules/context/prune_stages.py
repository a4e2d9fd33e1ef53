"""The candidates of each pruning stage, oldest first. Pure functions of the conversation, its
tool observations and the protected evidence; ``prune`` applies them until the target is met."""

from __future__ import annotations

import re
import shlex
from typing import Any

import orjson

from rules.activity.observations import Observation, load_arguments
from rules.base import Message, hash_bytes
from rules.context.evidence import users_own
from rules.messages import OPAQUE_PAIRS, call_arguments_text, call_id, role, tool_calls
from rules.redact import redact_text
from rules.text_cache import text_cache

Range = tuple[int, int | None]  # first and last line (None: to the end of the file)
FULL: Range = (1, None)
_FULL_READ_VERBS = {"cat", "nl", "less", "more", "bat", "open", "view"}


def _arguments_text(messages: list[Message], obs: Observation) -> str:
    for c in tool_calls(messages[obs.call_index]):
        if call_id(c) == obs.call_id:
            return call_arguments_text(c)
    return ""


def _arguments(messages: list[Message], obs: Observation) -> dict[str, Any]:
    return load_arguments(_arguments_text(messages, obs))


_INT = re.compile(r"\s{0,20}(-?[0-9]{1,18})\s{0,20}")  # what ``int`` reads, and bounded


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _INT.fullmatch(value)
        return int(m.group(1)) if m else None
    return None


# the same reads come back on every request of a session; bounded by characters (a command may be
# a heredoc of megabytes)
@text_cache(max_chars=1_000_000, max_text_chars=20_000)
def _shell_range(command: str) -> Range | str:
    """The lines a shell read shows: ``sed -n 'A,Bp'``, ``head -N``; the command itself when they
    cannot be known (``tail``, an unusual sed script), so only the same command covers it."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    verb = argv[0].rsplit("/", 1)[-1] if argv else ""
    if verb == "sed":
        script = next((w for w in argv[1:] if not w.startswith("-")), "")
        m = re.fullmatch(r"(\d+)(?:,(\d+|\$))?p", script)
        if not m:
            return command
        first = int(m.group(1))
        last = m.group(2)
        return (first, None if last == "$" else int(last or first))
    if verb == "head":
        n: int | None = 10
        for k, w in enumerate(argv[1:], 1):
            if w in ("-n", "--lines") and k + 1 < len(argv):
                n = _int(argv[k + 1])
            elif w.startswith("--lines="):
                n = _int(w.split("=", 1)[1])
            elif re.fullmatch(r"-n?\d+", w):
                n = int(w.lstrip("-n"))
        return (1, n) if n is not None and n > 0 else command
    if verb == "tail" or verb not in _FULL_READ_VERBS:
        return command
    return FULL


def read_range(messages: list[Message], obs: Observation) -> Range | str:
    """Which lines of its file a read shows: ``FULL``, a range, or an opaque key (a partial read
    whose lines are unknown, matched only by the same read again). From the call's arguments:
    an editor's ``view_range``, ``offset``/``limit``, ``start_line``/``end_line``, or the shell
    command."""
    if obs.action.command:
        return _shell_range(obs.action.command)
    text = _arguments_text(messages, obs)
    args = load_arguments(text)
    given = _given(args.get("view_range"))
    if given is not None:
        view = _view_range(given)
        first, last = (_int(view[0]), _int(view[1])) if view is not None else (None, None)
        if first is None or last is None:
            return _part(obs, text)
        return (max(first, 1), None if last < 0 else last)
    bounds = {k: _given(args.get(k)) for k in _RANGE_KEYS}
    if any(v is not None and _int(v) is None for v in bounds.values()):
        return _part(obs, text)  # a bound it cannot read: some part, not the whole
    offset, limit = _int(bounds["offset"]), _int(bounds["limit"])
    if offset is not None or limit is not None:
        first = max(offset or 1, 1)
        return (first, first + limit - 1 if limit else None)
    start, end = _int(bounds["start_line"]), _int(bounds["end_line"])
    if start is not None or end is not None:
        return (max(start or 1, 1), end if end and end > 0 else None)
    return FULL


_RANGE_KEYS = ("offset", "limit", "start_line", "end_line")


def _given(value: Any) -> Any:
    """An argument as given, None when it says nothing (absent, null, ``""``, ``[]``, or
    ``"null"`` / ``"[]"`` written as a string)."""
    return None if value in (None, "", [], "null", "[]") else value


def _part(obs: Observation, arguments: str) -> str:
    """The key of a read of some part of its file that ``read_range`` cannot tell: the same
    arguments again are the same read (a digest: bounded, whatever the arguments hold)."""
    return f"{obs.action.tool} {hash_bytes(arguments.encode('utf-8', 'surrogatepass'))}"


def _view_range(value: Any) -> list[Any] | None:
    """An editor's ``view_range``: two numbers, as a list or as that list written in a string
    (``"[360, -1]"``: models send both, and the editor reads both)."""
    if isinstance(value, str) and len(value) <= 64:
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value if isinstance(value, list) and len(value) == 2 else None


_CONTENT_KEYS = ("content", "file_text", "contents", "text", "new_content")
_PARTIAL_KEYS = ("old_str", "old_string", "old_text", "edits", "diff", "patch", "insert_line")


def full_write(messages: list[Message], obs: Observation) -> bool:
    """Whether a write replaced the whole file (a Write/create call with the content, a shell
    heredoc or ``>`` redirect), not part of it (an edit, ``sed -i``, ``>>``, a patch): only a
    whole write makes earlier reads of the file stale."""
    command = obs.action.command
    if command:
        return (
            ">>" not in command
            and "sed " not in command
            and ("<<" in command or " > " in command or command.startswith(">"))
        )
    args = _arguments(messages, obs)
    if any(k in args for k in _PARTIAL_KEYS):
        return False
    return any(isinstance(args.get(k), str) for k in _CONTENT_KEYS)


def _covers(outer: Range, inner: Range) -> bool:
    if outer[0] > inner[0]:
        return False
    return outer[1] is None or (inner[1] is not None and inner[1] <= outer[1])


def supersede(
    observations: list[Observation], protected: set[int], messages: list[Message]
) -> list[tuple[int, str]]:
    """(result index, reason) of older reads re-read or rewritten whole later, older runs of the
    same command and older listings of the same folder. A partial read goes only for a later read
    that covers its lines, or a later full read or whole write of the file; it never supersedes a
    full one. An edit of part of a file supersedes nothing: the old read still shows the rest."""
    later_write: set[str] = set()
    later_reads: dict[str, list[Range | str]] = {}  # file path -> ranges read later
    later_run: set[str] = set()
    later_list: set[str] = set()
    out: list[tuple[int, str]] = []
    for obs in reversed(observations):
        a = obs.action
        if a.kind == "read":
            rng = read_range(messages, obs)
            reads = later_reads.setdefault(a.target, [])
            if obs.result_index not in protected:
                if a.target in later_write:
                    out.append(
                        (
                            obs.result_index,
                            f"superseded by a later write to {redact_text(a.target)}",
                        )
                    )
                elif any(
                    r == rng
                    or (isinstance(r, tuple) and isinstance(rng, tuple) and _covers(r, rng))
                    for r in reads
                ):
                    out.append(
                        (obs.result_index, f"superseded by a later read of {redact_text(a.target)}")
                    )
            reads.append(rng)
        elif a.kind == "write" and full_write(messages, obs):
            later_write.add(a.target)
        elif a.kind == "run":
            if a.target in later_run and obs.result_index not in protected:
                out.append((obs.result_index, "superseded by a later run of the same command"))
            later_run.add(a.target)
        elif a.kind == "list":
            if a.target in later_list and obs.result_index not in protected:
                out.append((obs.result_index, "superseded by a later listing"))
            later_list.add(a.target)
    out.reverse()
    return out


def mask(
    observations: list[Observation], protected: set[int], keep_last: int
) -> list[tuple[int, str]]:
    """(result index, reason) of observations older than the last ``keep_last``."""
    older = observations[: max(0, len(observations) - keep_last)]
    reason = f"older than the last {keep_last} tool results"
    return [(o.result_index, reason) for o in older if o.result_index not in protected]


def current_start(messages: list[Message], first_user: int | None) -> int:
    """Where the current task turn begins; nothing from there on is ever dropped. That is the
    latest user message when it came after the original task, else the last turn (the last
    assistant message and its results, or the last user message), trailing system messages aside.
    A user message of a harness's wrappers only (Claude Code's `<system-reminder>` sent beside a
    `tool_result`) starts no turn: the call those results answer stays in the current one.
    """
    last_user = next(
        (i for i in range(len(messages) - 1, -1, -1) if role(messages[i]) == "user"
         and (i == first_user or not _wrapper_only(messages[i]))),
        None,
    )  # fmt: skip
    if last_user is not None and first_user is not None and last_user > first_user:
        return last_user
    j = len(messages) - 1
    while j >= 0 and (role(messages[j]) == "system" or _wrapper_only(messages[j])):
        j -= 1
    while j > 0 and role(messages[j]) == "tool":
        j -= 1
    return max(j, 0)


def _wrapper_only(m: Message) -> bool:
    """A user's message of text that is all wrappers or blank (an image is the user's own)."""
    if role(m) != "user":
        return False
    content = m.get("content")
    if isinstance(content, list) and any(
        not isinstance(p, dict) or p.get("type") != "text" for p in content
    ):
        return False
    return not users_own(m)


def turns(messages: list[Message], first_user: int | None) -> list[list[int]]:
    """Droppable turns after the first user message and before the current task turn
    (``current_start``): an assistant or user message with the tool results that follow it.
    System messages are never part of a turn."""
    if first_user is None:
        return []
    out: list[list[int]] = []
    for i in range(first_user + 1, current_start(messages, first_user)):
        r = role(messages[i])
        if r in ("assistant", "user"):
            out.append([i])
        elif r == "tool" and out and out[-1] and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([])  # a system message or a stray result: a boundary, never dropped
    return [t for t in out if t]


def droppable(
    turn: list[int], messages: list[Message], protected: set[int], results: dict[str, list[int]]
) -> bool:
    """A turn can go when nothing in it is protected and no call or result in it has its partner
    outside it (``results``: tool_call_id -> indices of the tool messages answering it)."""
    if any(i in protected for i in turn):
        return False
    inside = set(turn)
    ids: set[Any] = {c.get("id") for i in turn for c in tool_calls(messages[i])}  # as sent
    answered = {messages[i].get("tool_call_id") for i in turn if role(messages[i]) == "tool"}
    if not answered <= ids:
        return False
    return all(j in inside for cid in ids for j in results.get(cid, []))


def droppable_turns(
    messages: list[Message],
    observations: list[Observation],
    first_user: int | None,
    protected: set[int],
    dropped: set[int],
) -> list[list[int]]:
    """The turns a compaction may drop (``turns`` that are ``droppable`` and hold no message
    already dropped), oldest first, but turns holding the latest write of a file last: they say
    what changed."""
    results: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        if role(m) == "tool" and isinstance(m.get("tool_call_id"), str):
            results.setdefault(m["tool_call_id"], []).append(i)
    keep_late = latest_write_calls(observations)
    linked = linked_turns(turns(messages, first_user), messages)
    ordered = sorted(linked, key=lambda turn: turn[0] in keep_late)
    return [
        turn
        for turn in ordered
        if not any(i in dropped for i in turn) and droppable(turn, messages, protected, results)
    ]


def linked_turns(found: list[list[int]], messages: list[Message]) -> list[list[int]]:
    """``found`` with the turns whose calls and outputs the chat view cannot show
    (``OPAQUE_PAIRS``) answer each other joined into one, and those with a partner outside
    every turn left out: either would leave an output without its call, or a call unanswered."""
    if not any(OPAQUE_PAIRS in messages[i] for turn in found for i in turn):
        return found
    parent = list(range(len(found)))

    def root(t: int) -> int:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    sides: dict[tuple[str, Any], int] = {}
    for t, turn in enumerate(found):
        for i in turn:
            pairs = messages[i].get(OPAQUE_PAIRS)
            if not isinstance(pairs, dict):
                continue
            for side in ("calls", "outputs"):
                for cid in pairs.get(side) or ():
                    sides[(side, cid)] = t
    pinned: set[int] = set()
    for (side, cid), t in sides.items():
        other = sides.get(("outputs" if side == "calls" else "calls", cid))
        if other is None:
            pinned.add(t)  # its partner is in no turn: in the current one, or before the task
        else:
            parent[root(t)] = root(other)
    groups: dict[int, list[int]] = {}
    for t, turn in enumerate(found):
        groups.setdefault(root(t), []).extend(turn)
    out_pinned = {root(t) for t in pinned}
    return [sorted(g) for r, g in groups.items() if r not in out_pinned]


def latest_write_calls(observations: list[Observation]) -> set[int]:
    """The assistant messages holding a file's latest write: their turns say what changed, so
    they are dropped last."""
    latest: dict[str, int] = {}
    for o in observations:
        if o.action.kind == "write":
            latest[o.action.target] = o.call_index
    return set(latest.values())
