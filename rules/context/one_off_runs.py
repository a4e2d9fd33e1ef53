"""One-off runs: code the agent runs once to look at something and moves on from, never to run
again as it was: inline code (``python -c '…'``, ``python - <<'EOF'``, ``node -e``), a request
(``curl``, ``wget``), an install (``pip install``, ``npm ci``), or a scratch script the session
made whole (``cat > check.py <<'EOF'``, a ``create``, a ``Write``) run by its interpreter. Keyed
by what ran, the failure of each stayed open for the rest of the session (429 at the end of the
corpus's mini-swe-agent runs, nearly all of them such runs). A one-off's failure is what the
agent's latest probe showed: it stands until the agent runs code again (the next run that
builds, tests or runs code, whatever it is), which either shows the state anew or moves on. A
project's own script (``python manage.py test``, ``python tests/runtests.py``) is no one-off:
its failure waits for it to pass again."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from rules.activity.run_class import class_of, name_of
from rules.activity.shell_lex import file_like, split_commands
from rules.activity.storable import MAX_PATH_CHARS
from rules.context.file_names import same_file
from rules.redact import redact_text

MAX_MADE = 32  # files the session wrote whole, newest last: which scripts are scratch
NETWORK = frozenset({"curl", "wget", "http", "https", "xh"})
SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
# per interpreter: the options whose value is code to run (``-c``), and those whose value is
# the next word but no code (``python -W ignore t.py``, ``node -r dotenv/config t.js``)
_INLINE: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "python": (frozenset({"-c"}), frozenset({"-W", "-X", "-Q"})),
    "py": (frozenset({"-c"}), frozenset({"-W", "-X"})),
    "ipython": (frozenset({"-c"}), frozenset()),
    "node": (frozenset({"-e", "-p", "--eval", "--print"}),
             frozenset({"-r", "--require", "--import", "--loader"})),
    "bun": (frozenset({"-e", "-p", "--eval", "--print"}), frozenset({"-r", "--preload"})),
    "ruby": (frozenset({"-e"}), frozenset({"-r", "-I"})),
    "perl": (frozenset({"-e", "-E"}), frozenset({"-I"})),
    "php": (frozenset({"-r"}), frozenset({"-d", "-c"})),
    **{shell: (frozenset(), frozenset()) for shell in SHELLS},
}  # fmt: skip
# package managers, and their subcommands that install (``uv pip install`` too)
INSTALLERS = frozenset(
    {"pip", "uv", "poetry", "pipenv", "pdm", "conda", "mamba", "npm", "yarn", "pnpm", "bun",
     "gem", "bundle", "composer", "cargo", "go", "apt", "apt-get", "brew", "dotnet"}
)  # fmt: skip
_INSTALLING = frozenset({"install", "i", "ci", "add", "sync", "get", "require"})
_WHOLE = frozenset({">", ">|", "&>"})  # a redirection that writes a file anew (not ``>>``)
_WRITERS = frozenset({"cat", "echo", "printf", "tee"})  # what such a command writes is its text


def one_off(argv: Iterable[str], where: str, ledger: Mapping[str, Any]) -> bool:
    """Whether the program ``argv`` (``run_key.run_argv``), run in ``where`` (its ``cd``, or
    ""), is a one-off: inline code or standard input for an interpreter, a request, or a
    script the session made (``ledger["made"]``, ``ledger["scripts"]``)."""
    words = list(argv)
    if not words:
        return False
    verb = name_of(words[0])
    if verb in NETWORK or _installs(verb, words):
        return True
    if verb not in _INLINE:
        return False
    code, valued = _INLINE[verb]
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
        elif word in code or word == "-":
            return True
        elif verb in ("python", "py") and word.startswith("-m"):
            return False  # a module of the project or of an installed package
        elif word in valued:
            skip = True
        elif not word.startswith("-"):
            return _made(word, where, ledger)
        elif word.startswith("--"):
            return False  # a mode of its own (``node --test``: the project's tests), no stdin
    return True  # standard input: ``python <<'EOF'``, ``bash <<'EOF'``


def _installs(verb: str, words: list[str]) -> bool:
    """Whether the program installs packages (``pip install``, ``uv add``, ``npm ci``): a failed
    install (a timeout, a missing wheel) is what that attempt showed, not the project's failure."""
    if verb not in INSTALLERS:
        return False
    sub = [w for w in words[1:4] if not w.startswith("-")]
    if verb in ("go", "cargo") and sub[:1] == ["install"]:
        # a package fetched (``go install x/y@latest``, ``cargo install ripgrep``), not the
        # project's own build installed (``go install ./...``, ``cargo install --path .``)
        return any(not w.startswith(("-", ".", "/")) for w in words[2:]) and "--path" not in words
    return bool(sub) and (sub[0] in _INSTALLING or sub[:2] == ["pip", "install"])


def runs_code(argv: tuple[str, ...]) -> bool:
    """Whether the program ``argv`` (``run_key.run_argv``) builds, tests or runs code, or sends a
    request: what shows the state anew after a one-off (not ``git commit``, ``ls``)."""
    if not argv:
        return False
    verb = name_of(argv[0])
    return verb in NETWORK or class_of(verb, argv) == "build"


_ASKS = frozenset({"-V", "--version", "-v", "-h", "--help", "-VV"})  # what a program is, no run


def runs_own_code(argv: tuple[str, ...]) -> bool:
    """Whether the program ``argv`` builds, tests or runs code: not an install nor a request
    (they run none of the project's code), nor a program asked only its version or help
    (``python3 --version``)."""
    if not argv or not runs_code(argv):
        return False
    verb = name_of(argv[0])
    if len(argv) > 1 and all(w in _ASKS for w in argv[1:]):
        return False
    return verb not in NETWORK and not _installs(verb, list(argv))


def _made(script: str, where: str, ledger: Mapping[str, Any]) -> bool:
    """Whether the session made the script run as ``script`` in ``where`` whole: by that name,
    by its absolute path (``cd /testbed``), or as the end of an absolute name made."""
    names = {script}
    if where.startswith("/") and not script.startswith(("/", "~")):
        names.add(posixpath.normpath(posixpath.join(where, script)))
    made = [*ledger.get("made", ()), *(ledger.get("scripts") or {})]
    return any(
        same_file(n, m) or (m[:1] == "/" and m.endswith("/" + n)) for n in names for m in made
    )


def note_made(ledger: dict[str, Any], paths: Iterable[str]) -> None:
    """Remember files the session wrote whole (redacted, bounded: the newest ``MAX_MADE``)."""
    made = list(ledger.get("made", ()))
    for path in map(redact_text, paths):
        if len(path) <= MAX_PATH_CHARS:
            made = [m for m in made if m != path] + [path]
    if made:
        ledger["made"] = made[-MAX_MADE:]


def whole_writes(command: str) -> list[str]:
    """The files a shell line writes anew with text of its own: ``cat > t.py <<'EOF'``, ``echo
    … > t.sh``, ``tee t.py`` (not ``>>``, nor a program's output sent to a file)."""
    out: list[str] = []
    for cmd in split_commands(command):
        verb = name_of(cmd.argv[0]) if cmd.argv else ""
        if verb not in _WRITERS:
            continue
        out += [t for op, t in cmd.redirects if op in _WHOLE and file_like(t)]
        if verb == "tee" and not any(w in ("-a", "--append") for w in cmd.argv[1:]):
            out += [w for w in cmd.argv[1:] if not w.startswith("-") and file_like(w)]
    return out
