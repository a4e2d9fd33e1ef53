"""Compressors that replace a file by another: ``gzip data.csv`` makes ``data.csv.gz`` and removes
``data.csv``, ``gunzip data.csv.gz`` (``gzip -d``, ``xz -d``, ``unxz``, ``bunzip2`` …) makes
``data.csv``; ``-k`` keeps the first; ``-c``, a test or a listing writes no file, and ``-r``
is not followed (a folder's files, each). Read
by ``shell_parse`` (its ``compress`` effect: the pack's ``suffixes``, and ``decompress`` for a
program that only decompresses). Without this "the file you just extracted" found none, and the
file compressed stayed a candidate under a name no longer there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rules.activity.shell_words import has_short, resolve_path

MAX_FILES = 32  # operands followed per command
_NO_FILE = frozenset(("--stdout", "--to-stdout", "--test", "--list", "--recursive"))


class _Adds(Protocol):
    cwd: str | None

    def add(
        self, action: str, typ: str, path: str, source: str | None = None, how: str | None = None
    ) -> None: ...


def compressed(
    parser: _Adds,
    spec: Mapping[str, Any],
    flags: Sequence[str],
    ops: Sequence[str],
    values: Mapping[str, str],
) -> None:
    """The files a compressor's operands became (made; the operands removed unless kept)."""
    flags = list(flags)
    if has_short(flags, "ctlr") or _NO_FILE.intersection(flags):
        return
    suffixes = tuple(str(s) for s in spec.get("suffixes") or ())
    if not suffixes:
        return
    undo = bool(spec.get("decompress")) or has_short(flags, "d") or "--decompress" in flags
    keep = has_short(flags, "k") or "--keep" in flags
    for op in ops[:MAX_FILES]:
        source = resolve_path(op, parser.cwd)
        if undo:
            end = next((s for s in suffixes if source.endswith(s) and len(source) > len(s)), None)
            if end is None:
                continue  # a name without the suffix: not one it decompresses
            target = source[: -len(end)]
        else:
            target = source + suffixes[0]
        parser.add("create", "file", target)
        if not keep:
            parser.add("delete", "file", source)
