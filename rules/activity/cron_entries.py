"""The crontab lines a command line installs: a line ``echo``/``printf`` wrote, piped into
``crontab -`` (``(crontab -l; echo '0 3 * * * /bin/backup.sh') | crontab -``), is a cron job the
agent made, known by its line. Only a line in cron's own shape counts (five time fields or an
``@daily``-like word, then a command)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from rules.activity.entity_pack import Made
from rules.activity.shell_lex import SimpleCommand

MAX_LINES = 16  # cron lines one command line is read for
# five time fields (digits, *, /, ",", "-", month and day names) or a nickname, then the command
_CRON_LINE = re.compile(
    r"(?:@(?:reboot|yearly|annually|monthly|weekly|daily|midnight|hourly)"
    r"|[\d*/,A-Za-z-]{1,40}(?:[ \t]{1,8}[\d*/,A-Za-z-]{1,40}){4})[ \t]{1,8}\S"
)
_WRITERS = frozenset(("echo", "printf"))


def cron_jobs(cmds: Sequence[SimpleCommand], by: str) -> Iterator[Made]:
    """The cron jobs a line installs with ``crontab -`` fed by a pipe, each by its line."""
    if not any(_installs(c) for c in cmds):
        return
    found = 0
    for cmd in cmds:
        argv = cmd.argv
        if not argv or argv[0] not in _WRITERS:
            continue
        words = [w for w in argv[1:] if not w.startswith("-")]
        for text in words[:1]:
            for line in text.replace("\\n", "\n").splitlines():
                line = line.strip()
                if found < MAX_LINES and _CRON_LINE.match(line):
                    found += 1
                    yield Made("cron_job", line, "create", line, (), (), by)


def _installs(cmd: SimpleCommand) -> bool:
    """``crontab -`` (``-u user`` allowed) at the end of a pipe: it installs what it reads."""
    argv = cmd.argv
    return bool(argv) and argv[0] == "crontab" and argv[-1] == "-" and cmd.connector == "|"
