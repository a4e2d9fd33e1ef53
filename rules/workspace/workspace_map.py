"""workspace_map: a map of the workspace built from what the agent saw, per session: folders it
listed (``ls``, ``find``, ``tree``, ``git ls-files``, a file tool's directory view), files it read,
wrote, created, moved and deleted, files search hits and build or test output named, and the git
branch and dirty files ``git status`` / ``git branch`` showed (``rules.workspace.observe``). It
needs no access to the disk, so it works for any deployment.

Merged into one bounded tree (``rules.workspace.tree``): each entry says when it was last seen and
whether the agent changed it. inject's "Working set" section shows its part that matters (the
project's type and manifests, the branch, the folders touched: ``rules.workspace.render``), where
the working set is said, so only when it changed. A bootstrap picture the proxy read from a
configured workspace root (``workspace.root``, ``proxy.workspace``) arrives as the hint
``workspace_bootstrap``; its lines are kept once and said in the next block, so they are part of
the cached prefix from then on. Messages pass unchanged.

Each call is read once (``rules.activity.observations.high_water`` over the keys of the newest
calls read), so a fact keeps the time it was first seen by the proxy. Paths holding a secret are
never kept; every text kept is redacted."""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import Field

from rules.activity.file_tools import load_tools
from rules.activity.observations import high_water, load_arguments
from rules.activity.shell_parse import load_verbs
from rules.activity.storable import placeable, storable, stored_id
from rules.base import Context, ListMemo, RuleConfig, RuleResult
from rules.messages import (
    PLACEHOLDER_PREFIX,
    call_arguments_text,
    call_id,
    call_name,
    text_of,
    tool_pairs,
)
from rules.redact import holds_secret, redact_text
from rules.report import WorkspaceSummary
from rules.tool_pairs import pairs_of
from rules.workspace import render, tree
from rules.workspace.observe import KnownTypes, observe

NAMESPACE = "workspace"
BOOT_HINT = "workspace_bootstrap"  # ``Context.hints`` key of the proxy's bootstrap picture
SEEN_WINDOW = 256  # keys of the newest calls read: where the previous request stopped
MAX_PENDING = 64
FIGURES_MEMO = "workspace_figures"  # ``Context.memo`` name: the last nodes object's figures
UNREAD_MEMO = "workspace_unread"  # ``Context.recall`` name: a list and a map with no call to read
MAX_DIRTY = 50
# entries subtree moves and deletions look at in one request: past it each acts on its own
# path only (`mv a b && mv b a …` over a 600-entry folder cost 3.5 s for a 45 KiB line)
MAX_SUBTREE_VISITS = 200_000
MAX_BOOT_LINES = 12
MAX_BOOT_LINE = 400


class Config(RuleConfig):
    max_entries: int = Field(
        default=600,
        ge=10,
        le=20_000,
        description="entries (files and folders) the map keeps per session; past it, entries "
        "only listed go first, then those only read, then changed ones (oldest first)",
    )
    max_folders: int = Field(
        default=8, ge=0, le=50, description='"Folders touched" shown in the working set, at most'
    )
    report_lines: int = Field(
        default=40, ge=0, le=400, description="lines of the folded tree in the request's report"
    )


def call_key(call: Mapping[str, Any]) -> str:
    digest = hashlib.blake2b(
        call_arguments_text(dict(call)).encode("utf-8", "surrogatepass"), digest_size=6
    )
    return f"{stored_id(call_id(dict(call)))}:{digest.hexdigest()}"


def _kept(path: str) -> bool:
    return bool(path) and placeable(path) and not holds_secret(path)


def _may_hold(nodes: tree.Nodes, path: str) -> bool:
    """Whether ``path`` may have entries under it: not a file, nor a listed name with an
    extension (``f0.txt``, as ``ls`` shows it)."""
    node = nodes.get(path)
    if node is None or node[0] == "d":
        return True
    return node[0] == "?" and "." not in posixpath.basename(path).lstrip(".")


def _apply_fact(nodes: tree.Nodes, fact: tuple[str, ...], at: int, visits: list[int]) -> None:
    """``fact`` applied to the map; ``visits``: the entries subtree moves and deletions may
    still look at in this request (past it, one acts on its own path only)."""
    op = fact[0]
    whole = False
    if op in ("move", "copy", "delete") and _may_hold(nodes, fact[1]):  # its subtree looked at
        whole = visits[0] > 0
        visits[0] -= len(nodes)
    if op in ("move", "copy"):
        source, target, kind = fact[1], fact[2], fact[3]
        if _kept(target):
            tree.move(nodes, source, target, kind, at, keep=op == "copy", whole=whole)
        elif op == "move":
            tree.delete(nodes, source, whole)
        return
    path, kind = fact[1], fact[2]
    if op == "delete":
        tree.delete(nodes, path, whole)
    elif _kept(path):
        flag = {"list": "l", "named": "l", "read": "r", "w": "w", "c": "c", "r": "r"}[op]
        tree.note(nodes, path, kind, flag, at)


def build(ctx: Context, before: Mapping[str, Any], cfg: Config) -> dict[str, Any] | None:
    """The map after reading the calls of ``ctx.messages`` not read before; None when there
    are none (the map is ``before``). Not yet ``storable``: ``apply`` checks it once."""
    messages = ctx.messages
    pack, verbs = load_tools(), load_verbs()
    pairs = pairs_of(ctx) if messages is ctx.messages else tool_pairs(messages)
    seen = list(before.get("seen") or [])[-SEEN_WINDOW:]
    seen_set = set(seen)
    pending = list(before.get("pending") or [])
    start = high_water(len(pairs), lambda i: call_key(pairs[i][1]), seen_set)
    todo = [p for p in pairs[:start] if call_key(p[1]) in pending] if pending else []
    new = [*todo, *pairs[start:]]
    if not new:
        return None
    # a node is replaced, never changed in place (rules/workspace/tree.py): the entries this
    # request leaves alone stay the very objects, which the state's redaction does not walk
    nodes: tree.Nodes = dict(before.get("nodes") or {})
    cwd: str | None = before.get("cwd")
    git: dict[str, Any] = dict(before.get("git") or {})
    evicted = int(before.get("evicted") or 0)
    at = int(ctx.now)
    visits = [MAX_SUBTREE_VISITS]
    for _, call, answer in new:
        key = call_key(call)
        if key in seen_set:
            continue
        result = "" if answer is None else text_of(messages[answer].get("content"))
        if answer is None or result.startswith(PLACEHOLDER_PREFIX):
            if key not in pending:
                pending.append(key)
            continue
        if key in pending:
            pending.remove(key)
        seen.append(key)
        seen_set.add(key)
        arguments = call_arguments_text(call)
        is_error = messages[answer].get("is_error") is True
        facts = observe(
            pack, verbs, call_name(call), load_arguments(arguments), arguments, result,
            is_error, cwd, KnownTypes(nodes),
        )  # fmt: skip
        for fact in facts.facts:
            _apply_fact(nodes, fact, at, visits)
            if len(nodes) > 2 * cfg.max_entries:  # a copy into itself doubles it: bound now
                evicted += tree.bound(nodes, cfg.max_entries)
        cwd = facts.cwd if facts.cwd is None or placeable(facts.cwd) else None
        # the call each fact came from: its result, forwarded whole, shows the model the same
        # (``seen``)
        if facts.branch is not None:
            git["branch"] = redact_text(facts.branch)[:200]
            git["at"], git["branch_call"] = at, stored_id(call_id(call))
        if facts.dirty is not None:
            dirty = [[c, p] for c, p in facts.dirty if _kept(p)]
            git["dirty"], git["at"] = dirty[:MAX_DIRTY], at
            git["dirty_call"] = stored_id(call_id(call))
    evicted += tree.bound(nodes, cfg.max_entries)
    out: dict[str, Any] = {**before, "nodes": nodes, "cwd": cwd, "seen": seen[-SEEN_WINDOW:]}
    out["max_folders"] = cfg.max_folders  # read by render.section_items (inject's section)
    if git:
        out["git"] = git
    if evicted:
        out["evicted"] = evicted
    if pending or "pending" in before:
        out["pending"] = pending[-MAX_PENDING:]
    return out


def boot_lines(picture: Any) -> list[str] | None:
    """The bootstrap picture's lines as kept: strings, redacted, bounded."""
    lines = picture.get("lines") if isinstance(picture, Mapping) else None
    if not isinstance(lines, list):
        return None
    out = [redact_text(x)[:MAX_BOOT_LINE] for x in lines if isinstance(x, str) and x.strip()]
    return out[:MAX_BOOT_LINES] or None


def _figures(nodes: tree.Nodes, cwd: str | None, memo: ListMemo | None) -> tuple[str, int, int]:
    """The map's root, how many files it holds and how many the agent changed: walked once for
    a nodes object (``memo``: ``Context.memo``, kept per session; a stored map is never changed
    in place, and an unchanged one is the very object again)."""
    kept = memo.get(FIGURES_MEMO) if memo is not None else None
    if kept and kept[0][0][0] is nodes and kept[0][1][0] == cwd:
        return kept[0][1][1]  # type: ignore[no-any-return]
    # one walk for the three: ``render.project_root``'s touched files, the files, the changed
    touched: list[str] = []
    files = changed = 0
    unchanged = tree.CHANGED.isdisjoint  # ``not tree.is_changed``, bound once
    for path, v in nodes.items():
        if v[0] == "d":
            continue
        files += 1
        flags = v[1]
        if not unchanged(flags):
            changed += 1
            touched.append(path)
        elif "r" in flags:
            touched.append(path)
    figures = (render.root_of(touched, cwd), files, changed)
    if memo is not None:
        memo[FIGURES_MEMO] = [((nodes,), (cwd, figures))]
    return figures


def summary(
    wsmap: Mapping[str, Any],
    cfg: Config,
    now: int,
    picture: Any,
    size: int | None,
    memo: ListMemo | None = None,
) -> WorkspaceSummary:
    """The report's view of the map; its folded tree only when the map changed on this request
    (``size`` known): rendering it costs more than the rest of the rule, and an unchanged map's
    tree is the one the request that last changed it shows. ``memo``: ``_figures``'."""
    nodes: tree.Nodes = wsmap.get("nodes") or {}
    root, files, changed = _figures(nodes, wsmap.get("cwd"), memo)
    sources = ["observed"] if nodes or wsmap.get("git") else []
    if wsmap.get("boot"):
        sources.append("bootstrap")
    out: WorkspaceSummary = {
        "source": "+".join(sources) or "none",
        "root": root,
        "entries": len(nodes),
        "files": files,
        "folders": len(nodes) - files,
        "changed": changed,
        "left_out": {"evicted": int(wsmap.get("evicted") or 0)},
    }
    if size is not None:
        out["bytes"] = size
        if cfg.report_lines:
            out["tree"] = render.tree_lines(nodes, root, now, cfg.report_lines, memo)
    else:
        out["unchanged"] = True
    if isinstance(picture, Mapping):
        boot = {k: picture[k] for k in ("root", "ms", "left_out", "error") if k in picture}
        out["bootstrap"] = storable(boot)
    return out


def apply(ctx: Context, cfg: Config) -> RuleResult:
    before = ctx.state.get(NAMESPACE) or {}
    # the very messages this map left with no call to read before: none to read again
    unread = ctx.recall(UNREAD_MEMO, (before, cfg))[0]
    built = None if unread else build(ctx, before, cfg)
    if built is None and not unread:
        ctx.keep(UNREAD_MEMO, (before, cfg), True)
    wsmap = before if built is None else built
    picture = ctx.hints.get(BOOT_HINT)
    used = None
    if picture is not None and "boot" not in wsmap:
        used = picture  # reported, an error or what was left out too
        lines = boot_lines(picture)
        if lines:
            wsmap = {**wsmap, "boot": lines}
    # no call read (only ones still unanswered): the map is the one stored
    read_none = built is not None and (built["seen"], built.get("pending")) == (
        before.get("seen"),
        before.get("pending"),
    )
    if wsmap is before or (read_none and wsmap is built):
        wsmap, state, size = before, ctx.state, None
    else:
        try:  # its size, and whether the state can store it (lone surrogates in client text)
            size = len(orjson.dumps(wsmap))
        except TypeError:
            wsmap = storable(wsmap)
            size = len(orjson.dumps(wsmap))
        state = ctx.state.with_value(NAMESPACE, wsmap)
    return RuleResult(
        ctx.messages,
        state,
        {"workspace": summary(wsmap, cfg, int(ctx.now), used, size, ctx.memo)},
    )
