"""What one answered tool call tells about the workspace: files read, folders listed (with what
they hold), files named by search hits and build or test output, files written, created, moved,
copied and deleted (``rules.activity.file_tools.call_effects``, as track_entities reads them),
the working directory after it, and the git branch and dirty files it showed.

A shell command line is walked command by command (``cd`` moves the directory the next ones run
in); its output is read as a listing, a search or a ``git status`` only when one command of the
line prints it (the others are ``cd``, ``export`` …), so output is never credited to the wrong
command. Paths are resolved against the working directory as it stands at that command."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rules.activity import diagnostics
from rules.activity.agent_tools import output_body, workdir
from rules.activity.file_tools import (
    ToolPack,
    call_effects,
    call_succeeded,
    cwd_hint,
    shell_command,
)
from rules.activity.observations import classify
from rules.activity.shell_lex import split_commands
from rules.activity.shell_parse import Verbs, resolve_path
from rules.workspace import listings

# programs that print nothing worth reading here (the line's output is another command's)
_SILENT = frozenset({
    "cd", "source", ".", "export", "set", "unset", "pushd", "popd", "true", ":", "mkdir",
    "touch", "cp", "mv", "rm", "chmod", "chown", "ln", "sleep", "wait", "conda", "alias",
})  # fmt: skip
_READS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "open", "view"})
_NUMBER_OPTIONS = frozenset({"-n", "-c", "--lines", "--bytes"})
_GREPS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack"})
_UNEXPANDED = frozenset("*?[]{}$`<>|;&")
_FILTERS = frozenset({"head", "tail", "sort", "grep", "uniq", "rg", "egrep", "fgrep"})
_TO_FILE = frozenset({">", ">>", ">|", "&>", "&>>"})
_EFFECTS = {"create": "c", "modify": "w", "open": "r"}
_DIR_VIEW = "Here's the files and directories up to"


@dataclass
class Seen:
    """Facts of one call, in the order they apply: what it saw, then what it did."""

    facts: list[tuple[str, ...]] = field(default_factory=list)
    cwd: str | None = None
    branch: str | None = None
    dirty: tuple[tuple[str, str], ...] | None = None


class KnownTypes(Mapping[str, str]):
    """The map's nodes as ``call_effects`` reads known paths (``file``/``folder``)."""

    def __init__(self, nodes: Mapping[str, list[Any]]) -> None:
        self._nodes = nodes

    def __getitem__(self, path: str) -> str:
        kind = self._nodes[path][0]
        if kind == "?":
            raise KeyError(path)
        return "folder" if kind == "d" else "file"

    def __iter__(self) -> Iterator[str]:
        return (p for p, v in self._nodes.items() if v[0] != "?")

    def exists(self, path: str) -> bool:
        """Whether the map lists ``path``, its kind known or not (a plain ``ls``)."""
        return path in self._nodes

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _verb(argv: tuple[str, ...]) -> tuple[str, list[str]]:
    """The program and its words, ``VAR=x``, ``sudo``, ``env`` skipped."""
    words = list(argv)
    while words and ("=" in words[0].split("/", 1)[0] or words[0] in ("sudo", "env", "command")):
        words = words[1:]
    return (posixpath.basename(words[0]) if words else ""), words[1:]


def _plain(word: str) -> bool:
    return bool(word) and _UNEXPANDED.isdisjoint(word) and len(word) <= 1024


def _operands(words: list[str]) -> list[str]:
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w in _NUMBER_OPTIONS:
            skip = True
        elif not w.startswith(("-", "+")) and _plain(w):
            out.append(w)
    return out


def _git_sub(words: list[str]) -> tuple[str, list[str], str | None]:
    """``git``'s subcommand, its words, and the directory ``-C`` names."""
    at, where = 0, None
    while at < len(words) and words[at].startswith("-"):
        if words[at] == "-C" and at + 1 < len(words):
            where, at = words[at + 1], at + 1
        at += 1
    return (words[at] if at < len(words) else ""), words[at + 1 :], where


class _Walk:
    def __init__(self, seen: Seen, output: str) -> None:
        self.seen, self.output = seen, output

    def add(self, op: str, path: str, kind: str = "?", cwd: str | None = None) -> None:
        if _plain(path):
            self.seen.facts.append((op, resolve_path(path, cwd), kind))

    def read_words(self, verb: str, words: list[str], cwd: str | None) -> None:
        if verb in _READS:
            for w in _operands(words):
                self.add("read", w, "f", cwd)
        elif verb == "sed" and "-n" in words and not any(w.startswith("-i") for w in words):
            operands = [w for w in words if not w.startswith("-")]
            script_given = "-e" in words or any(w.startswith("--expression") for w in words)
            for w in operands if script_given else operands[1:]:
                if _plain(w):
                    self.add("read", w, "f", cwd)

    def printed(self, verb: str, words: list[str], cwd: str | None) -> None:
        """The one printing command's output, read by what printed it."""
        out, here = self.output, cwd or ""
        operands = _operands(words)
        if verb == "ls":
            dirs = operands or ["."]
            base = resolve_path(dirs[0], cwd) if len(dirs) == 1 else here
            if len(dirs) == 1 and out.strip() == dirs[0]:
                self.add("list", dirs[0], "f", cwd)  # ``ls file.py`` prints its name
                return
            if len(dirs) == 1:
                self.add("list", dirs[0], "d", cwd)
            for e in listings.ls_entries(out, base, here):
                self.add("list", e.path, e.kind, cwd)
        elif verb == "find":
            at = words.index("-type") + 1 if "-type" in words else len(words)
            kind = {"d": "d", "f": "f"}.get(words[at] if at < len(words) else "", "?")
            for e in listings.path_lines(out, kind):
                self.add("list", e.path, e.kind, cwd)
        elif verb == "tree":
            lines = listings.lines_of(out)
            root = lines[0].strip() if lines else "."
            for e in listings.tree_entries(out):
                self.add("list", posixpath.join(root, e.path), e.kind, cwd)
        elif verb in _GREPS:
            if "-l" in words or "--files-with-matches" in words:
                for e in listings.path_lines(out, "f"):
                    self.add("named", e.path, "f", cwd)
            for path in listings.grep_hits(out):
                self.add("named", path, "f", cwd)
        elif verb == "git":
            self.git(words, cwd)
        elif verb not in _READS and verb != "sed":
            self.run_output(cwd)

    def git(self, words: list[str], cwd: str | None) -> None:
        sub, rest, where = _git_sub(words)
        here = resolve_path(where, cwd) if where else cwd
        if sub == "status":
            facts = listings.git_status(self.output)
            self.seen.branch = facts.branch or self.seen.branch
            self.seen.dirty = tuple((c, resolve_path(p, here)) for c, p in facts.dirty)
        elif sub == "branch" and all(w.startswith("-") for w in rest):
            self.seen.branch = listings.git_branch(self.output) or self.seen.branch
        elif sub == "ls-files" or (sub == "diff" and "--name-only" in rest):
            for e in listings.path_lines(self.output, "f"):
                self.add("list", e.path, "f", here)
        elif sub == "grep":
            for path in listings.grep_hits(self.output):
                self.add("named", path, "f", here)

    def run_output(self, cwd: str | None) -> None:
        """A build's or test run's diagnostics name files: those in the project (relative, or
        under the directory it ran in) exist."""
        if not cwd:
            return
        for d in diagnostics.parse(self.output).diagnostics:
            path = d.get("file")
            if not isinstance(path, str) or not path:
                continue
            full = resolve_path(path, cwd)
            if full.startswith(cwd.rstrip("/") + "/"):
                self.add("named", full, "f")


def _shell(seen: Seen, command: str, output: str, here: str | None) -> None:
    """Walk the line: reads as they come, then the output by the one command that printed it
    (a pipe into ``head``, ``grep`` … prints a part of what came before it)."""
    walk = _Walk(seen, output)
    cwd = here
    printing: list[tuple[str, list[str], str | None] | None] = []
    for c in split_commands(command):
        verb, words = _verb(c.argv)
        if verb == "cd":
            ops = _operands(words)
            cwd = resolve_path(ops[0], cwd) if ops and ops[0] != "-" else None
            continue
        if not verb:
            continue
        walk.read_words(verb, words, cwd)
        if c.connector == "|" and printing:
            if verb not in _FILTERS or _operands(words)[1 if verb in _GREPS else 0 :]:
                printing[-1] = None  # transformed: no longer lines of what printed them
            continue
        quiet = verb in _SILENT or any(op in _TO_FILE for op, _ in c.redirects)
        if not quiet:
            printing.append((verb, words, cwd))
    if len(printing) == 1 and printing[0] is not None:
        walk.printed(*printing[0])


def observe(
    pack: ToolPack,
    verbs: Verbs,
    name: str,
    args: Mapping[str, Any],
    arguments: str,
    result: str,
    is_error: bool,
    cwd: str | None,
    known: Mapping[str, str],
) -> Seen:
    """The facts of one answered call (none when its result shows failure)."""
    seen = Seen(cwd=cwd)
    if not call_succeeded(pack, name, args, result, is_error):
        return seen
    output = output_body(result)
    wd = workdir(args, pack.workdir_keys)
    here = resolve_path(wd, cwd) if wd else cwd
    command = shell_command(pack, name, args)
    if command is not None:
        _shell(seen, command, output, here)
    else:
        _file_tool(seen, name, arguments, output, here)
    effects, after = call_effects(pack, verbs, name, args, result, cwd, known, True)
    for e in effects:
        kind = "d" if e.type == "folder" else "f"
        if e.action == "delete":
            seen.facts.append(("delete", e.path, kind))
        elif e.action in ("move", "copy") and e.source:
            seen.facts.append((e.action, e.source, e.path, kind))
        elif e.action in _EFFECTS:
            seen.facts.append((_EFFECTS[e.action], e.path, kind))
    seen.cwd = cwd_hint(pack, result) or after
    return seen


def _file_tool(seen: Seen, name: str, arguments: str, output: str, here: str | None) -> None:
    walk = _Walk(seen, output)
    action = classify(name, arguments)
    if action.kind == "read":
        if output.lstrip().startswith(_DIR_VIEW):  # OpenHands' view of a folder
            walk.add("list", action.target, "d", here)
            for e in listings.path_lines(output.split("\n", 1)[-1]):
                walk.add("list", e.path, e.kind, here)
        else:
            walk.add("read", action.target, "f", here)
    elif action.kind == "write":
        for path in action.writes or (action.target,):
            walk.add("w", path, "f", here)
    elif action.kind == "list":
        base, entries = listings.dir_listing_entries(output)
        if base is not None:
            walk.add("list", base, "d", here)
            for e in entries:
                walk.add("list", posixpath.join(base, e.path), e.kind, here)
            return
        entries = listings.claude_ls_entries(output) or listings.path_lines(output)
        for e in entries:
            walk.add("list", e.path, e.kind, here)
