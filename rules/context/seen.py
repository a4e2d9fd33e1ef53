"""What the model can still read: the working-set items whose evidence is in the messages
forwarded with a block (the view after prune, ctxproxy's own blocks and placeholders left out).
``inject`` leaves those items out of the block it renders: saying them again only adds tokens
that every later request carries.

Each item is judged by the evidence it states:

- the goal and the latest instruction: a user turn of the view still reads as that text (the
  ledger's own clipping of it gives the same string: the turn is forwarded, not elided);
- a changed file or a latest write: a call of the view that wrote that path (the call the
  ledger learnt it from, or another write of it) is forwarded;
- an open diagnostic: its message appears in a tool result forwarded whole (an elided, capped
  or dropped result does not count: its placeholder only names what it showed);
- the next repair target: the place of the first open diagnostic, readable where that is;
- a folder touched: a forwarded call names a file the agent touched in it.

Said whatever the view holds: plan items (their state is the sum of several updates), the
project, git and bootstrap lines (the proxy's own reading of the workspace, which no message
states), a closed diagnostic and "no repair target" (news of a change), and, outside this
module, entity lines (shown with a reference, for resolving it) and resolved references.

Pure and deterministic. Bounded: a few substring searches over at most ``MAX_SCAN_CHARS`` of the
view's texts, no regex on client text, and only on a request that renders a block."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any

from rules.activity.observations import EXIT_MEMO, OBSERVATION_MEMO, observations
from rules.base import Context, Messages
from rules.context import overlay, working_set
from rules.messages import INJECT_OPEN, call_arguments_text, role, text_of, tool_calls
from rules.redact import redact_text
from rules.workspace import render as workspace_render
from rules.workspace import workspace_map
from rules.workspace.tree import relative, touched_paths

MAX_SCAN_CHARS = 2_000_000  # of each kind of text searched (results, the agent's calls)
MAX_USER_TURNS = 64  # user turns compared with the goal and the instruction, newest first
MAX_NEEDLE_CHARS = 200  # of a diagnostic's message searched for
MAX_TOUCHED = 400  # newest files touched, looked up for "Folders touched"
MAX_FILES_A_FOLDER = 20  # of them searched for in the calls, newest first
_TASK_KEYS = ("Goal", "Latest instruction")
_PATH_KEYS = ("Changed files", "Latest writes")
_DIAG_KEYS = ("Open", "Next repair target")
_FOLDERS_KEY = workspace_render.FOLDERS_KEY


def _own_text(text: str) -> str:
    """``text`` without a block ctxproxy appended to it."""
    cut = text.find(INJECT_OPEN)
    return text if cut < 0 else text[:cut]


def _capped(texts: list[str]) -> list[str]:
    out, total = [], 0
    for text in texts:
        if total >= MAX_SCAN_CHARS:
            break
        out.append(text[: MAX_SCAN_CHARS - total])
        total += len(out[-1])
    return out


def _results(view: Messages) -> list[str]:
    """Tool results forwarded whole, newest first."""
    texts = [
        text_of(m.get("content"))
        for m in reversed(view)
        if role(m) == "tool" and not overlay.is_rendered(m)
    ]
    return _capped(texts)


def _calls(view: Messages) -> list[str]:
    """The agent's turns as forwarded (its prose and its calls' arguments), newest first."""
    texts = []
    for m in reversed(view):
        if role(m) != "assistant":
            continue
        texts.append(_own_text(text_of(m.get("content"))))
        texts.extend(call_arguments_text(c) for c in tool_calls(m))
    return _capped(texts)


def _task_seen(view: Messages, values: set[str]) -> set[str]:
    """Which of ``values`` (the ledger's goal, its instruction) a user turn of the view reads
    as, clipped as the ledger clipped it (to the value's own length)."""
    seen: set[str] = set()
    turns = [m for m in reversed(view) if role(m) == "user" and not overlay.is_rendered(m)]
    for m in turns[:MAX_USER_TURNS]:
        for value in values - seen:
            if working_set.task_text(m, len(value)) == value:
                seen.add(value)
        if seen == values:
            break
    return seen


def _written(ctx: Context, view: Messages) -> set[str]:
    """The paths the view's calls wrote, as the ledger records them (redacted)."""
    paths: set[str] = set()
    for obs in observations(view, None, ctx.table(EXIT_MEMO), ctx.table(OBSERVATION_MEMO)):
        action = obs.action
        if action.kind == "write":
            paths.update(action.writes or (action.target,))
        elif action.kind == "run":
            paths.update(action.writes)
    return {redact_text(p) for p in paths}


def _diag_items(diags: list[dict[str, Any]], results: list[str]) -> set[tuple[str, str]]:
    """The "Open" and "Next repair target" items whose diagnostic a forwarded result shows."""
    seen: set[tuple[str, str]] = set()
    target_seen: bool | None = None
    for d in diags[:8]:
        needle = str(d.get("message") or "")[:MAX_NEEDLE_CHARS]
        shown = bool(needle) and any(needle in text for text in results)
        if shown:
            seen.add(("Open", working_set.open_item(d)))
        if target_seen is None and d.get("file") and d.get("line"):
            target_seen = shown
            if shown:
                seen.add(("Next repair target", f"{d['file']}:{d['line']}"))
    return seen


def _touched_by_folder(wsmap: Mapping[str, Any]) -> tuple[dict[str, list[str]], str]:
    """The files the agent touched (the newest ``MAX_TOUCHED``), by their folder as "Folders
    touched" names it, relative to the project's root; and that root."""
    nodes = wsmap.get("nodes") or {}
    touched = touched_paths(nodes)
    root = workspace_render.root_of(touched, wsmap.get("cwd"))
    by_folder: dict[str, list[str]] = {}
    for path in reversed(touched[-MAX_TOUCHED:]):
        folder = posixpath.dirname(path)
        name = relative(folder, root) if root != folder else "."
        by_folder.setdefault(name, []).append(relative(path, root))
    return by_folder, root


def _folder_seen(files: list[str], calls: list[str]) -> bool:
    """Whether a call names one of ``files`` (touched in a folder; relative to the root, which
    an absolute path ends with too)."""
    return any(f in text for f in files[:MAX_FILES_A_FOLDER] for text in calls)


def visible(
    ctx: Context,
    view: Messages,
    items: list[tuple[str, str]],
    diagnostics: Callable[[], list[dict[str, Any]]],
    wsmap: Mapping[str, Any],
) -> set[tuple[str, str]]:
    """Those of ``items`` (working-set items a block would say) the model can still read in
    ``view``. ``diagnostics``: the ledger's open diagnostics, asked only when an item is one."""
    keys = {k for k, _ in items}
    out: set[tuple[str, str]] = set()
    if keys & set(_TASK_KEYS):
        values = {v for k, v in items if k in _TASK_KEYS}
        out.update((k, v) for k, v in items if k in _TASK_KEYS and v in _task_seen(view, values))
    if keys & set(_PATH_KEYS):
        written = _written(ctx, view)
        out.update((k, v) for k, v in items if k in _PATH_KEYS and v in written)
    if keys & set(_DIAG_KEYS):
        out.update(_diag_items(diagnostics(), _results(view)) & set(items))
    if _FOLDERS_KEY in keys:
        calls = _calls(view)
        by_folder, _ = _touched_by_folder(wsmap)
        out.update(
            (k, v)
            for k, v in items
            if k == _FOLDERS_KEY and _folder_seen(by_folder.get(v) or [], calls)
        )
    return out


def unseen(ctx: Context, view: Messages, items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``items`` less those the model can still read in ``view``, in their order; the ledger and
    the workspace map as ``ctx.state`` holds them."""
    if not items:
        return items
    ledger = ctx.state.get(working_set.NAMESPACE) or {}
    wsmap = ctx.state.get(workspace_map.NAMESPACE) or {}
    shown = visible(ctx, view, items, lambda: working_set.diagnostics_of(ctx, ledger), wsmap)
    return [i for i in items if i not in shown] if shown else items
