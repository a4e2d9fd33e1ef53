"""What the model can still read: the working-set items whose evidence is in the messages
forwarded with a block (the view after prune, ctxproxy's own blocks and placeholders left out).
``inject`` leaves those items out of the block it renders: saying them again only adds tokens
that every later request carries.

Each item is judged by the evidence it states:

- the goal and the latest instruction: a user turn of the view still reads as that text (the
  ledger's own clipping of it gives the same string: the turn is forwarded, not elided);
- a changed file or a latest write: a call of the view that wrote that path and did not fail
  (the call the ledger learnt it from, or another write of it) is forwarded;
- an open diagnostic: its message, with its code, appears in the result of the very run the
  ledger took it from (its call id), forwarded whole (an elided, capped or dropped result does
  not count: its placeholder only names what it showed; the same text in a source file, another
  command's output or an older run of the same command is not that failure);
- the next repair target: the place of the first open diagnostic, readable where that is;
- a folder touched: a forwarded call's arguments name a file the agent touched in it, by its
  path from the root (or ``./`` and it) or its absolute path;
- the project: a forwarded call's arguments name each manifest the line names, as a folder's
  file is named;
- git: the calls the map took the line's facts from (``git status``, ``git branch``: the
  branch's, the dirty files'), by call id, forwarded with their results whole.

A line left out is not recorded as said (``inject``): the next request whose history is hidden
judges it again, so a line whose evidence the client itself cleared since is said then.

Said whatever the view holds: plan items (their state is the sum of several updates), the
bootstrap lines (the proxy's own reading of the workspace, which no message states), a closed
diagnostic and "no repair target" (news of a change), and, outside this module, resolved
references. An entity line shown with a reference is left out by ``inject_text.recent_lines``
while its call is one of ``calls_in_view``.

Pure and deterministic. Bounded, and only on a request whose history is hidden while a line is
to be judged: the start of each writing call's result, at most ``MAX_SCAN_CHARS`` of the failing
runs' results and of call arguments (scanned once, linearly, into a set of the paths they name:
a file is a lookup), ``MAX_USER_TURNS`` user turns, and the view's calls classified (kept per
message across requests)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from rules.activity.observations import EXIT_MEMO, OBSERVATION_MEMO, Observation, observations
from rules.activity.storable import stored_id
from rules.base import Context, Message, Messages
from rules.context import digest, overlay, working_set
from rules.context.ledger_record import written_paths
from rules.messages import call_arguments_text, role, text_of, tool_calls
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
_PROJECT_KEY, _GIT_KEY = "Project", "Git"


def _named_paths(view: Messages) -> set[str]:
    """The paths the agent's forwarded calls name in their arguments (not its prose), a line
    anchor dropped; newest calls first, at most ``MAX_SCAN_CHARS`` of them. One linear scan of
    each text (``digest.paths_in``, kept per text), then a set lookup a file."""
    out: set[str] = set()
    total = 0
    for m in reversed(view):
        if role(m) != "assistant":
            continue
        for call in tool_calls(m):
            if total >= MAX_SCAN_CHARS:
                return out
            text = call_arguments_text(call)[: MAX_SCAN_CHARS - total]
            total += len(text)
            out.update(digest.paths_in(text))
    return out


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


def _observed(ctx: Context, view: Messages) -> list[Observation]:
    return observations(view, None, ctx.table(EXIT_MEMO), ctx.table(OBSERVATION_MEMO))


def _written(view: Messages, observed: list[Observation]) -> set[str]:
    """The paths the view's calls wrote, as the ledger counts them (redacted): a failed write
    is no evidence of a change (``ledger_record.written_paths``)."""
    paths: set[str] = set()
    for obs in observed:
        if obs.action.kind in ("write", "run"):
            text = text_of(view[obs.result_index].get("content"))
            paths.update(written_paths(obs, text))
    return {redact_text(p) for p in paths}


def _failing_runs_shown(
    view: Messages, observed: list[Observation], runs: Mapping[str, Any]
) -> dict[str, str]:
    """By command (as the ledger keys its runs), the result of the very run the ledger took
    its diagnostics from (its stored call id), when the view forwards it whole: an older run
    of the same command is not that failure, and an elided, capped or dropped one shows only
    what its placeholder names."""
    wanted = {
        str(run.get("call_id")): command
        for command, run in runs.items()
        if isinstance(run, Mapping) and run.get("call_id")
    }
    out: dict[str, str] = {}
    total = 0
    for obs in observed:
        command = wanted.get(stored_id(obs.call_id)) if obs.action.kind == "run" else None
        if command is None or total >= MAX_SCAN_CHARS:
            continue
        message = view[obs.result_index]
        if not overlay.is_rendered(message):
            text = text_of(message.get("content"))[: MAX_SCAN_CHARS - total]
            total += len(text)
            out[command] = text
    return out


def _shows(d: dict[str, Any], text: str) -> bool:
    """Whether ``text`` (the failing run's whole result) shows diagnostic ``d``: its message,
    and its code (an exception's type) with it, as a failing run prints them."""
    needle = str(d.get("message") or "")[:MAX_NEEDLE_CHARS]
    return bool(needle) and needle in text and str(d.get("code") or "") in text


def _diag_items(diags: list[dict[str, Any]], runs: Mapping[str, str]) -> set[tuple[str, str]]:
    """The "Open" and "Next repair target" items whose diagnostic a forwarded whole result of
    the very command that failed shows (its text elsewhere, in a source file or another
    command's output, is not that failure)."""
    seen: set[tuple[str, str]] = set()
    target_seen: bool | None = None
    for d in diags[:8]:
        shown = _shows(d, runs.get(str(d.get("command") or ""), ""))
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


def _named_file(f: str, named: set[str], root: str) -> bool:
    """Whether a call names ``f`` (relative to the root) by that path, as ``./`` and it, or by
    its absolute path: a file of the same name in another folder is another file."""
    return f in named or "./" + f in named or posixpath.join(root, f) in named


def _folder_seen(files: list[str], named: set[str], root: str) -> bool:
    """Whether a call names one of ``files`` (touched in a folder, relative to the root)."""
    return any(_named_file(f, named, root) for f in files[:MAX_FILES_A_FOLDER])


def _project_seen(wsmap: Mapping[str, Any], named: set[str]) -> bool:
    """Whether a call names every manifest the "Project" line names (``render.manifests``)."""
    nodes = wsmap.get("nodes") or {}
    root = workspace_render.project_root(nodes, wsmap.get("cwd"))
    paths = workspace_render.manifests(nodes, root)
    return bool(paths) and all(_named_file(p, named, root) for p in paths)


def calls_in_view(ctx: Context, view: Messages) -> set[str]:
    """The calls (stored ids) forwarded in ``view`` with their results whole: an entity line
    (``inject_text.recent_lines``) whose action one of them took is in front of the model."""
    return set(_forwarded_whole(view, _observed(ctx, view)))


def _forwarded_whole(view: Messages, observed: list[Observation]) -> dict[str, Message]:
    """The results forwarded whole in ``view`` (not a placeholder of prune's), by stored call id."""
    return {
        stored_id(obs.call_id): view[obs.result_index]
        for obs in observed
        if not overlay.is_rendered(view[obs.result_index])
    }


# the start of a git call's result searched for the line's facts (git status is short)
_MAX_GIT_CHARS = 200_000


def _git_seen(view: Messages, observed: list[Observation], git: Mapping[str, Any]) -> bool:
    """Whether the calls the map took the "Git" line's facts from (the branch's, the dirty
    files' or a clean tree's) are forwarded with results whole that still show those facts (the
    branch, each dirty file's name, "clean"): a placeholder, prune's or the client's own, names
    none of them, and another ``git status`` is another state of the tree."""
    wanted: dict[str, list[str]] = {}  # call → the words its result shows
    if git.get("branch"):
        wanted.setdefault(str(git.get("branch_call") or ""), []).append(str(git["branch"]))
    if "dirty" in git:
        names = [posixpath.basename(str(p).rstrip("/")) for _, p in git.get("dirty") or []]
        wanted.setdefault(str(git.get("dirty_call") or ""), []).extend(names or ["clean"])
    if not wanted or "" in wanted:
        return False  # a fact with no call known (a map stored before calls were)
    results = _forwarded_whole(view, observed)
    for call, words in wanted.items():
        result = results.get(call)
        text = text_of(result.get("content"))[:_MAX_GIT_CHARS] if result is not None else ""
        if not text or not all(w in text for w in words):
            return False
    return True


def visible(
    ctx: Context,
    view: Messages,
    items: list[tuple[str, str]],
    diagnostics: Callable[[], list[dict[str, Any]]],
    wsmap: Mapping[str, Any],
    runs: Mapping[str, Any],
) -> set[tuple[str, str]]:
    """Those of ``items`` (working-set items a block would say) the model can still read in
    ``view``. ``diagnostics``: the ledger's open diagnostics, asked only when an item is one."""
    keys = {k for k, _ in items}
    out: set[tuple[str, str]] = set()
    if keys & set(_TASK_KEYS):
        values = {v for k, v in items if k in _TASK_KEYS}
        out.update((k, v) for k, v in items if k in _TASK_KEYS and v in _task_seen(view, values))
    observed: list[Observation] | None = None
    if keys & set(_PATH_KEYS):
        observed = _observed(ctx, view)
        written = _written(view, observed)
        out.update((k, v) for k, v in items if k in _PATH_KEYS and v in written)
    if keys & set(_DIAG_KEYS):
        observed = observed if observed is not None else _observed(ctx, view)
        shown = _failing_runs_shown(view, observed, runs)
        out.update(_diag_items(diagnostics(), shown) & set(items))
    named = _named_paths(view) if keys & {_FOLDERS_KEY, _PROJECT_KEY} else set()
    if _FOLDERS_KEY in keys:
        by_folder, root = _touched_by_folder(wsmap)
        out.update(
            (k, v)
            for k, v in items
            if k == _FOLDERS_KEY and _folder_seen(by_folder.get(v) or [], named, root)
        )
    if _PROJECT_KEY in keys and _project_seen(wsmap, named):
        out.update(i for i in items if i[0] == _PROJECT_KEY)
    if _GIT_KEY in keys:
        observed = observed if observed is not None else _observed(ctx, view)
        if _git_seen(view, observed, wsmap.get("git") or {}):
            out.update(i for i in items if i[0] == _GIT_KEY)
    return out


def unseen(ctx: Context, view: Messages, items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``items`` less those the model can still read in ``view``, in their order; the ledger and
    the workspace map as ``ctx.state`` holds them."""
    if not items:
        return items
    ledger = ctx.state.get(working_set.NAMESPACE) or {}
    wsmap = ctx.state.get(workspace_map.NAMESPACE) or {}
    runs = ledger.get("runs") or {}
    diagnostics = partial(working_set.diagnostics_of, ctx, ledger)
    shown = visible(ctx, view, items, diagnostics, wsmap, runs)
    return [i for i in items if i not in shown] if shown else items
