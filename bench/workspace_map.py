"""The workspace map (``workspace_map``) over every request prefix of the trace corpus, the session
state carried from request to request (7 s apart), as a live proxy sees them. After each request
it checks the map against what the agent did so far:

- every file the agent read or wrote (a read or write call, as ``rules.activity.observations``
  classifies it: file tools, a single ``cat``/``sed -n``, a heredoc or ``sed -i`` write,
  ``apply_patch``) and did not delete or move away since is in the map (a path written relative
  counts when a map path ends with it);
- nothing the agent deleted since (``rm``, ``git rm``, ``mv``'s source, as
  ``rules.activity.file_tools.call_effects`` reads them) is in it.

Prints the coverage, the deleted paths still shown, the map's size and the rule's time.

    .venv/bin/python -m bench.workspace_map             # the whole corpus (about a minute)
    .venv/bin/python -m bench.workspace_map --limit 20  # the first 20 conversations
"""

from __future__ import annotations

import argparse
import posixpath
import statistics
import time
from collections.abc import Iterable
from typing import Any

import orjson

from rules.activity.file_tools import call_effects, call_succeeded, load_tools
from rules.activity.observations import load_arguments, observations
from rules.activity.shell_parse import load_verbs, resolve_path
from rules.base import Context, SessionState
from rules.messages import call_arguments_text, call_name, text_of, tool_pairs
from rules.redact import holds_secret
from rules.workspace import workspace_map
from tests.support.factories import TOKENS
from tests.support.traces import iter_conversations, request_prefixes

STEP_SECONDS = 7.0


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _in_map(path: str, keys: set[str], suffixes: set[str]) -> bool:
    path = _norm(path)
    return path in keys if path.startswith(("/", "~")) else (path in keys or path in suffixes)


def _suffixes(keys: Iterable[str]) -> set[str]:
    """Every trailing part of every path (``a/b/c`` -> ``b/c``, ``c``)."""
    out: set[str] = set()
    for key in keys:
        parts = key.split("/")
        for i in range(1, len(parts)):
            out.add("/".join(parts[i:]))
    return out


class Truth:
    """What the agent read, wrote and deleted, replayed call by call alongside the map."""

    def __init__(self) -> None:
        self.have: dict[str, None] = {}  # read or written, as the call wrote the path
        self.deleted: set[str] = set()  # resolved, as call_effects gives them
        self.cwd: str | None = None
        self.read_calls = 0
        # ``observations``' memos: each request resends the earlier turns, classified once
        self._exits: dict[int, tuple[Any, Any]] = {}
        self._seen: dict[int, tuple[Any, Any]] = {}

    def add(self, messages: list[dict[str, Any]], start: int) -> int:
        pack, verbs = load_tools(), load_verbs()
        results = {
            o.result_index: o for o in observations(messages, memo=self._exits, seen=self._seen)
        }
        pairs = [p for p in tool_pairs(messages) if p[2] is not None and p[2] >= start]
        for _, call, answer in sorted(pairs, key=lambda p: p[2] or 0):
            assert answer is not None
            obs = results.get(answer)
            args = load_arguments(call_arguments_text(call))
            result = text_of(messages[answer].get("content"))
            is_error = messages[answer].get("is_error") is True
            if not call_succeeded(pack, call_name(call), args, result, is_error):
                continue
            if obs is not None and obs.action.kind in ("read", "write"):
                targets = obs.action.writes or (obs.action.target,)
                for t in targets:
                    if t and not holds_secret(t) and not t.startswith("/dev/"):
                        # as written (a chain's own ``cd`` may have moved it), ``..`` resolved
                        t = _norm(resolve_path(t, self.cwd) if ".." in t.split("/") else t)
                        self.have[t] = None
                        again = [d for d in self.deleted if d == t or d.endswith("/" + t)]
                        self.deleted.difference_update(again)
            effects, self.cwd = call_effects(
                pack, verbs, call_name(call), args, result, self.cwd, {}, True
            )
            for e in effects:
                gone = e.source if e.action == "move" else e.path if e.action == "delete" else None
                if gone is None:
                    if e.action in ("create", "modify", "copy", "move"):
                        self.deleted.discard(e.path)
                    continue
                self.deleted.add(gone)
                for p in list(self.have):
                    if gone == p or gone.endswith("/" + p) or p.startswith(gone + "/"):
                        del self.have[p]
            if e_moved := [e for e in effects if e.action in ("move", "copy")]:
                for e in e_moved:
                    self.deleted.discard(e.path)
        return max((p[2] or 0 for p in pairs), default=start - 1) + 1


def run(limit: int | None) -> dict[str, Any]:
    cfg = workspace_map.Config()
    checked = found = stale = requests = 0
    sizes: list[int] = []
    times: list[float] = []
    missing_examples: list[str] = []
    missed: set[str] = set()
    stale_examples: list[str] = []
    for n, conv in enumerate(iter_conversations()):
        if limit is not None and n >= limit:
            break
        state, now, truth, start = SessionState(), 1_000_000.0, Truth(), 0
        for prefix in request_prefixes(conv["messages"]):
            now += STEP_SECONDS
            requests += 1
            ctx = Context(
                prefix, "gpt-4o", TOKENS, now, conv["id"], state, original_messages=prefix
            )
            started = time.perf_counter()
            out = workspace_map.apply(ctx, cfg)
            times.append((time.perf_counter() - started) * 1000)
            state = out.state
            wsmap = state.get(workspace_map.NAMESPACE) or {}
            keys = set((wsmap.get("nodes") or {}).keys())
            start = truth.add(prefix, start)
            suffixes = _suffixes(keys)
            for path in truth.have:
                checked += 1
                if _in_map(path, keys, suffixes):
                    found += 1
                elif len(missing_examples) < 12 and path not in missed:
                    missed.add(path)
                    missing_examples.append(f"{conv['id'][:60]}: {path}")
            gone = [d for d in truth.deleted if d in keys]
            stale += len(gone)
            if gone and len(stale_examples) < 5:
                stale_examples.append(f"{conv['id'][:60]} @{len(prefix)}: {gone[0]}")
        sizes.append(len(orjson.dumps(state.get(workspace_map.NAMESPACE) or {})))
    times.sort()
    return {
        "conversations": len(sizes),
        "requests": requests,
        "checks": checked,
        "found": found,
        "coverage": found / checked if checked else 1.0,
        "deleted_still_shown": stale,
        "state_bytes_median": int(statistics.median(sizes)) if sizes else 0,
        "state_bytes_max": max(sizes, default=0),
        "ms_median": statistics.median(times) if times else 0.0,
        "ms_p99": times[int(len(times) * 0.99)] if times else 0.0,
        "missing_examples": missing_examples,
        "stale_examples": stale_examples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N conversations only")
    args = parser.parse_args()
    r = run(args.limit)
    print(
        f"{r['conversations']} conversations, {r['requests']} requests: "
        f"{r['found']}/{r['checks']} read-or-written files in the map after their request "
        f"({100 * r['coverage']:.2f} %), deleted paths still shown: {r['deleted_still_shown']}"
    )
    print(
        f"map state: median {r['state_bytes_median']} B, max {r['state_bytes_max']} B; "
        f"workspace_map per request: median {r['ms_median']:.3f} ms, p99 {r['ms_p99']:.3f} ms"
    )
    for line in r["missing_examples"]:
        print("  missing:", line)
    for line in r["stale_examples"]:
        print("  deleted but shown:", line)


if __name__ == "__main__":
    main()
