"""The bootstrap picture of a workspace root, read from disk (read-only, through ``safe_fs``):
the top of the tree (gitignore-aware, depth- and size-bounded), the project's manifests and what
they name (package, scripts, entry points), the README's first paragraph, the agent instruction
files present, the git branch and dirty files. Synchronous: it runs in a worker thread, never on
the event loop, and stops listing when its deadline passes. Every line is redacted; the rule
that keeps it (``rules.workspace.workspace_map``) bounds and redacts it again."""

from __future__ import annotations

import json
import os
import subprocess
import time
import tomllib
from collections.abc import Callable
from typing import Any

from proxy.workspace.safe_fs import Ignore, Root, is_secret_name, list_top
from proxy.workspace_settings import WorkspaceSettings
from rules.redact import redact_text, redacted_prefix
from rules.workspace.render import manifest_type

INSTRUCTION_FILES = (
    "AGENTS.md", "CLAUDE.md", "GEMINI.md", ".cursorrules", ".cursor/rules", ".windsurfrules",
    ".github/copilot-instructions.md", "CONVENTIONS.md", ".clinerules",
)  # fmt: skip
READMES = ("README.md", "README.rst", "README.txt", "README", "readme.md")
ENTRY_POINTS = (
    "main.py", "app.py", "manage.py", "__main__.py", "cli.py", "server.py", "main.go",
    "src/main.rs", "src/lib.rs", "index.js", "index.ts", "src/index.ts", "src/index.js",
    "src/main.ts", "src/App.tsx", "Program.cs", "src/main/java", "cmd",
)  # fmt: skip
MAX_LINE = 360


def _clip(text: str, limit: int = MAX_LINE) -> str:
    """``text`` on one line, redacted, then cut: redacted after the cut, a password or a key the
    cut split kept its beginning (``postgres://admin:S3cre…``), of no secret's shape."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return redact_text(text)
    return redacted_prefix(text, limit - 1) + "…"


def _first_paragraph(text: str) -> str:
    """The README's first paragraph of prose: headings, badges, HTML and blank lines skipped."""
    para: list[str] = []
    for line in text.splitlines()[:200]:
        stripped = line.strip()
        prose = stripped and not stripped.startswith(("#", "![", "[![", "<", "=", "-", "```"))
        if prose:
            para.append(stripped)
        elif para:
            break
    return _clip(" ".join(para), 300)


def _manifest_facts(name: str, text: str) -> str:
    """What a manifest names: package, scripts or entry points, a module."""
    facts: list[str] = []
    try:
        if name in ("pyproject.toml", "Cargo.toml"):
            data = tomllib.loads(text)
            section = (
                data.get("project") or data.get("package") or data.get("tool", {}).get("poetry", {})
            )
            if isinstance(section, dict):
                if isinstance(section.get("name"), str):
                    facts.append(section["name"])
                scripts = section.get("scripts")
                if isinstance(scripts, dict) and scripts:
                    facts.append("scripts " + ", ".join(list(map(str, scripts))[:5]))
        elif name == "package.json":
            data = json.loads(text)
            if isinstance(data, dict):
                if isinstance(data.get("name"), str):
                    facts.append(data["name"])
                if isinstance(data.get("main"), str):
                    facts.append(f"main {data['main']}")
                scripts = data.get("scripts")
                if isinstance(scripts, dict) and scripts:
                    facts.append("scripts " + ", ".join(list(map(str, scripts))[:6]))
        elif name == "go.mod":
            module = next((ln for ln in text.splitlines() if ln.startswith("module ")), "")
            if module:
                facts.append(module)
        elif name.endswith((".csproj", ".fsproj")):
            for tag in ("TargetFramework", "OutputType", "AssemblyName"):
                start = text.find(f"<{tag}>")
                end = text.find(f"</{tag}>", start)
                if 0 <= start < end and end - start < 200:
                    facts.append(f"{tag} {text[start + len(tag) + 2 : end].strip()}")
    except (ValueError, tomllib.TOMLDecodeError, AttributeError, RecursionError):
        return "unreadable"  # RecursionError: nested deeper than the parsers go
    return ", ".join(facts)


def _git(root: Root, timeout: float) -> tuple[str | None, list[str] | None, str]:
    """(branch, dirty files, why not) from ``.git/HEAD`` and ``git status`` (no optional locks:
    nothing is written)."""
    head = root.read_text(os.path.join(".git", "HEAD"), 512)
    if head.text is None:
        return None, None, ""
    ref = head.text.strip()
    branch = ref.removeprefix("ref: refs/heads/") if ref.startswith("ref: ") else None
    # no global or system config, and no fsmonitor or hook the repository's config could name
    # (they run programs): a plain, read-only status
    env = {
        "GIT_OPTIONAL_LOCKS": "0",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }
    safe = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"]
    try:
        done = subprocess.run(
            ["git", *safe, "-C", root.real, "status", "--porcelain=v1",
             "--untracked-files=normal"],
            capture_output=True, timeout=timeout, env=env, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return branch, None, type(exc).__name__
    if done.returncode != 0:
        return branch, None, "git status failed"
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    dirty = [ln[3:] for ln in lines if len(ln) > 3 and not is_secret_name(os.path.basename(ln[3:]))]
    return branch, dirty, ""


def take_picture(cfg: WorkspaceSettings, root_path: str) -> dict[str, Any]:
    """The picture: ``lines`` for the block, and ``root``, ``ms``, ``left_out``, ``error``."""
    started = time.perf_counter()
    deadline = started + max(cfg.budget_ms / 1000 * 20, 1.0)  # a slow disk: cut, not waited on

    def expired() -> bool:
        return time.perf_counter() > deadline

    root = Root(root_path)
    out: dict[str, Any] = {"root": root_path}
    if not root.exists():
        out.update(error="root missing", lines=[], ms=_ms(started))
        return out
    left: dict[str, Any] = {}
    ignore = Ignore(root.read_text(".gitignore", cfg.max_file_bytes).text)
    listing = list_top(root, ignore, cfg.max_depth, cfg.max_entries, cfg.max_scanned, expired)
    left.update(listing.left_out)
    top = [e for e in listing.entries if "/" not in e.rstrip("/")]
    manifests, unread = [], []
    for entry in top:
        if entry.endswith("/") or manifest_type(entry) is None:
            continue
        read = root.read_text(entry, cfg.max_file_bytes)
        if read.text is None:
            unread.append(f"{entry} ({read.why})")
            continue
        facts = _manifest_facts(entry, read.text)
        manifests.append(f"{entry} ({facts})" if facts else entry)
    if unread:
        left["manifests_unread"] = unread[:10]
    lines = []
    types = list(dict.fromkeys(t for e in top if (t := manifest_type(e.rstrip("/")))))
    kind = "/".join(types[:3]) or "unknown type"
    lines.append(f"root {root_path}: {kind} project")
    if manifests:
        lines.append("manifests: " + "; ".join(manifests[:6]))
    entries = [p for p in ENTRY_POINTS if p in {e.rstrip("/") for e in listing.entries}]
    if entries:
        lines.append("entry points: " + ", ".join(entries[:6]))
    lines.append("tree: " + _tree_text(listing.entries))
    for name in READMES:
        if name in top:
            read = root.read_text(name, cfg.max_file_bytes)
            para = _first_paragraph(read.text) if read.text else ""
            if para:
                lines.append(f"{name}: {para}")
            break
    present = [f for f in INSTRUCTION_FILES if os.path.lexists(os.path.join(root.real, f))]
    present = [f for f in present if root.inside(os.path.join(root.real, f)) is not None]
    if present:
        lines.append("agent instructions: " + ", ".join(present))
    if not expired():
        branch, dirty, why = _git(root, cfg.git_timeout_s)
        if branch or dirty is not None:
            state = "clean" if dirty == [] else f"{len(dirty)} dirty" if dirty else "dirty unknown"
            shown = f": {', '.join(dirty[:8])}" if dirty else ""
            lines.append(f"git: branch {branch or '(detached)'}, {state}{shown}")
        if why:
            left["git"] = why
    else:
        left["git"] = "time budget"
    out.update(lines=[_clip(x) for x in lines], left_out=left, ms=_ms(started))  # redacted
    return out


def _tree_text(entries: list[str]) -> str:
    """``src/ (a.py, b/), tests/ (3), README.md``: top entries, with what the next level holds."""
    below: dict[str, list[str]] = {}
    for e in entries:
        head, _, rest = e.rstrip("/").partition("/")
        if rest and "/" not in rest:
            below.setdefault(head, []).append(rest + ("/" if e.endswith("/") else ""))
    parts = []
    for e in entries:
        if "/" in e.rstrip("/"):
            continue
        kids = below.get(e.rstrip("/"), [])
        if kids:
            inner = ", ".join(kids[:6]) + (f", +{len(kids) - 6}" if len(kids) > 6 else "")
            parts.append(f"{e} ({inner})")
        else:
            parts.append(e)
    return ", ".join(parts) or "(empty)"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


Picture = dict[str, Any]
Taker = Callable[[WorkspaceSettings, str], Picture]
