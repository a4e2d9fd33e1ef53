"""What each tool call did, read from its name and arguments: read a file, write one, list a
folder, run a command, update a plan. Shared by working_set and prune (and by the evidence finder).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

import orjson

from rules.base import Message
from rules.messages import call_arguments_text, call_id, call_name, iter_tool_pairs, text_of

READ_TOOLS = {"read", "readfile", "open", "view", "viewfile", "cat", "openfile"}
WRITE_TOOLS = {
    "write", "writefile", "edit", "multiedit", "replace", "create", "insert", "applypatch",
    "notebookedit", "editfile", "strreplace", "createfile",
}  # fmt: skip
EDITOR_TOOLS = {"strreplaceeditor", "strreplacebasededittool", "texteditor"}
LIST_TOOLS = {"ls", "listdirectory", "listdir", "glob", "listfiles"}
PLAN_TOOLS = {"todowrite", "todoread", "updateplan", "plan", "writetodos", "todo", "todolist"}
SHELL_TOOLS = {
    "bash", "executebash", "runshellcommand", "shell", "terminal", "execcommand", "localshell",
    "runcommand", "runterminalcmd", "executecommand", "run",
}  # fmt: skip
PATH_KEYS = ("path", "file_path", "filename", "file", "absolute_path", "target_file",
             "notebook_path", "file_name", "dir_path", "directory")  # fmt: skip

_EXIT = (
    re.compile(r"<returncode>(-?\d+)</returncode>"),
    re.compile(r"\[Command finished with exit code (-?\d+)\]"),
    re.compile(r"(?im)^(?:exit code|exit status|return code)[:=]?\s*(-?\d+)\s*$"),
)
_READ_CMDS = {"cat", "head", "tail", "nl", "less", "more", "bat", "open", "view"}
_LIST_CMDS = {"ls", "tree", "find", "dir"}
_REDIRECT = re.compile(r"(?<![0-9&])>>?\s*(?P<path>[^\s&|;<>]+)")
_SEP = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


@dataclass(frozen=True)
class Action:
    """One tool call, classified. ``target`` is the file/folder path or the normalised command."""

    kind: str  # read | write | list | run | plan | other
    tool: str
    target: str
    command: str = ""


@dataclass(frozen=True)
class Observation:
    call_index: int  # the assistant message
    result_index: int  # the tool message
    call_id: str
    action: Action
    exit_code: int | None


def _norm_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def norm_path(path: str) -> str:
    p = path.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") or "."


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def classify_shell(command: str) -> tuple[str, str]:
    """(kind, target) of a shell command: writes win over reads, reads need a single file."""
    cmd = " ".join(command.split())
    if re.search(r"\bsed\s+(-\w*\s+)*-i", cmd):
        words = _words(cmd.split("&&")[-1])
        return "write", norm_path(words[-1]) if words else cmd
    for m in _REDIRECT.finditer(cmd.split("<<")[0] if "<<" in cmd else cmd):
        if not m["path"].startswith("/dev/"):
            return "write", norm_path(m["path"])
    m = re.search(r"\btee\s+(?:-a\s+)?(?P<path>[^\s&|;<>]+)", cmd)
    if m:
        return "write", norm_path(m["path"])
    if re.search(r"\b(?:git apply|patch\s)", cmd):
        return "run", cmd
    segments = [s for s in _SEP.split(cmd) if s]
    if len(segments) == 1:
        words = _words(segments[0])
        if words:
            verb, args = words[0], [w for w in words[1:] if not w.startswith("-")]
            if verb in _READ_CMDS and len(args) == 1:
                return "read", norm_path(args[0])
            if verb == "sed" and "-n" in words and args:
                return "read", norm_path(args[-1])
            if verb in _LIST_CMDS and verb != "find":
                return "list", f"{verb} {norm_path(args[0]) if args else '.'}"
            if verb == "find" and not re.search(r"-exec|-delete", cmd):
                return "list", cmd
    return "run", cmd


@lru_cache(maxsize=8192)
def classify(name: str, arguments: str) -> Action:
    """Classify a call by its tool name and raw arguments (cached: calls repeat every request)."""
    try:
        args = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    n = _norm_name(name)
    path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), "")
    command = args.get("command") if isinstance(args.get("command"), str) else ""
    if n in PLAN_TOOLS:
        return Action("plan", name, n)
    if n in EDITOR_TOOLS:
        sub = command.lower()
        if not path:
            return Action("other", name, "")
        return Action("read" if sub in ("view", "") else "write", name, norm_path(path))
    if n in READ_TOOLS and path:
        return Action("read", name, norm_path(path))
    if n in WRITE_TOOLS and path:
        return Action("write", name, norm_path(path))
    if n in LIST_TOOLS:
        return Action("list", name, f"{n} {norm_path(path or str(args.get('pattern', '.')))}")
    if command and (n in SHELL_TOOLS or not path):
        kind, target = classify_shell(command)
        return Action(kind, name, target, " ".join(command.split()))
    return Action("other", name, path and norm_path(path))


def exit_code(text: str) -> int | None:
    for pattern in _EXIT:
        m = pattern.search(text[:200]) or pattern.search(text[-300:])
        if m:
            return int(m.group(1))
    return None


def observations(messages: list[Message]) -> list[Observation]:
    """Every answered tool call, in the order of its result."""
    out = []
    for ci, call, ri in iter_tool_pairs(messages):
        if ri is None:
            continue
        action = classify(call_name(call), call_arguments_text(call))
        code = exit_code(text_of(messages[ri].get("content")))
        out.append(Observation(ci, ri, call_id(call), action, code))
    out.sort(key=lambda o: (o.result_index, o.call_index))
    return out


def plan_items(arguments: str) -> list[dict[str, str]] | None:
    """A full plan ({text, status} items) when the call's arguments carry one, else None."""
    try:
        args = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return None
    if not isinstance(args, dict):
        return None
    for key in ("todos", "plan", "items", "steps", "tasks"):
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
