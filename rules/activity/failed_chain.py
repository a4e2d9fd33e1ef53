"""What a command line that failed still did: the commands of an ``&&`` chain, before its last,
that print nothing when they succeed and name themselves when they fail (``mkdir: cannot create
directory 'dist': File exists``). ``mkdir dist && npm run build`` exiting 1 with no ``mkdir:`` in
its output made ``dist``: what failed came after it.

What is read stops at the first command that is not one of those (its success is not known from
the output, so nor is whether what follows it ran), at one whose name an output line gives, at a
command in a subshell or with a redirection, and at any operator but ``&&``. The chain's last
command is never read: its failure may be the line's. Nothing is read when the output says no
command ran (the shell could not parse the line, or what was to run it failed first), nor when
it is empty (stderr sent elsewhere: a failing mkdir's line would not show)."""

from __future__ import annotations

import posixpath
import re
from itertools import pairwise

from rules.activity.shell_lex import SimpleCommand, split_commands

# Commands silent on success whose every failure is a line naming them (coreutils, the shell's
# ``cd``: "bash: cd: app: No such file or directory")
QUIET = frozenset({"mkdir", "touch", "cp", "mv", "ln", "rm", "rmdir", "cd"})
_SPECIAL = frozenset(" \t\n'\"\\$`;&|<>()")
# What says no command of the line ran: the shell could not parse it (an unclosed quote or
# parenthesis), or what was to run it failed first (a sandbox, a container that is not running)
_NOTHING_RAN = re.compile(
    r"syntax error|unexpected EOF|unexpected end of file|unterminated|Error response from daemon"
    r"|OCI runtime|\bbwrap:|sandbox|exec failed|executable file not found|cannot execute",
    re.IGNORECASE,
)


def ran_before_failure(command: str, output: str) -> str | None:
    """The leading commands of ``command`` that ran and succeeded though the line failed, as a
    command line of their own, or None."""
    if not _shown(output) or _NOTHING_RAN.search(output) is not None:
        return None  # nothing shown (stderr sent elsewhere): a failing mkdir would say nothing
    cmds = split_commands(command)
    ran: list[SimpleCommand] = []
    for cmd, after in pairwise(cmds):
        if after.connector != "&&" or cmd.depth or after.depth or cmd.redirects or not cmd.argv:
            break
        if (cmd.connector or "&&") != "&&":
            break
        program = posixpath.basename(cmd.argv[0])
        if program not in QUIET or f"{program}: " in output:
            break
        ran.append(cmd)
    if not ran:
        return None
    return " && ".join(" ".join(_quoted(w, c.literal) for w in c.argv) for c in ran)


# a harness's own lines around the output: its exit code, its tags (OpenHands' footer,
# mini-swe-agent's <returncode>, Claude Code's "Exit code 1", Codex's header)
_FRAME = re.compile(
    r"(?im)^[ \t]*+(?:\[?(?:command finished with )?exit(?: code| status)?\b[^\n]{0,60}"
    r"|</?(?:returncode|output)>[^\n]{0,60}|process exited[^\n]{0,60}|output:[ \t]*+"
    r"|wall time[^\n]{0,60})$"
)


def _shown(output: str) -> bool:
    """Whether the output holds a line of the commands' own, past the harness's."""
    return bool(_FRAME.sub("", output).strip())


def _quoted(word: str, literal: frozenset[str]) -> str:
    """``word`` as the shell reads it back: as it is when plain (braces and globs stay
    expandable), single-quoted when it was quoted braces or holds what the shell would read
    otherwise."""
    if not word or word in literal or any(ch in _SPECIAL for ch in word):
        return "'" + word.replace("'", "'\\''") + "'"
    return word
