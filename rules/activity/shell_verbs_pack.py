"""The ``shell_verbs`` pack compiled (``rules/packs/shell_verbs.yaml``): the verbs that make,
move and remove files, the words skipped before a command, and the programs that name in what
they print the files they made (``printed_files``: ``ssh-keygen``, alembic, Django's
``makemigrations``). Loaded once per tuple of extra packs."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.packs import builtin_strings, compile_regex, load_pack


@dataclass(frozen=True)
class PrintedFiles:
    """A program whose output names files it made: ``argv`` the words its command starts with,
    ``regex`` a line naming one (group ``path``), ``type`` what it is (file or folder). A name
    printed relative to another folder than the working one: ``under`` that folder, inside the
    folder of the file ``under_option`` names (``under_default`` without it); ``each``: the
    files the program puts in every folder it printed."""

    argv: tuple[str, ...]
    regex: re.Pattern[str]
    type: str = "file"
    under: str = ""
    under_option: str = ""
    under_default: str = ""
    each: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verbs:
    verbs: Mapping[str, Mapping[str, Any]]
    prefixes: frozenset[str]
    keywords: frozenset[str]
    shells: frozenset[str]
    subcommands: Mapping[str, Mapping[str, str]]
    ignore_targets: frozenset[str]
    printed: tuple[PrintedFiles, ...] = ()


def _printed(spec: Mapping[str, Any], i: int, builtin: frozenset[str]) -> PrintedFiles:
    source = str(spec["re"])
    where = f"shell_verbs pack: printed_files[{i}]"
    # a user's pattern is timed on adversarial inputs at start-up (built-in ones by the tests)
    regex = compile_regex(source, re.M, where, source not in builtin)
    return PrintedFiles(
        tuple(str(w) for w in spec["argv"]),
        regex,
        str(spec.get("type", "file")),
        str(spec.get("under", "")),
        str(spec.get("under_option", "")),
        str(spec.get("under_default", "")),
        tuple(str(f) for f in spec.get("each") or ()),
    )


@functools.lru_cache(maxsize=16)
def load_verbs(extra_packs: tuple[str, ...] = ()) -> Verbs:
    data = load_pack("shell_verbs", extra_packs)
    builtin = builtin_strings("shell_verbs")
    printed = tuple(_printed(s, i, builtin) for i, s in enumerate(data.get("printed_files") or ()))
    return Verbs(
        verbs=dict(data.get("verbs") or {}),
        prefixes=frozenset(data.get("prefixes") or ()),
        keywords=frozenset(data.get("keywords") or ()),
        shells=frozenset(data.get("shells") or ()),
        subcommands=dict(data.get("subcommands") or {}),
        ignore_targets=frozenset(data.get("ignore_targets") or ()),
        printed=printed,
    )
