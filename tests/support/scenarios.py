"""Multi-turn reference scenarios (tests/rules/entities/scenarios/*.yaml) run as a live proxy
would see them: each scenario becomes a Chat Completions conversation, sent request by request
through track_entities (state carried), and the tested user message through track_entities then
resolve_refs, as the pipeline orders them.

A scenario: ``{id, lang, class, cwd, parent?: {cwd, steps}, steps, ask, expect}``. A step is one
of ``{shell, exit, output}`` (a ``bash`` call with ``{"command": …}``; the result ends in
OpenHands' ``[Command finished with exit code N]``), ``{tool, args, ok}`` (``write_file``,
``edit_file``, ``read_file``, ``delete_file``, ``list_dir``: a file tool called with ``args``;
a failure reads ``Error: …``), ``{wait: seconds}`` (the clock moves on) or ``{user: text}``.
Each call is answered STEP_SECONDS after the one before; the agent's shell starts in ``cwd``
(seeded as track_entities' working directory: the shell of the agents in the corpus reports it).
A ``parent`` is the lead agent's session, run first; the scenario is then its sub-agent, whose
requests carry the parent's state as a ``rules.base.Ancestor`` (``X-Parent-Session-Id``).

``expect: {path: ABS}`` passes when every resolved reference points to that path (and one does);
``expect: {kind, id}`` when every one points to the entity of that kind and identifier (a
branch, a commit's short SHA, a PID, a customer id …); ``expect: {abstain: true, why}`` passes
when no reference resolves. A tool step's ``output`` may be a mapping or a list: the result is
its JSON (a structured result); a shell step's ``exit`` may be -1 (still running), or null
(no exit code shown).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rules.base import Ancestor, SessionState
from rules.entities import resolve_refs, track_entities
from rules.workspace import workspace_map
from tests.support.factories import apply_rules, assistant, call, ctx, result, system, user

STEP_SECONDS = 4.0
START = 1_700_000_000.0
FILE_TOOLS = {"write_file", "edit_file", "read_file", "delete_file", "list_dir"}
TRACK = (track_entities, track_entities.Config())
RESOLVE = (resolve_refs, resolve_refs.Config())
# the workspace map, as the default pipeline runs it after track_entities: what it listed is
# what exists for the next request's tracking (``rules.entities.known_paths``)
WORKSPACE = (workspace_map, workspace_map.Config())
# libyaml's loader where PyYAML has it: the scenario files are read at collection, in every worker
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Scenario:
    id: str
    lang: str
    cls: str
    cwd: str
    steps: tuple[Mapping[str, Any], ...]
    ask: str
    expect: Mapping[str, Any]
    parent: Mapping[str, Any] | None = None
    source: str = ""  # the file it came from


@dataclass(frozen=True)
class Outcome:
    scenario: Scenario
    passed: bool
    resolved: tuple[str, ...]  # paths the references resolved to
    references: tuple[Mapping[str, Any], ...]

    def describe(self) -> str:
        sc = self.scenario
        want = (
            sc.expect.get("path")
            or (f"{sc.expect['kind']}:{sc.expect['id']}" if "id" in sc.expect else None)
            or f"abstain ({sc.expect.get('why', '')})"
        )
        refs = "; ".join(
            f"{r.get('mention')!r}->{(r.get('entity') or {}).get('path') or r.get('abstained')}"
            f" {r.get('confidence')}"
            for r in self.references
        )
        return f"{sc.id} [{sc.cls}/{sc.lang}] {sc.ask!r}: want {want}; got {refs or 'no mention'}"


def load(path: str | Path) -> list[Scenario]:
    data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    items = data.get("scenarios", data) if isinstance(data, dict) else data
    out = []
    for item in items or ():
        out.append(
            Scenario(
                id=str(item["id"]),
                lang=str(item.get("lang", "")),
                cls=str(item.get("class", "")),
                cwd=str(item["cwd"]),
                steps=tuple(item.get("steps") or ()),
                ask=str(item["ask"]),
                expect=dict(item["expect"]),
                parent=item.get("parent"),
                source=Path(path).name,
            )
        )
    return out


@dataclass
class _Session:
    """One agent's conversation as its requests reach the proxy."""

    id: str
    cwd: str
    now: float
    ancestors: tuple[Ancestor, ...] = ()
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: SessionState = field(default_factory=SessionState)
    calls: int = 0

    def __post_init__(self) -> None:
        self.messages = [system("You are a coding agent working in a terminal.")]
        self.state = SessionState(
            {
                track_entities.META: {"cwd": self.cwd, "seq": 0, "seen": []},
                workspace_map.NAMESPACE: {"cwd": self.cwd},
            }
        )

    def send(self, resolve: bool = False) -> Mapping[str, Any]:
        rules = [TRACK, WORKSPACE, RESOLVE] if resolve else [TRACK, WORKSPACE]
        context = ctx(
            list(self.messages),
            now=self.now,
            state=self.state,
            session_id=self.id,
            ancestors=self.ancestors,
        )
        res = apply_rules(context, *rules)
        self.state = res.state
        return res.report

    def say(self, text: str) -> Mapping[str, Any]:
        if self.messages[-1]["role"] == "tool":
            self.messages.append(assistant("Done."))
        elif self.messages[-1]["role"] == "user":
            self.messages.append(assistant("OK."))
        self.now += STEP_SECONDS
        self.messages.append(user(text))
        return self.send()

    def step(self, step: Mapping[str, Any]) -> None:
        if "wait" in step:
            self.now += float(step["wait"])
            return
        if "user" in step:
            self.say(str(step["user"]))
            return
        if len(self.messages) == 1:
            self.say("Let's get started.")
        self.calls += 1
        cid = f"call_{self.id}_{self.calls}"
        if "shell" in step:
            tool_call = call(cid, "bash", command=str(step["shell"]))
            output = str(step.get("output") or "")
            code = step.get("exit", 0)
            content = (
                output  # `exit: null`: plain output, no footer (a shell tool that shows none)
                if code is None
                else f"{output}\n[Command finished with exit code {int(code)}]".lstrip("\n")
            )
        else:
            name = str(step["tool"])
            tool_call = call(cid, name, **dict(step.get("args") or {}))
            raw = step.get("output")
            output = json.dumps(raw) if isinstance(raw, (dict, list)) else str(raw or "")
            if step.get("ok", True):
                content = output or _success(name, dict(step.get("args") or {}))
            else:
                content = f"Error: {output or 'the operation failed'}"
        self.messages.append(assistant(None, tool_call))
        self.now += STEP_SECONDS
        self.messages.append(result(cid, content))
        self.send()


def _success(tool: str, args: Mapping[str, Any]) -> str:
    path = next((str(v) for k, v in args.items() if "path" in k or k in ("file", "dir")), "")
    return {
        "write_file": f"Wrote {path}.",
        "edit_file": f"Edited {path}.",
        "read_file": "(contents shown)",
        "delete_file": f"Deleted {path}.",
        "list_dir": "(listing shown)",
    }.get(tool, "ok")


def run(sc: Scenario) -> Outcome:
    now, ancestors = START, ()
    if sc.parent:
        lead = _Session("lead", str(sc.parent.get("cwd") or sc.cwd), now)
        for step in sc.parent.get("steps") or ():
            lead.step(step)
        now = lead.now
        ancestors = (Ancestor(lead.id, lead.state, 1),)
    agent = _Session("agent", sc.cwd, now, ancestors)
    for step in sc.steps:
        agent.step(step)
    if agent.messages[-1]["role"] == "tool":
        agent.messages.append(assistant("Done."))
    agent.now += STEP_SECONDS
    agent.messages.append(user(sc.ask))
    report = agent.send(resolve=True)
    refs = tuple(report.get("references") or ())
    resolved = tuple(r["entity"]["path"] for r in refs if r.get("entity"))
    if "path" in sc.expect:
        want = posixpath.normpath(str(sc.expect["path"]))
        passed = bool(resolved) and {posixpath.normpath(p) for p in resolved} == {want}
    elif "id" in sc.expect:
        want = f"{sc.expect['kind']}:{sc.expect['id']}"
        passed = bool(resolved) and set(resolved) == {want}
    else:
        passed = not resolved
    return Outcome(sc, passed, resolved, refs)


def expected_kind(sc: Scenario) -> str:
    """What a scenario is about: the kind it expects, file or folder, or abstain."""
    if "kind" in sc.expect:
        return str(sc.expect["kind"])
    if "path" in sc.expect:
        return "file/folder"
    return "abstain"


def summary(outcomes: Sequence[Outcome]) -> dict[str, tuple[int, int]]:
    """(passed, total) overall (``""``), per class (``class:…``) and per language (``lang:…``)."""
    out: dict[str, tuple[int, int]] = {}
    for o in outcomes:
        for key in ("", f"class:{o.scenario.cls}", f"lang:{o.scenario.lang}"):
            p, t = out.get(key, (0, 0))
            out[key] = (p + o.passed, t + 1)
    return out
