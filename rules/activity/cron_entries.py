"""The crontab lines a command line installs: a line ``echo``/``printf`` wrote, piped into
``crontab -`` (``(crontab -l; echo '0 3 * * * /bin/backup.sh') | crontab -``), is a cron job the
agent made, known by its line. Only a line in cron's own shape counts (five time fields or an
``@daily``-like word, then a command). A command that removes the table (``crontab -r``) or
replaces it (``crontab jobs.txt``, ``echo … | crontab -`` without ``crontab -l``, ``crontab -l |
grep -v poll | crontab -``) ends every cron job known first: what is left is not known."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence

from rules.activity.entity_pack import Made
from rules.activity.shell_lex import SimpleCommand
from rules.activity.shell_words import without_prefixes

MAX_LINES = 16  # cron lines one command line is read for
# five time fields (digits, *, /, ",", "-", month and day names) or a nickname, then the command
_CRON_LINE = re.compile(
    # a field starts at a field's start: a long run of field characters is tried once, not at
    # every position (the pattern only matches a line's start; this keeps finditer linear too)
    r"(?<![\d*/,A-Za-z-])(?:@(?:reboot|yearly|annually|monthly|weekly|daily|midnight|hourly)"
    r"|[\d*/,A-Za-z-]{1,40}(?:[ \t]{1,8}[\d*/,A-Za-z-]{1,40}){4})[ \t]{1,8}\S"
)
_WRITERS = frozenset(("echo", "printf"))
# what, fed the table (`crontab -l | grep -v poll.sh`), may leave lines out of it
_FILTERS = frozenset(("grep", "egrep", "sed", "awk", "gawk", "perl", "head", "tail", "cut", "tr"))
_OPTIONS_WITH_VALUES = frozenset(("-u",))


def cron_jobs(
    cmds: Sequence[SimpleCommand], by: str, prefixes: Collection[str] = ()
) -> Iterator[Made]:
    """The cron jobs a line installs with ``crontab -`` fed by a pipe, each by its line, after
    the end of every one known (``ends`` all) where it removes or replaces the table."""
    words = [without_prefixes(c.argv, prefixes, ()) for c in cmds]  # `sudo crontab -r`
    if any(_replaces(cmds, words, i) for i in range(len(cmds))):
        yield Made("cron_job", "*", "delete", "", (("ends", "all"),), (), by)
    if not any(_installs(c, w) for c, w in zip(cmds, words, strict=True)):
        return
    found = 0
    for argv in words:
        if not argv or argv[0] not in _WRITERS:
            continue
        texts = [w for w in argv[1:] if not w.startswith("-")]
        for text in texts[:1]:
            for line in text.replace("\\n", "\n").splitlines():
                line = line.strip()
                if found < MAX_LINES and _CRON_LINE.match(line):
                    found += 1
                    yield Made("cron_job", line, "create", line, (), (), by)


def _installs(cmd: SimpleCommand, argv: Sequence[str]) -> bool:
    """``crontab -`` (``-u user`` allowed) at the end of a pipe: it installs what it reads."""
    return bool(argv) and argv[0] == "crontab" and argv[-1] == "-" and cmd.connector == "|"


def _replaces(cmds: Sequence[SimpleCommand], words: Sequence[Sequence[str]], i: int) -> bool:
    """Whether ``cmds[i]`` removes the table or writes one whose lines are not all known to be
    the old ones: ``crontab -r``, ``crontab FILE``, ``crontab -`` fed without ``crontab -l`` or
    through a filter."""
    argv = words[i]
    if not argv or argv[0] != "crontab":
        return False
    given = [w for j, w in enumerate(argv[1:], 1) if argv[j - 1] not in _OPTIONS_WITH_VALUES]
    if any(w.startswith("-") and not w.startswith("--") and "r" in w[1:] for w in given):
        return True  # `crontab -r`, `crontab -ri`
    if not _installs(cmds[i], argv):
        return any(w != "-" and not w.startswith("-") for w in given)  # `crontab jobs.txt`
    feeding = [words[j] for j in _feeding(cmds, i)]
    keeps = any(w[:1] == ["crontab"] and "-l" in w for w in feeding)
    return not keeps or any(bool(w) and w[0] in _FILTERS for w in feeding)


def _feeding(cmds: Sequence[SimpleCommand], i: int) -> list[int]:
    """Where the commands are whose output ``cmds[i]`` reads from its pipe: the one before it,
    and with it a whole subshell (``(crontab -l; echo …) | crontab -``) or pipeline."""
    base = cmds[i].depth
    out: list[int] = []
    j, braces = i, 0  # a group in braces (`{ cat; echo …; }`) is one command of the pipe
    while j > 0 and (cmds[j].connector == "|" or cmds[j].depth > base or braces > 0):
        j -= 1
        out.append(j)
        head = cmds[j].argv[:1]
        braces += (head == ("}",)) - (head == ("{",))
        if cmds[j].connector == "(" and cmds[j].depth == base + 1:
            break  # the subshell's first command: what came before it fed nothing
    return out
