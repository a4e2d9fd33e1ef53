"""What a run ran, to tell a rerun of the same test or script from another run: the last program
of the line that builds, tests or runs code (else the last one), past the shell's setup and
wrappers (as ``run_class`` reads them; a shell's ``-c`` string read as its command), with its
operands, the directory a ``cd`` before it chose, its flags left out (``-x``, ``--tb=short``), a
tool run with ``python -m`` named as the tool (``python -m pytest``: ``pytest``), and nothing of
a pipeline after it (``| tail -30``) or of its redirections (``2>&1``). So ``pytest t/a.py -xvs
2>&1 | tail -30`` and ``python -m pytest t/a.py -x | tail -20`` are one run: a pass of the
second closes what the first failed. A passing run also covers the runs of the same program in
the same directory on paths under its operands (``pytest tests`` covers ``pytest
tests/a.py::test_b``), or on any, with none."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rules.activity.agent_tools import command_value, workdir
from rules.activity.observations import WORKDIR_KEYS
from rules.activity.run_class import (
    BUILD,
    MAX_COMMANDS,
    MAX_NESTING,
    SETUP,
    SETUP_SUBCOMMANDS,
    class_of,
    name_of,
    program,
    shell_string,
)
from rules.activity.shell_lex import MAX_COMMAND_CHARS, split_commands
from rules.text_cache import text_cache

_PYTHONS = frozenset({"python", "py"})
_INTERPRETERS = frozenset(
    {*_PYTHONS, "ipython", "node", "deno", "bun", "ruby", "php", "perl", "java"}
)
MAX_KEY_CHARS = 400


@text_cache(max_chars=2_000_000, max_text_chars=MAX_COMMAND_CHARS)
def run_key(command: str) -> str:
    """The run's key; the command itself when no program is found in it. Read as far as the
    shell lexer reads (not ``run_class``'s first words): the run is the *last* program, after a
    heredoc that writes the script (``cat > t.py <<EOF`` … thousands of characters … ``python
    t.py``)."""
    return _key(command, 0)[0] or command


@text_cache(max_chars=2_000_000, max_text_chars=MAX_COMMAND_CHARS)
def run_argv(command: str) -> tuple[str, ...]:
    """The words of the program ``run_key`` names (``python -c 'import x'``: the interpreter,
    ``-c`` and the code as one word; empty when it names none): what the key's joined operands
    no longer tell apart."""
    return tuple(_key(command, 0)[1])


def raw_command(args: Mapping[str, Any]) -> str | None:
    """A shell call's command as sent (a heredoc's lines kept), from its parsed arguments."""
    raw = args.get("command")
    return raw if isinstance(raw, str) else command_value(raw) or command_value(args.get("cmd"))


def call_run_key(
    args: Mapping[str, Any], cleaned: Callable[[str], str] | None = None
) -> str | None:
    """The run key of a shell call's parsed arguments, in the directory they name (Codex's
    ``workdir``); None without a command. ``cleaned``: applied to the command before it is
    keyed (a redaction)."""
    command = raw_command(args)
    if not command:
        return None
    key = run_key(cleaned(command) if cleaned is not None else command)
    wd = workdir(args, WORKDIR_KEYS)
    return f"cd {wd} && {key}" if wd and not key.startswith("cd ") else key


def _key(command: str, nesting: int) -> tuple[str, list[str]]:
    """The key of the last program the line runs that builds, tests or runs code (else the
    last one), past setup and taking no pipe's input (``cat > t.py <<EOF … EOF && python t.py``:
    the script's run, not its writing; ``pytest x; cat log``: the tests), and that program's
    words (``run_argv``)."""
    found: tuple[str, list[str]] = ("", [])
    built, where = found, ""
    for cmd in split_commands(command)[:MAX_COMMANDS]:
        if cmd.connector == "|":
            continue
        argv = list(program(cmd.argv))
        if argv[:1] == ["cd"]:  # tests in /a are not those in /b
            where = f"cd {argv[1]} && " if len(argv) > 1 else ""
            continue
        key, words = _program_key(argv, nesting)
        if key:
            found = (where + key, words)
            if class_of(name_of(argv[0]), argv) == "build" or shell_string(name_of(argv[0]), argv):
                built = found
    return built if built[0] else found


def _program_key(argv: list[str], nesting: int) -> tuple[str, list[str]]:
    """One simple command's key and words: "" for setup (``cd``, ``echo``, ``source``) or no
    program."""
    if not argv:
        return "", []
    verb = name_of(argv[0])
    if verb in SETUP or (verb, name_of(argv[1]) if len(argv) > 1 else "") in SETUP_SUBCOMMANDS:
        return "", []
    inner = shell_string(verb, argv)
    if inner is not None:
        return _key(inner, nesting + 1) if nesting < MAX_NESTING else ("", [])
    if verb in _PYTHONS and len(argv) > 2 and argv[1] == "-m" and name_of(argv[2]) in BUILD:
        verb, argv = name_of(argv[2]), argv[2:]  # python -m pytest: pytest
    launched = _launched(verb, argv)
    if launched is not argv:  # uv run pytest x: pytest x
        return _program_key(list(launched), nesting + 1) if nesting < MAX_NESTING else ("", [])
    head, words = [verb], argv
    if verb in _SCRIPT_RUNNERS and len(argv) > 2 and argv[1] in ("run", "run-script"):
        argv = [argv[0], *argv[2:]]  # npm run test: npm test, the same script
    if verb in _PYTHONS and len(argv) > 2 and argv[1] == "-m":  # python -m pkg.core
        head, argv = [verb, "-m", argv[2]], argv[2:]
    return " ".join([*head, *_operands(verb, argv[1:])])[:MAX_KEY_CHARS], words


# package managers whose ``run X`` runs the project's script X, as ``X`` alone does (``npm
# test``; yarn's and pnpm's any script)
_SCRIPT_RUNNERS = frozenset({"npm", "yarn", "pnpm"})
# runners that run a program from a project's environment: ``uv run pytest``, ``npx jest``
_RUN_SUBCOMMANDS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "rye", "conda"})
_RUNNERS = frozenset({"npx", "bunx", "pnpx"})
# a runner's options that take the next word (``uv run --with x``, ``conda run -n env``)
_RUNNER_VALUES = frozenset(
    {"--with", "--python", "-p", "-n", "--name", "--env", "-e", "--package", "--extra",
     "--directory", "--group", "--only-group", "--project", "--with-requirements", "--index",
     "--env-file"}
)  # fmt: skip
# options of test runners and interpreters whose value is the next word, not a path to run:
# ``pytest -k test_div``, ``pytest -p no:cacheprovider``, ``go test -run TestX``, ``cargo test
# -p crate``, ``python -W ignore``
_VALUE_OPTIONS = frozenset(
    {"-k", "-m", "-p", "-o", "-n", "-W", "-X", "--deselect", "--ignore", "--rootdir", "--maxfail",
     "--tb", "--durations", "--junitxml", "--log-level", "-run", "-bench", "-count", "-timeout",
     "-tags", "-parallel", "--package", "--features", "--bin", "--test", "--target", "-t",
     "--testNamePattern", "--testPathPattern", "--config", "--reporter"}
)  # fmt: skip


def _launched(verb: str, argv: list[str]) -> list[str]:
    """The program a runner runs, from its name on (``argv`` itself when it is no runner)."""
    if verb in _RUN_SUBCOMMANDS and len(argv) > 2 and argv[1] == "run":
        i = 2
    elif verb == "bundle" and len(argv) > 2 and argv[1] in ("exec", "ex"):
        i = 2  # bundle exec rspec: rspec
    elif verb in _RUNNERS or (
        verb in ("pnpm", "yarn") and len(argv) > 2 and argv[1] in ("exec", "dlx")
    ):
        i = 1 if verb in _RUNNERS else 2
    else:
        return argv
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _RUNNER_VALUES else 1
    return argv[i:] if i < len(argv) else argv


# of those, the ones that choose which tests run: kept in the key, as ``-k=test_x``, so two runs
# of other tests stay two runs (``pytest -k login`` is not ``pytest -k signup``)
_SELECTORS = frozenset(
    {"-k", "-m", "-run", "-bench", "--package", "--test", "--bin", "-t", "--testNamePattern",
     "--testPathPattern"}
)  # fmt: skip
_SELECTS_PACKAGE = frozenset({"cargo"})  # whose ``-p`` names the package tested
# programs whose ``-m`` is no marker of tests but a message (``git commit -m "…"``: each commit
# under its own message was its own run, and a hook's refusal stayed open past the next commit)
_MESSAGES = frozenset({"git", "hg", "svn"})


def _operands(verb: str, words: list[str]) -> list[str]:
    """The words that are no option nor an option's value (``_VALUE_OPTIONS``), then the
    selectors as ``option=value`` (blanks in a value as ``+``)."""
    out, chosen, option = [], [], ""
    for w in words:
        if option:
            if (option in _SELECTORS and verb not in _MESSAGES) or (
                option == "-p" and verb in _SELECTS_PACKAGE
            ):
                chosen.append(f"{option}={'+'.join(w.split())}")
            option = ""
        elif w.startswith("-"):
            option = w if w in _VALUE_OPTIONS else ""
        elif w:
            out.append(w)
    return out + chosen


def covers(passed: str, failed: str) -> bool:
    """Whether a passing run ``passed`` (a key) ran what the failing run ``failed`` ran: the
    same program, on everything (no operands) or on paths holding each of its operands, in the
    same place (``passed`` with no ``cd``: where the agent's shell is, as ``same_run`` says)."""
    where, passed = _where(passed)
    there, failed = _where(failed)
    program, _, scope = passed.partition(" ")
    other, _, targets = failed.partition(" ")
    if program != other or (where and where != there):
        return False
    paths, chose = _split(scope)
    failed_paths, failed_chose = _split(targets)
    if not chose <= failed_chose:  # a pass of some tests says nothing of others
        return False
    if not paths:  # the whole suite; an interpreter on nothing (``python3 --version``) ran none
        return program not in _INTERPRETERS
    if not failed_paths:  # a run on everything is not covered by one on some paths
        return False
    within, targets = paths, " ".join(failed_paths)
    return all(
        any(
            t == w
            or t.startswith((w.rstrip("/") + "/", w + "::"))
            or (w.endswith("/...") and t.startswith(w[:-3]))  # go test ./...: every package
            or _label_under(t, w)
            for w in within
        )
        for t in targets.split(" ")
        if t
    )


# a name's ending that makes it a file's, not a dotted test label's part (``tests.py``)
_FILE_ENDINGS = frozenset(
    {"py", "pyi", "js", "jsx", "ts", "tsx", "mjs", "cjs", "rb", "go", "rs", "java", "kt", "php",
     "c", "h", "cc", "cpp", "cs", "sh", "txt", "json", "yaml", "yml", "toml", "cfg", "ini", "md",
     "bak", "orig", "log", "xml", "html", "lock"}
)  # fmt: skip


def _label_under(label: str, wider: str) -> bool:
    """Whether a dotted test label is under a wider one (Django's and unittest's
    ``shop.tests.CartTest`` under ``shop``): neither a path nor a file's name."""
    return (
        label.startswith(wider + ".")
        and "/" not in label
        and label.rsplit(".", 1)[-1] not in _FILE_ENDINGS
        and wider.rsplit(".", 1)[-1] not in _FILE_ENDINGS
    )


def _split(operands: str) -> tuple[list[str], set[str]]:
    """(the paths, the selectors ``-k=…``) of a key's operands."""
    words = [w for w in operands.split(" ") if w]
    return [w for w in words if not w.startswith("-")], {w for w in words if w.startswith("-")}


def same_run(earlier: str, later: str) -> bool:
    """Whether ``later`` runs again what ``earlier`` ran: the same key, or ``later`` without the
    ``cd`` ``earlier`` began with. An agent's shell keeps its directory between calls, so after
    ``cd /repo && pytest t.py`` a ``pytest t.py`` runs there; a run with a ``cd`` after one
    without may be elsewhere (another checkout), and stays another run."""
    return earlier == later or (not _where(later)[0] and _where(earlier)[1] == later)


def scope(key: str) -> tuple[str, str, list[str], set[str]]:
    """(the ``cd`` a key starts with, its program, the paths it ran, its selectors ``-k=…``)."""
    where, rest = _where(key)
    program, _, operands = rest.partition(" ")
    paths, chose = _split(operands)
    return where, program, paths, chose


def where_of(key: str) -> str:
    """The folder a key's ``cd`` chose, or ""."""
    return _where(key)[0][3:]


def _where(key: str) -> tuple[str, str]:
    """(the ``cd`` a key starts with, the rest)."""
    if key.startswith("cd "):
        where, sep, rest = key.partition(" && ")
        if sep:
            return where, rest
    return "", key
