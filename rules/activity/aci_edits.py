"""SWE-agent's editing commands, sent through its shell tool: ``edit N:M`` (its body up to
``end_of_edit``), ``create F``, ``insert N``, ``append``. None names the file it changes but
``create``; each answers with the file it changed, ``[File: /repo/f.py (10 lines total)]``
first. A shell would not run them, and the working set missed every such edit (16 of 16
conversations of the corpus)."""

from __future__ import annotations

import re

_COMMANDS = ("edit ", "create ", "insert ", "append")
_FILE = re.compile(r"\[File: (?P<path>[^\s\]()]{1,1000}) \(\d{1,9} lines total")
_REFUSED = "Your proposed edit has introduced new syntax error"  # the edit was not applied


def aci_written(command: str, result: str) -> tuple[str, ...]:
    """The file an editing command changed, from its answer's first line; () for any other."""
    if not command.startswith(_COMMANDS) or not result.startswith("[File: "):
        return ()
    m = _FILE.match(result)
    if m is None or _REFUSED in result[:4000]:
        return ()
    return (m["path"],)
