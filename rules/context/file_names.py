"""Whether two names of a file the session wrote name one file: shared by the ledger's changed
files and by what tells a throwaway script's run (``one_off_runs``)."""

from __future__ import annotations


def same_file(a: str, b: str) -> bool:
    """Whether two names of written files name one file (kept in its newest form): the same
    name, or an absolute path and a relative one of two names or more that it ends with
    (``/testbed/pkg/a.py``, ``pkg/a.py``: a call after ``cd /testbed`` and one from the shell's
    folder). A bare name (``patch.txt``) may be any folder's file: not ``/tmp/patch.txt``."""
    if a == b:
        return True
    long, short = (a, b) if len(a) > len(b) else (b, a)
    return (
        long[:1] == "/"
        and short[:1] not in ("/", "~")
        and "/" in short
        and long.endswith("/" + short)
    )
