"""What each tool call did, read from its name and arguments: read a file, write one, list a
folder, run a command, update a plan. Shared by working_set and prune (and by the evidence finder).
"""

from __future__ import annotations

import operator
import posixpath
import re
import shlex
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from rules import abandon
from rules.activity.agent_tools import (
    command_value,
    output_header,
    parse_patch,
    patch_argument,
    patch_in_argv,
    patch_in_script,
    patch_succeeded,
    workdir,
)
from rules.activity.call_arguments import load_arguments as load_arguments  # read from here too
from rules.activity.shell_lex import split_commands
from rules.activity.shell_writes import IN_PLACE as _IN_PLACE
from rules.activity.shell_writes import verb as _verb
from rules.activity.shell_writes import written as _written
from rules.base import Context, Message, shared_prefix
from rules.messages import (
    call_arguments_text,
    call_id,
    call_name,
    iter_tool_pairs,
    text_of,
)
from rules.text_cache import text_cache
from rules.tool_pairs import scan_of

# its table in ``Context.table``: tool result message -> ``(exit_code(its text),)``
EXIT_MEMO = "exit_code"
# its table: tool call -> (its result message, call index, result index, its ``Observation``)
OBSERVATION_MEMO = "observation"
OBSERVATIONS = "observations"  # ``Context.derived`` name: a list's observations
READ_TOOLS = {"read", "readfile", "open", "view", "viewfile", "cat", "openfile"}
WRITE_TOOLS = {
    "write", "writefile", "edit", "multiedit", "replace", "create", "insert", "applypatch",
    "notebookedit", "editfile", "strreplace", "createfile",
}  # fmt: skip
EDITOR_TOOLS = {"strreplaceeditor", "strreplacebasededittool", "texteditor"}
LIST_TOOLS = {"ls", "listdirectory", "listdir", "glob", "listfiles"}
# OpenHands' ``task_tracker`` carries its plan as ``task_list`` ({id, title, status, notes})
PLAN_TOOLS = {"todowrite", "todoread", "updateplan", "plan", "writetodos", "todo", "todolist",
              "tasktracker"}  # fmt: skip
SHELL_TOOLS = {
    "bash", "executebash", "runshellcommand", "shell", "terminal", "execcommand", "localshell",
    "runcommand", "runterminalcmd", "executecommand", "run", "shellcommand", "exec",
}  # fmt: skip
PATCH_TOOLS = {"applypatch"}  # Codex: the patch text in ``input`` (or ``patch``)
PATH_KEYS = ("path", "file_path", "filename", "file", "absolute_path", "target_file",
             "notebook_path", "file_name", "dir_path", "directory")  # fmt: skip
# The directory a shell call runs in (Codex's ``workdir``, Gemini CLI's ``dir_path``): part of a
# run's or listing's key.
WORKDIR_KEYS = ("workdir", "cwd", "working_directory", "directory", "dir_path")

_EXIT = (
    re.compile(r"<returncode>(-?\d+)</returncode>"),
    re.compile(r"\[Command finished with exit code (-?\d+)\]"),
    re.compile(r"\[Exit Code: (-?\d+)\]"),  # Gemini CLI's run_shell_command
    re.compile(r"(?im)^(?:exit code|exit status|return code)[:=]?\s*(-?\d+)\s*$"),
)
_READ_CMDS = {"cat", "head", "tail", "nl", "less", "more", "bat", "open", "view"}
_LIST_CMDS = {"ls", "tree", "find", "dir"}
# Programs whose output is not a build/test result: a command made only of these (and writes)
# is a write, not a run.
_QUIET_VERBS = _READ_CMDS | _LIST_CMDS | {
    "echo", "printf", "tee", "sed", "cd", "pushd", "popd", "mkdir", "touch", "cp", "mv", "rm",
    "ln", "chmod", "chown", "true", ":", "export", "set", "unset", "sort", "uniq", "wc", "cut",
    "tr", "grep", "rg", "diff", "base64", "sleep", "wait",
}  # fmt: skip


@dataclass(frozen=True)
class Action:
    """One tool call, classified. ``target`` is the file/folder path or the normalised command."""

    kind: str  # read | write | list | run | plan | other
    tool: str
    target: str
    command: str = ""
    writes: tuple[str, ...] = ()  # files a shell command wrote (a run's too: ``pytest | tee l``)


class Observation(NamedTuple):
    """Immutable; a named tuple because a request builds one per tool result (a frozen
    dataclass costs several times as much to construct)."""

    call_index: int  # the assistant message
    result_index: int  # the tool message
    call_id: str
    action: Action
    exit_code: int | None
    # the call failed whatever its exit code: its tool message says ``is_error`` (Anthropic's
    # tool_result flag), or it is an ``apply_patch`` whose result shows no success
    failed: bool = False


_NOT_ALNUM = re.compile(r"[^a-z0-9]")


def _norm_name(name: str) -> str:
    return _NOT_ALNUM.sub("", name.lower())


def norm_path(path: str) -> str:
    p = path.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") or "."


def shell_action(command: str) -> tuple[str, str, tuple[str, ...]]:
    """(kind, target, files written) of a shell command. A command that only writes files
    (``cat > f <<EOF``, ``sed -i``, ``echo … | tee f``) is a write of the first of them; one that
    also runs a program (a heredoc then ``python t.py``, ``pytest | tee log``, ``make > out``) is
    a run, so its output is read for diagnostics, that still names the files it wrote. Reads and
    listings need a single command and a single file."""
    cmd = " ".join(command.split())
    commands = [c for c in split_commands(command) if c.argv or c.redirects]
    writes: list[str] = []
    for c in commands:
        writes += [w for w in map(norm_path, _written(c)) if w not in writes]
    runs = any(
        _verb(c.argv) not in _QUIET_VERBS
        and not (_verb(c.argv) in _IN_PLACE and _written(c))  # perl -pi: a write, as sed -i
        for c in commands
        if c.argv
    )
    if writes and not runs:
        return "write", writes[0], tuple(writes)
    if len(commands) == 1 and not writes:
        argv = commands[0].argv
        verb, args = _verb(argv), [w for w in argv[1:] if not w.startswith("-")]
        if verb in _READ_CMDS and len(args) == 1:
            return "read", norm_path(args[0]), ()
        if verb == "sed" and "-n" in argv and args:
            return "read", norm_path(args[-1]), ()
        if verb in _LIST_CMDS and verb != "find":
            return "list", f"{verb} {norm_path(args[0]) if args else '.'}", ()
        if verb == "find" and not re.search(r"-exec|-delete", cmd):
            return "list", cmd, ()
    return "run", cmd, tuple(writes)


def _patch_action(name: str, patch: str) -> Action:
    """An ``apply_patch`` call: a write of every file it names (added, updated, moved from and
    to, deleted), its target the first of them."""
    writes: list[str] = []
    for op in parse_patch(patch):
        for path in (op.source, op.path) if op.source else (op.path,):
            if norm_path(path) not in writes:
                writes.append(norm_path(path))
    if not writes:
        return Action("other", name, "")
    return Action("write", name, writes[0], writes=tuple(writes))


def _in_workdir(kind: str, target: str, wd: str) -> str:
    """A run's or listing's key with the directory it ran in: ``pytest`` in ``/a`` is not
    ``pytest`` in ``/b`` (the same as ``cd /a && pytest``). Read and write targets stay as
    written: a patch names files relative to the session's directory, as do reads in it."""
    if kind == "list":
        verb, _, path = target.partition(" ")
        if verb in _LIST_CMDS and verb != "find" and path and not path.startswith(("/", "~")):
            return f"{verb} {norm_path(posixpath.normpath(posixpath.join(wd, path)))}"
        if verb != "find":
            return target
    if kind not in ("run", "list"):
        return target
    return f"cd {shlex.quote(wd)} && {target}"


@text_cache(max_chars=8_000_000)
def classify(name: str, arguments: str) -> Action:
    """Classify a call by its tool name and raw arguments (cached: calls repeat every request)."""
    args = load_arguments(arguments)
    n = _norm_name(name)
    if n in PATCH_TOOLS:
        patch = patch_argument(args)
        if patch is not None:
            return _patch_action(name, patch)
    path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), "")
    raw_command = args.get("command")
    command = raw_command if isinstance(raw_command, str) else ""
    if n in PLAN_TOOLS:
        return Action("plan", name, n)
    if n in EDITOR_TOOLS:
        sub = command.lower()
        if not path:
            return Action("other", name, "")
        if sub in ("view", ""):
            return Action("read", name, norm_path(path))
        return Action("write", name, norm_path(path), writes=(norm_path(path),))
    if n in READ_TOOLS and path:
        return Action("read", name, norm_path(path))
    if n in WRITE_TOOLS and path:
        return Action("write", name, norm_path(path), writes=(norm_path(path),))
    if n in LIST_TOOLS:
        return Action("list", name, f"{n} {norm_path(path or str(args.get('pattern', '.')))}")
    # ``cmd`` (Codex's exec_command), argv lists (``["bash", "-lc", "pytest"]``)
    command = command or command_value(raw_command) or command_value(args.get("cmd")) or ""
    if command and (n in SHELL_TOOLS or not path):
        patch = patch_in_argv(raw_command) or patch_in_script(command)
        if patch is not None:
            return _patch_action(name, patch)
        kind, target, writes = shell_action(command)
        wd = workdir(args, WORKDIR_KEYS)
        if wd:
            target = _in_workdir(kind, target, wd)
        return Action(kind, name, target, " ".join(command.split()), writes)
    return Action("other", name, path and norm_path(path))


def of_context(ctx: Context) -> list[Observation]:
    """``observations(ctx.messages)``, once per request and messages list (prune and working_set
    share it), from the tool pairs track_entities read too."""
    return ctx.derived(OBSERVATIONS, lambda messages: _observed(ctx, messages))


def _observed(ctx: Context, messages: list[Message]) -> list[Observation]:
    """``observations(messages)``: those of a kept list these messages start with (the very
    same objects), and those of the pairs added or answered since (``tool_pairs.Scan.fresh``):
    a pair answered within the kept list keeps its answer, so its observation stands."""
    found = scan_of(ctx)
    exits, seen = ctx.table(EXIT_MEMO), ctx.table(OBSERVATION_MEMO)
    start = found.start
    if start:
        for kept, value in ctx.memo.get(OBSERVATIONS) or ():
            if len(kept) == start and shared_prefix(kept, messages) == start:
                pairs = found.pairs
                fresh = observations(messages, [pairs[i] for i in found.fresh], exits, seen)
                out: list[Observation] = [*value, *fresh]
                if fresh and value and _BY_RESULT(fresh[0]) < _BY_RESULT(value[-1]):
                    out.sort(key=_BY_RESULT)  # a new call answered by an earlier result
                return out
    return observations(messages, found.pairs, exits, seen)


def exit_code(text: str) -> int | None:
    """The exit code a result shows: the one in a Codex-style header first (``Process exited
    with code N`` / ``Exit code: N`` before ``Output:``), else a known footer or line."""
    header = output_header(text)
    if header is not None:
        if header.exit_code is not None:
            return header.exit_code
        text = header.body
    for pattern in _EXIT:
        m = pattern.search(text[:200]) or pattern.search(text[-300:])
        if m:
            return int(m.group(1))
    return None


def observations(
    messages: list[Message],
    pairs: Iterable[tuple[int, dict[str, Any], int | None]] | None = None,
    memo: dict[int, tuple[Any, Any]] | None = None,
    seen: dict[int, tuple[Any, Any]] | None = None,
) -> list[Observation]:
    """Every answered tool call, in the order of its result. ``pairs``: ``iter_tool_pairs``
    of the same messages, when already at hand. ``memo``: the request's ``EXIT_MEMO`` table
    (result message -> ``(exit_code(its text),)``; the runner may know it from an earlier
    request). ``seen``: its ``OBSERVATION_MEMO`` table: a call answered by the same result
    object at the same indices as before (an agent's earlier turns, resent) is that
    observation again, without classifying its call."""
    out = []
    if memo is None:
        memo = {}
    if seen is None:
        seen = {}
    new = tuple.__new__  # Observation(...) without its Python-level __new__: once per tool call
    for ci, call, ri in iter_tool_pairs(messages) if pairs is None else pairs:
        abandon.check()
        if ri is None:
            continue
        result = messages[ri]
        known = seen.get(id(call))
        if known is not None and known[0] is call:
            before = known[1]
            if before[0] is result and before[1] == ci and before[2] == ri:
                out.append(before[3])
                continue
        # call_name, call_arguments_text and call_id inlined for the usual call (string name
        # and arguments): this runs for every tool call of every request
        fn = call.get("function")
        name = fn.get("name") if fn.__class__ is dict else None
        if name.__class__ is not str:
            name = call_name(call)
        args = fn.get("arguments") if fn.__class__ is dict else None
        if args.__class__ is not str:
            args = call_arguments_text(call)
        action = classify(name, args)
        hit = memo.get(id(result))
        if hit is None or hit[0] is not result:
            hit = memo[id(result)] = (result, (exit_code(text_of(result.get("content"))),))
        failed = result.get("is_error") is True or (
            action.kind == "write"
            and _is_patch(action)
            and not patch_succeeded(text_of(result.get("content")))
        )
        cid = call.get("id")
        if cid.__class__ is not str:
            cid = call_id(call)
        observed = new(Observation, (ci, ri, cid, action, hit[1][0], failed))
        seen[id(call)] = (call, (result, ci, ri, observed))
        out.append(observed)
    out.sort(key=_BY_RESULT)
    return out


# (result_index, call_index): the order of ``observations``, read in C
_BY_RESULT = operator.itemgetter(1, 0)


def _is_patch(action: Action) -> bool:
    """A write made by the ``apply_patch`` tool (one run in a shell has an exit code)."""
    return _norm_name(action.tool) in PATCH_TOOLS


def high_water(count: int, key_at: Callable[[int], str], seen: Container[str]) -> int:
    """Where the unread items start: just after the newest item whose key was read before.

    Items are in message order, so everything before that one was read in an earlier request,
    however long ago (a set of every key read would have to grow without bound, and one that
    evicts its oldest keys reads them again). Scanning from the end, it costs one key per new
    item; a client that drops or rewrites its oldest turns does not move it. 0 when no key is
    known (a new session, or a history replaced as a whole)."""
    for i in range(count - 1, -1, -1):
        if key_at(i) in seen:
            return i + 1
    return 0


def plan_items(arguments: str) -> list[dict[str, str]] | None:
    """A full plan ({text, status} items) when the call's arguments carry one, else None."""
    args = load_arguments(arguments)
    for key in ("todos", "plan", "items", "steps", "tasks", "task_list"):
        items = args.get(key)
        if isinstance(items, list) and all(isinstance(i, dict) for i in items):
            out = []
            for item in items:
                text = next(
                    (item[k] for k in ("content", "step", "title", "text", "description", "task")
                     if isinstance(item.get(k), str)),
                    "",
                )  # fmt: skip
                status = item.get("status") if isinstance(item.get("status"), str) else "pending"
                if text:
                    out.append({"text": text, "status": status})
            return out
    return None
