"""What a shell run does, by the first program its command runs: shows files (``view``: ``cat a b``,
``sed -n 1,80p f | nl``: a read the observation could not name as one file), finds paths or
lines (``search``: grep, rg, find, ls), builds, tests or runs code (``build``), or anything else.

The copy model (``rules/context/copy_odds.py``) weighs it: later calls copy from what a view or
a search showed several times as often as from a build's output, and from that several times as
often as from anything else (git, file moves, package queries; docs/rules/prune.md)."""

from __future__ import annotations

from rules.activity.observations import _verb
from rules.activity.shell_lex import split_commands
from rules.text_cache import text_cache

# the start of a command its first program is read from: a script of thousands of characters
# names it in its first words
MAX_COMMAND_CHARS = 2_000
VIEW = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "sed", "awk", "wc"})
SEARCH = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "ack", "fd", "find", "ls", "tree", "locate"}
)
BUILD = frozenset(
    {
        "python", "python3", "pytest", "node", "npm", "go", "cargo", "make", "mvn", "gradle",
        "uv", "pip", "tox",
    }
)  # fmt: skip
# words that set up the shell before the program that runs
SETUP = frozenset({"cd", "pushd", "source", ".", "export"})
CLASSES = (("view", VIEW), ("search", SEARCH), ("build", BUILD))


@text_cache(max_chars=4_000_000, max_text_chars=MAX_COMMAND_CHARS)
def run_class(command: str) -> str:
    """``view``, ``search``, ``build`` or ``other``: by the first program ``command`` runs past
    the shell's setup (``cd``, ``source``, ``export``)."""
    for cmd in split_commands(command[:MAX_COMMAND_CHARS]):
        verb = _verb(cmd.argv) if cmd.argv else ""
        if verb and verb not in SETUP:
            return next((name for name, verbs in CLASSES if verb in verbs), "other")
    return "other"
