"""The identifiers a command rule of the ``entities`` pack takes from a command's words: its
operands (``arg``, ``args``, a ``flag``'s value, past the options that take one), a package's
name without its version, a path resolved, a rename's old and new, and a reset's depth
(``git reset HEAD~2``: the branch's two newest commits, ended in ``track_made``)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rules.activity.command_words import flag_value, positionals, removed_on_exit
from rules.activity.entity_pack import CommandRule, Made
from rules.activity.shell_parse import resolve_path

_VERSION = re.compile(r"[<>=!~\[;@ ]")  # flask==2.0, requests[socks], pkg@1.2
# options that make a command a rehearsal: it makes, changes and ends nothing (`kubectl create
# deployment api --dry-run=client -o yaml > deploy.yaml` writes a manifest, no deployment)
_REHEARSAL = ("--dry-run", "--dryrun")


def rehearsal(args: Sequence[str]) -> bool:
    """Whether a command's words ask for a dry run (``--dry-run``, ``--dry-run=client``, aws's
    ``--dryrun``); kubectl's ``--dry-run=none`` is a real run."""
    for a in args:
        name, eq, value = a.partition("=")
        if name in _REHEARSAL and (not eq or value.lower() not in ("none", "false")):
            return True
    return False


def rule_ids(rule: CommandRule, args: Sequence[str]) -> list[str]:
    """The identifiers a command rule takes from the words after its ``argv``."""
    spec = rule.spec
    unless = spec.get("unless") or ()
    if any(a == u or a.startswith(f"{u}=") for a in args for u in unless):
        return []
    if removed_on_exit(spec, args):
        return []
    needed = spec.get("requires")  # `helm upgrade --install`: only with one of these given
    if needed and not any(a == r or a.startswith(f"{r}=") for a in args for r in needed):
        return []
    skip = frozenset(spec.get("skip_values") or ())
    if not args_fit(spec, positionals(args, skip)):
        return []
    if "flag" in spec:
        flags = list(spec["flag"])
        if spec.get("all_values"):
            present = any(a in flags for a in args)
            return positionals([a for a in args if a not in flags], skip) if present else []
        value = flag_value(args, flags)
        return [value] if value else []
    if spec.get("words"):
        return list(args)  # every word, options too: `lsof -ti:8000` (its id_re picks the port)
    pos = positionals(args, skip)
    if spec.get("args"):
        return pos
    if "arg" in spec:
        n = int(spec["arg"])
        if len(pos) >= n:
            return [pos[n - 1]]
        return [str(spec["default"])] if "default" in spec else []
    return []


def args_fit(spec: Mapping[str, Any], pos: Sequence[str]) -> bool:
    """``only_arg`` / ``unless_arg`` ({n: words}): the rule applies only when (unless) its n-th
    word that is no option is one of them (`kubectl create secret generic NAME`: a type first);
    ``max_args``: when it has at most that many (`adduser deploy docker` adds to a group)."""
    if "max_args" in spec and len(pos) > int(spec["max_args"]):
        return False
    for key, wanted in (("only_arg", True), ("unless_arg", False)):
        for n, words in (spec.get(key) or {}).items():
            word = pos[int(n) - 1].lower() if len(pos) >= int(n) else None
            if (word in words) is not wanted:
                return False
    return True


def identifier(rule: CommandRule, raw: str, cwd: str | None) -> str | None:
    spec = rule.spec
    strip = spec.get("strip")
    if strip and raw.startswith(str(strip)):
        raw = raw[len(str(strip)) :]
    end = spec.get("strip_end")  # `nginx.service` is the unit `nginx` names: one entity
    if end and raw.endswith(str(end)) and len(raw) > len(str(end)):
        raw = raw[: -len(str(end))]
    if spec.get("package"):
        if raw.startswith((".", "/", "~")) or ("/" in raw and not raw.startswith("@")):
            return None  # a path or a URL: no package name
        # a scope's "@" leads the name (`@types/node@20`): the version's comes after it
        scope = "@" if raw.startswith("@") else ""
        raw = scope + _VERSION.split(raw[len(scope) :], 1)[0].lower()
        if raw == scope:
            return None
    if spec.get("path"):
        raw = resolve_path(raw, cwd)
    if rule.id_re is not None:
        m = rule.id_re.search(raw)
        raw = m.group(0) if m else ""
    raw = raw.strip().rstrip("/") if not spec.get("path") else raw
    return raw or None


_BACK = re.compile(r"HEAD(?:~(\d{1,3})|(\^{1,3}))")  # HEAD~2, HEAD^, HEAD^^
RESET_ID = "HEAD~"  # the id of a reset's end: the newest n commits (``track_made``)


def reset_ends(args: Sequence[str], by: str, branch: str | None) -> Iterator[Made]:
    """A reset that takes the branch back n commits (``HEAD~n``, ``HEAD^``): one end naming
    them; a reset to another commit, or of paths, names none."""
    words = positionals(args, frozenset())
    if len(words) != 1:
        return
    m = _BACK.fullmatch(words[0])
    if m is None:
        return
    n = int(m.group(1)) if m.group(1) else len(m.group(2) or "")
    if n <= 0:
        return
    attrs = (("on", branch),) if branch else ()
    yield Made("commit", f"{RESET_ID}{n}", "delete", "", attrs, (), by)


def renamed(
    rule: CommandRule, args: Sequence[str], cwd: str | None, by: str, current: str | None
) -> Iterator[Made]:
    """A rename: its first two words that are no option, old and new (with one of ``flag``
    given, when the rule names some); one word alone renames ``current`` (``git branch -m
    new``: the branch checked out), or nothing when that is not known."""
    flags = rule.spec.get("flag") or ()
    if flags and not any(a in flags for a in args):
        return
    pos = positionals(args, frozenset(rule.spec.get("skip_values") or ()))
    if len(pos) == 1 and current is not None:
        pos = [current, pos[0]]
    ids = [identifier(rule, raw, cwd) for raw in pos[:2]]
    if len(ids) == 2 and ids[0] and ids[1] and ids[0] != ids[1]:
        yield Made(rule.kind, ids[1], "move", ids[1], (), (), by, f"{rule.kind}:{ids[0]}")
