"""What a shell run does, by the first program its command runs: shows files (``view``: ``cat a b``,
``sed -n 1,80p f | nl``: a read the observation could not name as one file), finds
paths or lines (``search``: grep, rg, find, ls, ``git grep``), builds, tests or runs code
(``build``: interpreters, test runners, compilers, package runners, scripts), or anything else.

The first program is the first word of the first simple command (a pipeline's too: ``a | head``
is ``a``) past the shell's setup (``cd x &&``, ``source``, ``export``, ``set -e;``, an ``echo``)
and past wrappers and their options (``sudo -u u``, ``env A=B``, ``timeout 60``, ``time``,
``nice -n 5``, ``xargs -I {}``); a shell's ``-c`` string (``bash -lc "…"``, ``sh -c '…'``,
``powershell -Command …``, ``cmd /c …``) is read as the command it runs.

The copy model (``rules/context/copy_odds.py``) weighs it: later calls copy from what a view or
a search showed several times as often as from a build's output, and from that several times as
often as from anything else (git but its searches, file moves, queries; docs/rules/prune.md)."""

from __future__ import annotations

from collections.abc import Sequence

from rules.activity.shell_lex import MAX_COMMAND_CHARS as MAX_LINE_CHARS
from rules.activity.shell_lex import split_commands
from rules.text_cache import text_cache

# the start of a command its first program is read from: a script of thousands of characters
# names it in its first words
MAX_COMMAND_CHARS = 2_000
MAX_COMMANDS = 32  # simple commands looked at for the first program
MAX_NESTING = 2  # ``bash -c "sh -c '…'"``: shells' strings read, one inside the other
VIEW = frozenset(
    {
        "cat", "head", "tail", "nl", "less", "more", "bat", "sed", "awk", "wc", "jq", "diff",
        "xxd", "od", "hexdump", "strings", "get-content", "gc", "type",
    }
)  # fmt: skip
SEARCH = frozenset(
    {
        "grep", "egrep", "fgrep", "rg", "ag", "ack", "fd", "find", "ls", "tree", "locate",
        "findstr", "select-string", "sls", "get-childitem", "gci", "dir",
    }
)  # fmt: skip
BUILD = frozenset(
    {
        "python", "pytest", "py.test", "mypy", "ruff", "flake8", "pylint", "black", "tox", "nox",
        "uv", "uvx", "pip", "poetry", "pipenv", "hatch", "coverage", "ipython",
        "node", "npm", "npx", "yarn", "pnpm", "bun", "bunx", "deno", "tsc", "jest", "vitest",
        "mocha", "eslint", "pre-commit",
        "go", "cargo", "rustc", "make", "cmake", "ninja", "gcc", "g++", "clang", "clang++", "cc",
        "mvn", "mvnw", "gradle", "gradlew", "ant", "sbt", "java", "javac", "kotlinc",
        "dotnet", "ruby", "rspec", "rake", "bundle", "php", "phpunit", "composer", "swift",
    }
)  # fmt: skip
# ``git``'s subcommands that search; its others are ``other``: what ``git diff`` / ``show`` /
# ``log`` / ``blame`` showed is copied from far less often than a view's output, and taken as
# views they lowered the held-out share of copies the model ranks in its top tenth
# (bench/copy_odds_learn.py with them in ``VIEW``)
GIT = dict.fromkeys(("grep", "ls-files", "ls-tree"), "search")
SCRIPTS = (".sh", ".bash", ".py", ".js", ".rb", ".pl")  # a script run by its path: code runs
# words that set up the shell or print nothing worth copying, before the program that runs
SETUP = frozenset(
    {
        "cd", "pushd", "popd", "source", ".", "export", "set", "unset", "alias", "true", ":",
        "clear", "echo", "printf", "sleep", "mkdir", "touch", "trap", "ulimit", "umask",
        "shopt", "hash", "for", "case", "select", "done", "fi", "esac", "}",
    }
)  # fmt: skip
# words that start a compound command (``if grep -q x f; then``): the program follows
KEYWORDS = frozenset({"if", "elif", "while", "until", "!", "{", "then", "else", "do"})
# ``conda activate x``, ``nvm use 20``: setup too
SETUP_SUBCOMMANDS = frozenset({("conda", "activate"), ("source", "activate"), ("nvm", "use")})
# wrappers that run the program after their options: the options that take a value, and how
# many words come between the options and the program (``timeout``'s duration)
WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U", "-r", "-t"}), 0),
    "env": (frozenset({"-u", "-C", "-S", "--unset", "--chdir"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "time": (frozenset({"-f", "-o"}), 0),
    "nice": (frozenset({"-n"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p"}), 0),
    "nohup": (frozenset(), 0),
    "command": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "xargs": (frozenset({"-I", "-n", "-P", "-L", "-d", "-s", "-a", "-E"}), 0),
}
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
SHELL_LONG_VALUES = frozenset({"--rcfile", "--init-file"})  # a shell's long options with a value
POWERSHELLS = frozenset({"powershell", "pwsh"})


@text_cache(max_chars=4_000_000, max_text_chars=MAX_COMMAND_CHARS)
def run_class(command: str) -> str:
    """``view``, ``search``, ``build`` or ``other``: by the first program ``command`` runs past
    the shell's setup and wrappers (a shell's ``-c`` string read as its command)."""
    return _classify(command[:MAX_COMMAND_CHARS], 0)


def _classify(command: str, nesting: int) -> str:
    for cmd in split_commands(command)[:MAX_COMMANDS]:
        argv = program(cmd.argv)
        if not argv:
            continue
        verb = name_of(argv[0])
        if verb in SETUP or (verb, name_of(argv[1]) if len(argv) > 1 else "") in SETUP_SUBCOMMANDS:
            continue
        inner = shell_string(verb, argv)
        if inner is not None:
            return _classify(inner, nesting + 1) if nesting < MAX_NESTING else "other"
        return class_of(verb, argv)
    return "other"


def name_of(word: str) -> str:
    """A program's name as the tables hold it: without its folder, ``.exe``, a version
    (``python3.11``, ``pip3``) or case (``Get-Content``)."""
    name = word.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower().removesuffix(".exe")
    bare = name.rstrip("0123456789.")
    return bare if bare and bare[-1] != "-" else name


def program(argv: Sequence[str]) -> Sequence[str]:
    """``argv`` from the program it runs: assignments (``A=1``), compound keywords (``if``,
    ``!``) and wrappers with their options (``sudo -u u``, ``timeout 60``) skipped."""
    i = 0
    while i < len(argv):
        word = argv[i]
        verb = name_of(word)
        if _assignment(word) or verb in KEYWORDS:
            i += 1
            continue
        wrapper = WRAPPERS.get(verb)
        if wrapper is None:
            return argv[i:]
        takes_value, positional = wrapper
        i += 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
            i += 2 if argv[i] in takes_value else 1  # ``-u user``, ``-n 5``
        while i < len(argv) and _assignment(argv[i]):  # ``env A=B``, ``sudo A=B``
            i += 1
        i += positional
    return ()


def _assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and bool(name) and (name[0].isalpha() or name[0] == "_")


def shell_string(verb: str, argv: Sequence[str]) -> str | None:
    """The command a shell runs from its ``-c`` string (``bash -lc 'x'``, ``powershell
    -Command x``, ``cmd /c x``), or None when ``argv`` is no such call."""
    if verb in SHELLS:  # the string is the first word past the options, with ``-c`` among them
        string, i = False, 1
        while i < len(argv) and len(argv[i]) > 1 and argv[i][0] in "-+":
            word = argv[i]
            i += 1
            if word == "--":
                break
            if word.startswith("--"):
                i += word in SHELL_LONG_VALUES  # ``--rcfile f``
                continue
            string = string or "c" in word[1:]
            if word[-1] in "oO":  # ``-o pipefail``, ``-euo pipefail``, ``-O extglob``, ``+o posix``
                i += 1
        if not string:
            return None  # a script: ``bash run.sh``, ``bash -o pipefail run.sh``
        return argv[i] if i < len(argv) else ""
    flags = ("-command", "-c") if verb in POWERSHELLS else ("/c", "/k") if verb == "cmd" else ()
    for i, word in enumerate(argv[1:], 1):
        if word.lower() in flags:
            return " ".join(argv[i + 1 :])
    return None


def class_of(verb: str, argv: Sequence[str]) -> str:
    """The class of a program (``verb``, its name) run with ``argv``."""
    if verb == "git":
        return GIT.get(git_subcommand(argv), "other")
    if verb in SHELLS or argv[0].startswith("./") or verb.endswith(SCRIPTS):
        return "build"  # a script run: ``bash run_tests.sh``, ``./build.sh``, ``./a.out``
    return next((name for name, verbs in CLASSES if verb in verbs), "other")


def git_subcommand(argv: Sequence[str]) -> str:
    """``git``'s subcommand past its own options (``git -C repo --no-pager diff``: diff)."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-C", "-c") else 1
    return argv[i] if i < len(argv) else ""


CLASSES = (("view", VIEW), ("search", SEARCH), ("build", BUILD))


_GIT_VIEWS = frozenset(("show", "log", "diff", "blame", "status", *GIT))  # and its searches


def only_shows(command: str) -> bool:
    """Whether every program ``command`` runs only shows what exists (views and searches: ``awk
    'NR<80' ci.log``, ``jq . report.json``, ``git show HEAD:log.txt``): a failure it prints was
    a run's before, not its own. Read whole (a heredoc's script, then ``python`` runs it), at
    most ``MAX_COMMANDS`` commands; a longer line is no view."""
    if len(command) > MAX_LINE_CHARS:
        return False
    found = False
    cmds = split_commands(command)
    if len(cmds) > MAX_COMMANDS:
        return False
    for cmd in cmds:
        argv = program(cmd.argv)
        if not argv:
            continue
        verb = name_of(argv[0])
        if verb in SETUP:
            continue
        if verb == "git":
            sub = next((w for w in argv[1:] if not w.startswith("-")), "")
            if sub not in _GIT_VIEWS:
                return False
        elif verb not in VIEW and verb not in SEARCH:
            return False
        found = True
    return found
