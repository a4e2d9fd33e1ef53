"""The files a downloader wrote (``curl -o``/``-O``, ``wget``), from its words: ``curl -fsSLo
tool.tgz URL`` made ``tool.tgz``, ``wget URL/app.zip`` made ``app.zip``. What goes to standard
output (``curl URL``, ``-o -``) is no file. Read by ``shell_parse`` (its ``download`` effect,
the options named in the ``shell_verbs`` pack)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

_MAX_SPLIT = 16  # letters of one bundle of short options split apart ("-fsSLo": 5)


def split_short(args: Sequence[str]) -> tuple[str, ...]:
    """Bundled short options apart: ``-fsSLo out`` is ``-f -s -S -L -o out``, so an option that
    takes a value gets the word after the bundle."""
    out: list[str] = []
    for a in args:
        if len(a) > 2 and a[0] == "-" and a[1] != "-" and a[1:].isalpha() and len(a) <= _MAX_SPLIT:
            out += [f"-{c}" for c in a[1:]]
        else:
            out.append(a)
    return tuple(out)


def _url_name(url: str) -> str | None:
    """The name a URL's path ends in (``https://x/dl/app.zip?v=2`` -> ``app.zip``), or None."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    name = posixpath.basename(path)
    return name if name and name not in (".", "..") else None


def downloaded(
    spec: Mapping[str, Any], flags: Sequence[str], ops: Sequence[str], values: Mapping[str, str]
) -> list[str]:
    """The paths (as written, before the working directory) the command wrote."""
    urls = [op for op in ops if "://" in op]
    folder = next((values[o] for o in spec.get("folder", ()) if o in values), None)
    named = [values[o] for o in spec.get("output", ()) if o in values]
    if named:
        out = [n for n in named if n != "-"]
    elif any(f in spec.get("remote_name", ()) for f in flags) or spec.get("names_by_url"):
        out = [n for u in urls if (n := _url_name(u)) is not None]
    else:
        return []  # to standard output
    return [posixpath.join(folder, p) if folder and not p.startswith("/") else p for p in out]


_TAR_OLD_STYLE = frozenset("AcdrtuxfvzjJaZpPSkmOWhlMGbCTXLNVH")  # `tar czf out.tgz src`


def archived(
    spec: Mapping[str, Any], flags: Sequence[str], ops: Sequence[str], values: Mapping[str, str]
) -> list[str]:
    """The archive an archiver wrote (as written): ``tar`` in create mode, the value of ``-f``
    (``tar -czf out.tgz src``, ``--file=out.tar``) or, its options bundled without a dash (``tar
    czf out.tgz src``), the word after them; ``zip``, its first operand. Extracting or listing
    writes none, nor an archive sent to standard output (``-f -``); an extractor given
    ``dest`` (``unzip x.zip -d out``) writes that folder, none without it."""
    mode = spec.get("mode") or ()
    if spec.get("dest"):
        out = [values[o] for o in spec["dest"] if o in values]
    elif not mode:  # zip -r out.zip src
        out = list(ops[:1])
    elif any(f in mode for f in flags):
        out = [values[o] for o in spec.get("output", ()) if o in values]
    elif ops and set(ops[0]) <= _TAR_OLD_STYLE and "c" in ops[0] and ops[0].endswith("f"):
        out = list(ops[1:2])
    else:
        return []
    return [p for p in out if p and p != "-"]
