"""What a command line's words say, for the entities pack's rules (``entity_commands``): the value
of an option, the words that are no option, and ``docker run``'s own: its published ports, its
mounted folders, and whether it was gone by the time the call returned (``--rm``, not detached)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.activity.entity_pack import CommandRule
from rules.activity.shell_parse import resolve_path


def flag_value(args: Sequence[str], flags: Sequence[str]) -> str | None:
    """The value given to the first of ``flags`` among ``args`` (``--name web``, ``--name=web``)."""
    for i, a in enumerate(args):
        for f in flags:
            if a == f and i + 1 < len(args):
                return args[i + 1]
            if f.startswith("--") and a.startswith(f + "="):
                return a[len(f) + 1 :]
    return None


def positionals(args: Sequence[str], skip: frozenset[str]) -> list[str]:
    """The words that are no option (``skip``: the options that take the next word), none the
    shell would expand."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out += list(args[i + 1 :])
            break
        if a.startswith("-") and len(a) > 1:
            i += 2 if a in skip else 1
            continue
        if a and "$" not in a and "`" not in a:
            out.append(a)
        i += 1
    return out


def removed_on_exit(spec: Mapping[str, Any], args: Sequence[str]) -> bool:
    """``docker run --rm`` not detached: the call returned once the container had exited, and
    it was removed then (``removed_on_exit``; ``detach``: the options that keep it running,
    a short one also among others, ``-dit``)."""
    flag = spec.get("removed_on_exit")
    if flag is None or flag not in args:
        return False
    detach = tuple(spec.get("detach") or ())
    letters = "".join(d[1] for d in detach if len(d) == 2 and d[0] == "-")
    return not any(
        a in detach
        or (a[:1] == "-" and a[1:2] != "-" and a[1:].isalpha() and set(letters) & set(a[1:]))
        for a in args
    )


def container_extras(
    rule: CommandRule, args: Sequence[str], cwd: str | None
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(attributes, relations) of ``docker run``: published ports, mounted folders."""
    attrs: list[tuple[str, str]] = []
    rel: list[tuple[str, str]] = []
    for flag in rule.spec.get("ports") or ():
        value = flag_value(args, [flag])
        if value:
            attrs.append(("port", value.split(":")[0] if ":" in value else value))
    for flag in rule.spec.get("mounts") or ():
        value = flag_value(args, [flag])
        host = value.split(":", 1)[0] if value else ""
        if host.startswith(("/", ".", "~")) and "$" not in host:
            rel.append(("mounts", resolve_path(host, cwd)))
    return tuple(attrs), tuple(rel)
