"""The ``entities`` pack compiled (``rules/packs/entities.yaml``): command rules, output and
statement patterns, the shape of structured results. Loaded once per tuple of extra packs, when
track_entities' config is validated. Also ``Made``: one thing a call made, changed or ended.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rules.activity.background_jobs import JobRules, load_jobs
from rules.packs import builtin_strings, compile_regex, load_pack

MAX_BY_CHARS = 100  # the call that made an entity, as remembered: clipped
# Where a simple command starts, after any prefix, assignment (`FOO=bar git …`) and directory:
# its program (linear: each repeat is bounded or possessive and ends in a blank)
_STARTS = re.compile(
    r"(?:^|[;&|(\n`])[ \t]*+(?:(?:sudo|env|nohup|time|exec|command"
    r"|[A-Za-z_]\w{0,63}+=(?:\"[^\"\n]{0,256}+\"|'[^'\n]{0,256}+'"
    r"|[^\s;&|()`\"']{0,256}+))[ \t]++)*+"
    r"(?:[\w.~-]*+/)*+(?P<prog>[\w.+-]{1,40})"
)
_PY_MODULE = re.compile(r"-m[ \t]+(?:venv|virtualenv|pip)\b")
# a prefix given options (`sudo -u postgres createdb x`): its program is no word at a start
_PREFIX_OPTIONS = re.compile(r"\b(?:sudo|doas|env|nice|time|exec|stdbuf)[ \t]++-")


REDIS_CLI = "redis-cli"  # its keys are read by ``redis_keys``
MAX_SCAN = 50_000  # characters of a command line or output read for patterns


@dataclass(frozen=True)
class Made:
    """One entity a call made (``create``), changed (``modify``), showed (``list``) or ended
    (``delete``). ``key`` identifies it across calls: ``kind:id``."""

    kind: str
    id: str
    action: str
    name: str = ""
    attrs: tuple[tuple[str, str], ...] = ()
    rel: tuple[tuple[str, str], ...] = ()  # (relation, the other entity's key or path)
    by: str = ""  # the command or tool call that did it
    source: str = ""  # a rename (``move``): the key it was known by before

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True)
class CommandRule:
    argv: tuple[str, ...]
    kind: str
    action: str
    spec: Mapping[str, Any]
    output: re.Pattern[str] | None = None
    id_re: re.Pattern[str] | None = None


@dataclass(frozen=True)
class OutputRule:
    kind: str
    action: str
    regex: re.Pattern[str]
    spec: Mapping[str, Any]
    # `kind_from_command`: the command line names the kind (its group `kind`, made singular:
    # `db.customers.insertOne(…)` inserted a customer); a command naming none makes nothing
    command: re.Pattern[str] | None = None


@dataclass(frozen=True)
class EntityPack:
    labels: Mapping[str, str]
    programs: Mapping[str, str]
    commands: tuple[CommandRule, ...]
    resource_kinds: Mapping[str, str]
    outputs: tuple[OutputRule, ...]
    statements: tuple[OutputRule, ...]
    sql_clients: frozenset[str]
    background_pid: re.Pattern[str]
    job_ended: re.Pattern[str] | None
    returned_id: re.Pattern[str]
    command_port: re.Pattern[str]
    results: Mapping[str, Any] = field(default_factory=dict)
    result_verbs: Mapping[str, str] = field(default_factory=dict)  # word -> action
    by_program: Mapping[str, tuple[CommandRule, ...]] = field(default_factory=dict)
    # the programs the pack knows (python aside: only its ``-m venv``/``-m pip`` count)
    known: frozenset[str] = frozenset()
    jobs: JobRules = field(default_factory=lambda: load_jobs(None, _no_regex))
    # the kinds a command names by a path (a virtualenv's folder): deleting it ends them
    path_kinds: frozenset[str] = frozenset()
    # per program, its options taking a value that may stand before its subcommand
    # (`helm -n infra install …`): left out before the rules are matched
    global_options: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def names(self, command: str) -> bool:
        """Whether a simple command of ``command`` starts with a program the pack knows: one
        pass over the command starts, no parse. Most lines (tests, greps, heredocs) do not."""
        for m in _STARTS.finditer(command):
            if m.group("prog") in self.known:
                return True
        # a prefix given options: any word may be the program, past them
        if _PREFIX_OPTIONS.search(command) is not None and any(
            w.rsplit("/", 1)[-1] in self.known for w in command.split()
        ):
            return True
        return "-m" in command and _PY_MODULE.search(command) is not None

    def label(self, kind: str) -> str:
        return self.labels.get(kind, kind.replace("_", " "))


def _no_regex(source: str, where: str) -> re.Pattern[str]:
    raise ValueError(f"{where}: no pack to compile {source!r} for")


def _regex(source: str, flags: int, where: str, builtin: frozenset[str]) -> re.Pattern[str]:
    # a user's pattern is timed on adversarial inputs at start-up (built-in ones by the tests)
    return compile_regex(source, flags, where, source not in builtin)


@functools.lru_cache(maxsize=16)
def load_entity_pack(extra_packs: tuple[str, ...] = ()) -> EntityPack:
    data = load_pack("entities", extra_packs)
    builtin = builtin_strings("entities")
    lines = re.M | re.I
    commands = []
    for i, spec in enumerate(data.get("commands") or ()):
        where = f"entities pack: commands[{i}]"
        out = spec.get("output")
        id_re = spec.get("id_re")
        commands.append(
            CommandRule(
                argv=tuple(str(w) for w in spec["argv"]),
                kind=str(spec["kind"]),
                action=str(spec["action"]),
                spec=dict(spec),
                output=_regex(str(out), lines, where, builtin) if out else None,
                id_re=_regex(str(id_re), 0, where, builtin) if id_re else None,
            )
        )

    def rules(key: str, flags: int) -> tuple[OutputRule, ...]:
        return tuple(
            OutputRule(
                str(s["kind"]),
                str(s["action"]),
                _regex(str(s["re"]), flags, f"entities pack: {key}[{i}]", builtin),
                dict(s),
                _regex(str(s["kind_from_command"]), 0, f"entities pack: {key}[{i}]", builtin)
                if s.get("kind_from_command")
                else None,
            )
            for i, s in enumerate(data.get(key) or ())
        )

    results = dict(data.get("results") or {})
    verbs = {
        str(w).lower(): str(action)
        for action, words in (results.get("verbs") or {}).items()
        for w in words
    }
    by_program: dict[str, list[CommandRule]] = {}
    for rule in commands:
        by_program.setdefault(rule.argv[0], []).append(rule)
    outputs = rules("outputs", lines)
    programs = {str(k): str(v) for k, v in (data.get("programs") or {}).items()}
    words = {c.argv[0] for c in commands} | {str(w) for w in data.get("sql_clients") or ()}
    words |= {str(w) for w in data.get("cron_programs") or ()}
    words |= {str(p) for r in outputs for p in r.spec.get("programs") or ()} | set(programs)
    words |= {str(p) for p in results.get("json_clients") or {}}
    words.add(REDIS_CLI)  # read in code (``redis_keys``)
    return EntityPack(
        labels={str(k): str(v) for k, v in (data.get("labels") or {}).items()},
        programs={str(k): str(v) for k, v in (data.get("programs") or {}).items()},
        commands=tuple(commands),
        resource_kinds={str(k): str(v) for k, v in (data.get("resource_kinds") or {}).items()},
        outputs=outputs,
        statements=rules("statements", re.I),
        sql_clients=frozenset(str(w) for w in data.get("sql_clients") or ()),
        background_pid=_regex(str(data["background_pid"]), re.M, "entities pack", builtin),
        job_ended=(
            _regex(str(data["job_ended"]), re.M, "entities pack", builtin)
            if data.get("job_ended")
            else None
        ),
        returned_id=_regex(str(data["returned_id"]), re.M, "entities pack", builtin),
        command_port=_regex(str(data["command_port"]), 0, "entities pack", builtin),
        results=results,
        result_verbs=verbs,
        by_program={k: tuple(v) for k, v in by_program.items()},
        known=frozenset(words - {"python"}),
        path_kinds=frozenset(c.kind for c in commands if c.spec.get("path")),
        global_options={
            str(k): frozenset(str(o) for o in v or ())
            for k, v in (data.get("global_options") or {}).items()
        },
        jobs=load_jobs(
            data.get("background_jobs"),
            lambda source, where: _regex(source, re.I, where, builtin),
        ),
    )


def pack_patterns(pack: EntityPack) -> list[tuple[str, re.Pattern[str]]]:
    """Every regex of the pack that reads client text (for the regex budget test)."""
    out = [(f"entities.commands[{i}]", c.output) for i, c in enumerate(pack.commands) if c.output]
    out += [(f"entities.commands[{i}].id", c.id_re) for i, c in enumerate(pack.commands) if c.id_re]
    out += [(f"entities.outputs[{i}]", r.regex) for i, r in enumerate(pack.outputs)]
    out += [
        (f"entities.outputs[{i}].command", r.command)
        for i, r in enumerate(pack.outputs)
        if r.command is not None
    ]
    out += [(f"entities.statements[{i}]", r.regex) for i, r in enumerate(pack.statements)]
    return [
        *out,
        ("entities.command_starts", _STARTS),
        ("entities.python_module", _PY_MODULE),
        ("entities.prefix_options", _PREFIX_OPTIONS),
        ("entities.background_pid", pack.background_pid),
        *((("entities.job_ended", pack.job_ended),) if pack.job_ended else ()),
        ("entities.returned_id", pack.returned_id),
        ("entities.command_port", pack.command_port),
        *((f"entities.background_jobs[{i}]", p) for i, p in enumerate(pack.jobs.patterns())),
    ]
