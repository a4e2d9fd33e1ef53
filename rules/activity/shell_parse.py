"""What a shell command line did to files and folders: ``mkdir -p a b``, ``rm -rf``, ``rmdir``,
``cp``, ``mv``, ``touch``, redirections ``>``/``>>``, ``tee``, ``sed -i``, heredocs, ``cd`` (for
the rest of the chain), ``git mv``/``git rm``, ``bash -c '…'`` (``-lc``, ``-ic`` too); brace lists
expanded (``mkdir -p app/{src,tests}``: ``brace_expand``). The verbs
come from the ``shell_verbs`` pack. Paths resolve against the working directory as it stands at
each command; ``~`` is kept as written (rules do not read the environment) and counts as
absolute.

Commands after ``||`` are skipped: they ran only if the command before them failed.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.activity import python_effects as py
from rules.activity.brace_expand import expand
from rules.activity.compressors import compressed
from rules.activity.downloads import archived, downloaded, split_short
from rules.activity.find_deletes import MAX_VISITS, find_deletes
from rules.activity.line_known import LineKnown
from rules.activity.rsync_copies import rsync_copies
from rules.activity.script_writes import PYTHON
from rules.activity.shell_lex import SimpleCommand, file_like, split_commands
from rules.activity.shell_loops import loop_runs
from rules.activity.shell_verbs_pack import Verbs as Verbs  # where callers look
from rules.activity.shell_verbs_pack import load_verbs as load_verbs  # where callers look
from rules.activity.shell_words import (
    EXPANDED,
    has_short,
    operands,
    shell_script,
    without_prefixes,
)
from rules.activity.shell_words import resolve_path as resolve_path  # where callers look
from rules.activity.storable import placeable
from rules.activity.system_paths import appended_file_was_there, system_folder

MAX_EXPANDED = 1_024  # words brace expansion makes on one command line; past it, as written
MAX_UNROLLED = 4_096  # words unrolled loops add to one command line; past it, as written


@dataclass(frozen=True)
class Effect:
    action: str  # create | delete | copy | move | modify | open
    type: str  # file | folder
    path: str  # resolved; absolute (or ~-rooted) whenever the working directory is known
    source: str | None = None  # copy/move: where it came from
    how: str | None = None  # made by cloning ("clone": `git clone URL`), not by `mkdir`


@dataclass(frozen=True)
class ShellOutcome:
    effects: tuple[Effect, ...]
    cwd: str | None  # the working directory after the command line
    # what the line made that only the shell could name (`mkdir out-$(date +%s)`): (action,
    # type or None for either), so "the folder you just created" is not taken for an older one
    unknown: tuple[tuple[str, str | None], ...] = ()


def guess_type(path: str, recursive: bool) -> str:
    """file or folder from the name alone, when nothing better is known."""
    if path.endswith("/") or posixpath.basename(path.rstrip("/")) in ("", ".", "..", "~"):
        return "folder"
    if not recursive:
        return "file"
    base = posixpath.basename(path).lstrip(".")
    return "file" if "." in base else "folder"


class _Run:
    """State while walking one command line: cwd, subshell stack, what is known to exist."""

    def __init__(self, verbs: Verbs, cwd: str | None, known: Mapping[str, str]) -> None:
        self.verbs = verbs
        self.cwd = cwd
        self.known = LineKnown(known)
        self.effects: list[Effect] = []
        self.unknown: list[tuple[str, str | None]] = []  # made, named only by the shell
        # `cd -` and `popd` return to these; set by this command line's `cd` and `pushd` only
        self.oldpwd: list[str | None] = []  # empty: the previous directory is not known
        self.pushed: list[str | None] = []
        self.expanded = 0  # words brace expansion made on this line (``MAX_EXPANDED``)
        self.unrolled = [MAX_UNROLLED]  # words loops may still add to it, nested shells too
        self.visits = [MAX_VISITS]  # known paths its finds may still look at (``find_deletes``)
        self.stdin_code: list[str] = []  # heredocs fed to Python (``python - <<EOF``), in order
        self.scripts: dict[str, str] = {}  # Python scripts the line writes by heredoc, as named
        self.python_runs = 0  # of them read (``MAX_RUNS``)

    def add(
        self, action: str, typ: str, path: str, source: str | None = None, how: str | None = None
    ) -> None:
        self.effects.append(Effect(action, typ, path, source, how))
        if action == "delete":
            self.known.remove(path)
        else:
            self.known[path] = typ
            if action == "move" and source:
                self.known.remove(source)

    def walk(self, command: str, depth: int = 0) -> None:
        stack: list[str | None] = []
        # a `for` loop over words written out runs its body once per word (``shell_loops``)
        for cmd in loop_runs(split_commands(command), self.unrolled):
            while cmd.depth > len(stack):
                stack.append(self.cwd)
            while cmd.depth < len(stack):
                self.cwd = stack.pop()
            if cmd.connector == "||":
                continue
            self.simple(cmd, depth)
        if stack:
            self.cwd = stack[0]

    def simple(self, cmd: SimpleCommand, depth: int) -> None:
        for op, target in cmd.redirects:
            self.redirect(op, target)
        self.command(list(cmd.argv), depth, cmd.literal)

    def redirect(self, op: str, target: str) -> None:
        if op not in (">", ">>", ">|", "&>", "&>>") or target.startswith("&"):
            return
        if not file_like(target):  # `-> float:` in text that is no shell
            return
        if target in self.verbs.ignore_targets:
            return
        if ("$" in target or "`" in target) and not target.startswith(("$HOME/", "${HOME}/")):
            if op in (">", ">|", "&>"):  # `> out-$(date +%s).log`: a file only the shell names
                self.unknown.append(("create", "file"))
            return
        path = resolve_path(target, self.cwd)
        appended = op in (">>", "&>>") and appended_file_was_there(path, self.cwd)
        appended = appended and not self.known.made(posixpath.dirname(path))
        self.add("modify" if self.known.exists(path) or appended else "create", "file", path)

    def command(self, argv: list[str], depth: int, literal: frozenset[str] = frozenset()) -> None:
        v = self.verbs
        argv = without_prefixes(argv, v.prefixes, v.keywords)  # sudo -u x, env, FOO=bar, then …
        if not argv:
            return
        verb = posixpath.basename(argv[0])
        subs = v.subcommands.get(verb)
        if subs and len(argv) > 1:
            pair = f"{argv[1]} {argv[2]}" if len(argv) > 2 else ""
            if pair in subs:  # `git worktree remove ../wt`: the second word says what is done
                verb, argv = subs[pair], argv[2:]
            elif argv[1] in subs:
                verb, argv = subs[argv[1]], argv[1:]
        script = shell_script(argv) if verb in v.shells and depth < 3 else None
        if script is not None:
            outer = self.cwd
            self.walk(script, depth + 1)
            self.cwd = outer  # a child shell's cd does not change ours
            return
        if verb == "find":  # `find . -name x -delete`: what it removed of what is known
            for path, typ in find_deletes(argv, self.cwd, self.known.items(), self.visits):
                self.add("delete", typ or guess_type(path, True), path)
            return
        if PYTHON.match(verb):
            self._python(argv)
            return
        spec = v.verbs.get(verb)
        if spec is None:
            return
        args = split_short(argv[1:]) if spec.get("split_short") else tuple(argv[1:])
        flags, ops, values = operands(args, frozenset(spec.get("value_options", ())))
        # mkdir -p app/{src,tests}; not a word whose braces were quoted (a sed script)
        ops = self._expanded(ops, literal)
        getattr(self, "_" + str(spec.get("effect")))(spec, flags, ops, values)

    def _expanded(self, ops: list[str], literal: frozenset[str]) -> list[str]:
        """``ops`` brace-expanded, up to ``MAX_EXPANDED`` words a line (then as written): a
        41 KB line of ``{a,b}{a,b}…`` words made 42,000 effects, a second of the event loop."""
        out: list[str] = []
        for op in ops:
            if op in literal or self.expanded >= MAX_EXPANDED or "{" not in op:
                out.append(op)
                continue
            words = expand(op)
            self.expanded += len(words)
            out += words
        return out

    def _cd(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        if EXPANDED in values:
            self.cwd = None  # cd "$(dirname $0)": from here on the directory is unknown
            return
        target = ops[0] if ops else "~"
        if target == "-":  # back to the previous directory; one from before this line: unknown
            back = self.oldpwd[0] if self.oldpwd else None
            self.oldpwd = [self.cwd]
            self.cwd = back
            return
        self.oldpwd = [self.cwd]
        cwd = resolve_path(target, self.cwd)
        self.cwd = cwd if placeable(cwd) else None  # `cd d` × 2,000: no place worth keeping

    def _pushd(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        if not ops or ops[0].startswith(("+", "-")) or EXPANDED in values:
            self.cwd = None  # a rotation of the stack, or a directory only the shell knows
            return
        self.pushed.append(self.cwd)
        self._cd(spec, flags, ops, values)

    def _popd(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        # back to the directory the last `pushd` of this line left; pushed before it: unknown
        self.oldpwd = [self.cwd]
        self.cwd = self.pushed.pop() if self.pushed and not ops else None

    def _python(self, argv: list[str]) -> None:
        """What Python run inline (``-c``, a heredoc on its input, a script the line wrote)
        does to files and folders (``python_effects``)."""
        if self.python_runs >= py.MAX_RUNS:
            return
        self.python_runs += 1
        code = py.inline_code(argv)
        if code is None and py.reads_stdin(argv):
            code = self.stdin_code.pop(0) if self.stdin_code else None
        elif code is None:
            script = next((a for a in argv[1:] if not a.startswith("-")), "")
            code = self.scripts.get(posixpath.normpath(script)) if script else None
        for action, typ, target, origin in py.python_effects(code or ""):
            path = resolve_path(target, self.cwd)
            source = resolve_path(origin, self.cwd) if origin is not None else None
            if action == "create" and self.known.exists(path):
                action = "modify" if typ == "file" else ""  # os.makedirs(exist_ok=True)
            if typ == "guess":
                typ = (self.known.get(source) if source else None) or guess_type(target, True)
            if action:
                self.add(action, typ, path, source)

    def _rsync(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        for typ, path, source in rsync_copies(flags, ops, self._resolved, self.known.get):
            self.add("copy", typ, path, source)

    def _resolved(self, path: str) -> str:
        return resolve_path(path, self.cwd)

    def _typed(self, action: str, spec: Mapping[str, Any], ops: list[str], recursive: bool) -> None:
        for op in ops:
            path = resolve_path(op, self.cwd)
            typ = spec.get("type", "guess")
            if typ == "guess":
                typ = self.known.get(path) or guess_type(op, recursive)
            self.add(action, typ, path)

    def _create(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        """``mkdir``, ``touch``: a path known to exist is not made again (``mkdir -p`` leaves a
        folder as it is, ``touch`` only dates a file: its content is not changed either)."""
        fresh = [op for op in ops if not self.known.exists(resolve_path(op, self.cwd))]
        self._typed("create", spec, fresh, False)
        if EXPANDED in values:
            typ = spec.get("type")
            self.unknown.append(("create", typ if typ in ("file", "folder") else None))

    def _delete(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        if "--cached" in flags:
            return  # git rm --cached: untracked, not deleted
        recursive = has_short(flags, "rR") or "--recursive" in flags
        self._typed("delete", spec, ops, recursive)

    def _download(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        """``curl -o f URL``, ``wget URL``; as ``archive``, ``tar czf out.tgz src``: the file
        written (made, or changed if known); ``unzip x.zip -d out``: the folder, if made."""
        written = archived if spec.get("effect") == "archive" else downloaded
        typ, ignored = str(spec.get("type") or "file"), self.verbs.ignore_targets
        for target in written(spec, flags, ops, values):
            path = resolve_path(target, self.cwd)  # `curl -o /dev/null`: no file
            if target not in ignored and (typ == "file" or not self.known.exists(path)):
                self.add("modify" if self.known.exists(path) else "create", typ, path)

    _archive = _download  # `tar czf out.tgz src`, `zip -r out.zip src`
    _compress = compressed  # `gzip x`, `gunzip x.gz`: the file it became

    def _open(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        self._typed("open", spec, ops[:1], False)

    def _copy(
        self,
        spec: Mapping[str, Any],
        flags: list[str],
        ops: list[str],
        values: dict[str, str],
        action: str = "copy",
    ) -> None:
        if EXPANDED in values:  # `cp a b $DEST`: which operand is the destination is unknown
            self.unknown.append((action, None))
            return
        target = values.get("-t") or values.get("--target-directory")
        if target is None:
            if len(ops) < 2:
                return
            target, ops = ops[-1], ops[:-1]
        dest = resolve_path(target, self.cwd)
        into = (
            len(ops) > 1
            or guess_type(target, False) == "folder"  # a/, ., .., ~
            or self._holds_cwd(dest)
            or self.known.get(dest) == "folder"
            or system_folder(dest)
            or self.known.listed_folder(dest)
            or "-t" in values
            or "--target-directory" in values
        )
        recursive = action == "move" or has_short(flags, "rRa") or "--recursive" in flags
        for op in ops:
            source = resolve_path(op, self.cwd)
            typ = self.known.get(source) or guess_type(op, recursive)
            path = posixpath.join(dest, posixpath.basename(source)) if into else dest
            self.add(action, typ, path, source)

    def _holds_cwd(self, path: str) -> bool:
        """Whether ``path`` is the working directory or one that holds it: a folder."""
        cwd = self.cwd
        return cwd is not None and (cwd == path or cwd.startswith(path.rstrip("/") + "/"))

    def _move(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        self._copy(spec, flags, ops, values, action="move")

    def _scaffold(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        """A project's folder: `git clone URL [dir]`, `cargo new x`, `npm create vite@latest x`."""
        package = spec.get("package")
        if package:  # npx create-react-app my-app: only a scaffolder's package, then its words
            if not ops or not posixpath.basename(ops[0]).startswith(str(package)):
                return
            ops = ops[1:]
        n, dest = int(spec.get("arg", 1)), spec.get("dest")
        if dest is not None and len(ops) >= int(dest):
            name = ops[int(dest) - 1]
        elif len(ops) >= n:
            name = ops[n - 1]
            if spec.get("url"):  # the repository's name: …/repo.git, host:owner/repo
                name = name.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
                name = name[:-4] if name.endswith(".git") else name
        else:
            return
        if name and name not in (".", "..") and not name.startswith("-"):
            how = "clone" if spec.get("url") else "scaffold"
            self.add("create", "folder", resolve_path(name, self.cwd), how=how)

    def _write(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        for op in ops:
            if op in self.verbs.ignore_targets:
                continue
            path = resolve_path(op, self.cwd)
            self.add("modify" if path in self.known else "create", "file", path)
        if EXPANDED in values and not has_short(flags, "a") and "--append" not in flags:
            self.unknown.append(("create", "file"))  # `tee "$out"`

    def _in_place(
        self, spec: Mapping[str, Any], flags: list[str], ops: list[str], values: dict[str, str]
    ) -> None:
        in_place = any(f.startswith("--in-place") for f in flags) or any(
            f.startswith("-i") or (not f.startswith("--") and "i" in f[1:] and f[1:].isalpha())
            for f in flags
        )
        if not in_place:
            return
        scripted = any(k in values for k in ("-e", "-f", "-E", "--expression", "--file"))
        for op in ops if scripted else ops[1:]:
            self.add("modify", "file", resolve_path(op, self.cwd))


def analyse(
    command: str, cwd: str | None, verbs: Verbs, known: Mapping[str, str] | None = None
) -> ShellOutcome:
    """The effects of ``command`` run in ``cwd``; ``known`` maps paths known to exist to types."""
    run = _Run(verbs, cwd, {} if known is None else known)
    if "<<" in command:  # Python's code, where a heredoc holds it
        run.stdin_code, run.scripts = py.heredoc_code(command)
    run.walk(command)
    return ShellOutcome(tuple(run.effects), run.cwd, tuple(run.unknown))
