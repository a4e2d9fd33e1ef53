"""The map as text: its part that matters for the working-set block (the project's type and
manifests, the git branch, the folders the agent touched), the bootstrap picture's lines, and the
whole map as a folded tree for the report (``show`` and ``/ui`` draw it).

Pure and deterministic: the same map gives the same lines."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from rules.base import ListMemo
from rules.workspace.folded import folded
from rules.workspace.tree import Nodes, common_root, relative, touched_paths

# manifest file name -> the project type it says; "*.csproj"-style names by their extension
MANIFESTS = {
    "pyproject.toml": "python", "setup.py": "python", "setup.cfg": "python",
    "requirements.txt": "python", "Pipfile": "python", "tox.ini": "python",
    "package.json": "node", "tsconfig.json": "typescript", "deno.json": "deno",
    "go.mod": "go", "Cargo.toml": "rust", "pom.xml": "java", "build.gradle": "java",
    "build.gradle.kts": "kotlin", "Gemfile": "ruby", "composer.json": "php",
    "CMakeLists.txt": "c/c++", "Makefile": "make", "mix.exs": "elixir", "Package.swift": "swift",
    "pubspec.yaml": "dart", "stack.yaml": "haskell", "dune-project": "ocaml",
}  # fmt: skip
MANIFEST_EXTENSIONS = {".csproj": "dotnet", ".fsproj": "dotnet", ".sln": "dotnet",
                       ".cabal": "haskell", ".gemspec": "ruby"}  # fmt: skip
FOLD = 12  # a folder with more entries shows the ones the agent touched and a count
BOOT_KEY = "Workspace"
FOLDERS_KEY = "Folders touched"


def manifest_type(name: str) -> str | None:
    if name in MANIFESTS:
        return MANIFESTS[name]
    ext = posixpath.splitext(name)[1]
    return MANIFEST_EXTENSIONS.get(ext)


def project_root(nodes: Nodes, cwd: str | None) -> str:
    """The folder paths are shown relative to: the one holding every file the agent touched,
    else its working directory."""
    return root_of(touched_paths(nodes), cwd)


def root_of(touched: list[str], cwd: str | None) -> str:
    """``project_root`` of a map whose ``touched_paths`` are ``touched``."""
    root = common_root(touched[-200:]) if touched else ""
    if cwd and (not root or root.startswith(cwd.rstrip("/") + "/")):
        return cwd.rstrip("/") or root
    return root


def manifests(nodes: Nodes, root: str) -> list[str]:
    """Manifests at the project's top (or one folder down), as root-relative paths."""
    out = []
    for path, value in nodes.items():
        if value[0] == "d" or manifest_type(posixpath.basename(path)) is None:
            continue
        rel = relative(path, root)
        if (rel != path or not root) and rel.count("/") <= 1:
            out.append(rel)
    return sorted(out, key=lambda p: (p.count("/"), p))[:8]


def project_line(paths: list[str]) -> str | None:
    types: list[str] = []
    for p in paths:
        t = manifest_type(posixpath.basename(p))
        if t and t not in types:
            types.append(t)
    if not paths:
        return None
    return f"{'/'.join(types[:3])} ({', '.join(paths)})"


def folders_touched(nodes: Nodes, root: str, limit: int) -> list[str]:
    """Folders of the files the agent read or changed, most recent first."""
    out: list[str] = []
    for path in reversed(touched_paths(nodes)):
        folder = relative(posixpath.dirname(path), root) if root != posixpath.dirname(path) else "."
        if folder and folder not in out:
            out.append(folder)
            if len(out) >= limit:
                break
    return out


def section_items(wsmap: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The map's items of the working-set section: project, git, folders touched (as many as
    the map's ``max_folders``)."""
    nodes: Nodes = wsmap.get("nodes") or {}
    if not nodes and not wsmap.get("git"):
        return []
    root = project_root(nodes, wsmap.get("cwd"))
    items: list[tuple[str, str]] = []
    project = project_line(manifests(nodes, root))
    if project:
        items.append(("Project", f"{project} in {root}" if root else project))
    git = wsmap.get("git") or {}
    if git.get("branch") or git.get("dirty"):
        items.append(("Git", git_line(git, root)))
    limit = int(wsmap.get("max_folders", 8))
    items.extend((FOLDERS_KEY, f) for f in folders_touched(nodes, root, limit))
    return items


def git_line(git: Mapping[str, Any], root: str, limit: int = 6) -> str:
    dirty = [relative(p, root) for _, p in git.get("dirty") or []]
    parts = [f"branch {git['branch']}"] if git.get("branch") else []
    if dirty:
        more = f" (+{len(dirty) - limit})" if len(dirty) > limit else ""
        parts.append(f"{len(dirty)} dirty: {', '.join(dirty[:limit])}{more}")
    elif "dirty" in git:
        parts.append("clean")
    return "; ".join(parts)


def working_files(wsmap: Any, limit: int) -> frozenset[str]:
    """The last ``limit`` files the agent read or changed, as the map keys them and relative to
    the project's root: what prune weighs as still being worked on."""
    if not isinstance(wsmap, Mapping) or limit <= 0:
        return frozenset()
    nodes: Nodes = wsmap.get("nodes") or {}
    recent = touched_paths(nodes)[-limit:]
    root = project_root(nodes, wsmap.get("cwd"))
    return frozenset([*recent, *(relative(p, root) for p in recent)])


def boot_items(wsmap: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The bootstrap picture's lines, as the map stored them (said once, in the first block)."""
    return [(BOOT_KEY, line) for line in wsmap.get("boot") or [] if isinstance(line, str)]


LINES_MEMO = "workspace_tree_lines"  # ``Context.memo`` name: a fold's shape and its drawing
# a line as ``_walk`` draws it: the text, or a folder's text before its age and its path
Drawn = str | tuple[str, str]


def tree_lines(
    nodes: Nodes, root: str, now: int, max_lines: int = 40, memo: ListMemo | None = None
) -> list[str]:
    """The whole map as an indented tree, folded: a folder of more than ``FOLD`` entries shows
    those the agent touched and how many others; marks: ``*`` changed, ``+`` created, ``r`` read;
    each folder with when it was last seen. Stops at ``max_lines``. ``memo``: ``Context.memo``,
    where the session's last fold is kept (``folded``), and its drawing while the fold's entries
    stay the same (a tool loop's call that only saw known paths again): then only the folders'
    ages are worked out."""
    children, seen_at, shape = folded(nodes, root, memo)
    kept = memo.get(LINES_MEMO) if memo is not None else None
    if kept and kept[0][1][0] is shape and kept[0][1][1] == max_lines:
        drawn: list[Drawn] = kept[0][1][2]
    else:
        drawn = []
        top = "/" if "/" in children and "" not in children else ""
        _walk(children, top, 0, drawn, max_lines + 1)
        if len(drawn) > max_lines:
            drawn = [*drawn[: max_lines - 1], "… more"]
        if memo is not None:
            memo[LINES_MEMO] = [((), (shape, max_lines, drawn))]  # kept by its shape, no list
    return [
        line if isinstance(line, str) else f"{line[0]}({_age(now - seen_at.get(line[1], now))})"
        for line in drawn
    ]


def _walk(
    children: dict[str, dict[str, str]], folder: str, depth: int, lines: list[Drawn], limit: int
) -> None:
    entries = children.get(folder, {})
    if depth == 0 and folder == "" and "/" in children:
        entries = {**entries, "/": "/"}
    names = entry_order(entries)
    shown = names if len(names) <= FOLD else [n for n in names if entries[n]][:FOLD]
    pad = "  " * depth
    for name in shown:
        if len(lines) >= limit:
            return
        mark = entries[name]
        if mark == "/":
            here = (folder.rstrip("/") + "/" + name if folder else name) if name != "/" else "/"
            lines.append((f"{pad}{name.rstrip('/')}/  ", here))  # its age: at the request's clock
            if here != folder:
                _walk(children, here, depth + 1, lines, limit)
        else:
            lines.append(f"{pad}{name} {mark}".rstrip())
    if len(shown) < len(names):
        lines.append(f"{pad}… {len(names) - len(shown)} more")


def entry_order(entries: dict[str, str]) -> list[str]:
    """A folder's entries as the tree lists them: folders (marked ``/``) first, each kind by
    name; two plain sorts, no key made per entry (a listing's folder holds hundreds)."""
    names = sorted([n for n, m in entries.items() if m == "/"])
    names += sorted([n for n, m in entries.items() if m != "/"])
    return names


def _age(seconds: int) -> str:
    if seconds < 60:
        return f"seen {max(0, seconds)}s ago"
    if seconds < 3600:
        return f"seen {seconds // 60}m ago"
    return f"seen {seconds // 3600}h ago"
