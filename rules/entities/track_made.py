"""track_entities' part for entities beyond files: per call, what a shell command made
(``entity_commands``) or a structured result showed (``entity_results``), the SQL scripts files
were written with (so running one later makes its tables, ``created_by`` it), and ends matched
to what they end (``kill 4242`` stops the server known by that PID; ``docker rm web`` the
container named web). Values are redacted before they are remembered; an identifier holding a
secret is not remembered at all.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rules.activity.agent_tools import output_header
from rules.activity.background_jobs import has_ended, named_job, started_job, stopped
from rules.activity.entity_commands import clip, command_entities, program_of
from rules.activity.entity_pack import MAX_SCAN, EntityPack, Made
from rules.activity.entity_results import result_entities
from rules.activity.file_tools import ToolPack, shell_command
from rules.activity.git_head import Head, stored_head
from rules.activity.observations import exit_code
from rules.activity.rule_words import RESET_ID
from rules.activity.shell_json import api_request, printed_json, refused
from rules.activity.shell_lex import split_commands
from rules.activity.shell_parse import Effect, Verbs
from rules.activity.sql_statements import Statement, script_statements
from rules.activity.storable import MAX_PATH_CHARS
from rules.entities.cache import made_event
from rules.entities.contents_end import contents_ended
from rules.entities.kill_patterns import pattern_regex
from rules.entities.unknown_made import TRIED
from rules.redact import holds_secret, redact_text

# a container's or an image's id, or a unique prefix of it (``docker rm 9a8b``)
_HEX_ID = re.compile(r"[0-9a-f]{4,64}")

MAX_SCRIPTS = 50
MAX_GONE = 64  # entities a deleted path ends, per call
_BACKGROUND = re.compile(r"(?<![&|>])&(?![&>])")  # `cmd &`, not `&&`, `2>&1`, `&>`
_SCRIPTS = (".sql", ".psql", ".ddl")  # files whose statements run when a command runs them
_CONTENT_KEYS = ("content", "file_text", "text", "contents", "new_string", "code")


class MadeTracker:
    """Reads calls for entities beyond files; ``scripts`` is what it keeps between requests."""

    def __init__(self, pack: EntityPack, tools: ToolPack, verbs: Verbs) -> None:
        self.pack, self.tools, self.verbs = pack, tools, verbs
        self.scripts: dict[str, list[list[str]]] = {}
        self.head: Head | None = None  # the git branch checked out (and where), when known
        self.alive: dict[str, Mapping[str, Any]] = {}  # key -> its newest event, existing now
        # a background job's process -> what later results showed of it (attrs, relations)
        self.learned: dict[str, tuple[dict[str, str], list[list[str]]]] = {}

    def load(self, scripts: Any, events: Iterable[Mapping[str, Any]], head: Any = None) -> None:
        self.head = stored_head(head)
        if isinstance(scripts, dict):
            self.scripts = {
                str(k): [list(map(str, s)) for s in v if isinstance(s, list) and len(s) == 3]
                for k, v in scripts.items()
                if isinstance(v, list)
            }
        for e in events:
            self._note(e)

    def _note(self, e: Mapping[str, Any]) -> None:
        if "id" not in e:
            return
        if e.get("action") == "delete":
            self.alive.pop(str(e.get("path")), None)
        else:
            if e.get("action") == "move" and e.get("from"):  # renamed: known by its new key
                self.alive.pop(str(e.get("from")), None)
            old = self.alive.get(key := str(e.get("path")))
            if old is not None and e.get("action") == "modify":  # `docker stop web`: its id stays
                e = {**e, "attrs": {**(old.get("attrs") or {}), **(e.get("attrs") or {})},
                     "rel": e.get("rel") or old.get("rel") or ()}  # and where it is
            self.alive[key] = e

    def _statements(self) -> dict[str, Sequence[Statement]]:
        return {p: [(s[0], s[1], s[2]) for s in v] for p, v in self.scripts.items()}

    def _remember_script(self, path: str, statements: Sequence[Statement]) -> None:
        if not statements:
            return
        self.scripts.pop(path, None)
        self.scripts[path] = [list(s) for s in statements]
        while len(self.scripts) > MAX_SCRIPTS:
            self.scripts.pop(next(iter(self.scripts)))

    def of_job_call(
        self, name: str, args: Mapping[str, Any], result: str, is_error: bool
    ) -> list[Made] | None:
        """A call about a detached job (``background_jobs``), whether or not it succeeded: the
        process a shell call detached, its end (stopped, or its output says it exited), or what
        its output shows (a server's port: ``learned``, added to the process). None: the call
        is about no job (read as any other)."""
        jobs = self.pack.jobs
        command = shell_command(self.tools, name, args)
        if command is not None:
            job = started_job(jobs, args, result) if not is_error else None
            if job is None:
                return None
            by = clip(command)
            attrs: tuple[tuple[str, str], ...] = (("job", job),)
            rel: tuple[tuple[str, str], ...] = ()
            named_port = self.pack.command_port.search(command[:MAX_SCAN])
            if named_port:  # `uvicorn … --port 8000`: "the server on port 8000" before a banner
                port = named_port.group("port")
                attrs += (("port", port), ("url", f"http://localhost:{port}"))
                rel = (("serves", f"port:{port}"),)
            return self._kept([Made("process", job, "create", by, attrs, rel, by)])
        named = named_job(jobs, name, args)
        found = self._job(named[0]) if named is not None else None
        if named is None or found is None:
            return None
        job, stops = named
        if is_error:
            return []
        if stopped(jobs, result) if stops else has_ended(jobs, result):
            by = clip(f"{name} {job}")
            return self._kept([Made("process", str(found["id"]), "delete", job, (), (), by)])
        if not stops:
            self._learn(str(found["path"]), result)
        return []

    def _job(self, job: str) -> Mapping[str, Any] | None:
        """The running process of a detached job."""
        for e in self.alive.values():
            if e.get("type") == "process" and (e.get("attrs") or {}).get("job") == job:
                return e
        return None

    def _learn(self, key: str, output: str) -> None:
        """The port a job's output names (a server's banner), added to its process."""
        port = next(
            (
                m.group("port")
                for rule in self.pack.outputs
                if rule.kind == "process" and (m := rule.regex.search(output[:MAX_SCAN]))
            ),
            None,
        )
        if port is None:
            return
        attrs = {"port": port, "url": f"http://localhost:{port}"}
        self.learned[key] = (attrs, [["serves", f"port:{port}"]])
        alive = self.alive.get(key)
        if alive is not None:
            self.alive[key] = {**alive, "attrs": {**(alive.get("attrs") or {}), **attrs}}

    def updated(self, events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """``events`` with what later results showed of a job's process added to the event
        that made it (a new dict: state is never edited in place)."""
        if not self.learned:
            return list(events)
        out: list[Mapping[str, Any]] = []
        for e in events:
            found = self.learned.get(str(e.get("path"))) if "id" in e else None
            if found is None or e.get("action") != "create":
                out.append(e)
                continue
            attrs, rel = found
            old_rel = [list(r) for r in e.get("rel") or ()]
            out.append(
                {
                    **e,
                    "attrs": {**(e.get("attrs") or {}), **attrs},
                    "rel": old_rel + [r for r in rel if r not in old_rel],
                }
            )
        return out

    def of_call(
        self,
        name: str,
        args: Mapping[str, Any],
        result: str,
        cwd: str | None,
        effects: Sequence[Effect],
        call: str,
    ) -> list[Made]:
        """What a successful call made beyond files, and what ended with a path it deleted."""
        command = shell_command(self.tools, name, args)
        header = output_header(result) if command is not None else None
        result = header.body if header is not None else result  # Codex's `{"output": …}` too
        if command is not None and header is not None and header.running:
            return self._running(command, result, cwd)  # Codex's "Process running with session ID"
        gone = self._gone_with(effects, command or name)
        written = [
            e.path
            for e in effects
            if e.type == "file" and e.action in ("create", "modify") and e.path.endswith(_SCRIPTS)
        ]
        if command is not None:
            if not self._may_make(command, written) and not self._job_notice(result):
                return self._kept(gone) if gone else []
            detached = any(args.get(a) is True for a in self.pack.jobs.detach_args)
            facts = command_entities(
                self.pack, self.verbs, command, result, cwd, self._statements(), written,
                detached=detached, head=self.head,
            )  # fmt: skip
            self.head = (
                facts.head if facts.head is None or not holds_secret(facts.head[0]) else None
            )
            for path, statements in facts.scripts.items():
                self._remember_script(path, statements)
            made = facts.made or self._printed_json(command, result, call)
            return self._kept([*made, *gone])
        if gone:
            return self._kept(gone)
        if effects:  # a file tool: a SQL script's content is remembered
            content = next((args[k] for k in _CONTENT_KEYS if isinstance(args.get(k), str)), None)
            if content and written:
                self._remember_script(written[-1], script_statements(self.pack, content))
            return []
        return self._kept(result_entities(self.pack, name, args, result, call))

    def _printed_json(self, command: str, result: str, call: str) -> list[Made]:
        """What the JSON an API client printed showed (``shell_json``), the line's last one's."""
        clients = self.pack.results.get("json_clients") or {}
        for cmd in reversed(split_commands(command[:MAX_SCAN])):
            argv = list(cmd.argv)
            while argv and "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]  # FOO=bar curl …
            spec = clients.get(argv[0].rsplit("/", 1)[-1]) if argv else None
            found = api_request(spec, argv) if isinstance(spec, Mapping) else None
            body = printed_json(result) if found else None
            if found and "id" in found[1] and not refused(body, result):
                # a record deleted by its URL: ended, whatever (if anything) was answered
                return result_entities(self.pack, found[0], found[1], body or "", call)
            if found and body:
                return result_entities(self.pack, found[0], found[1], body, call)
        return []

    def _gone_with(self, effects: Sequence[Effect], by: str) -> list[Made]:
        """The entities beyond files whose identifier is a path a deleted file or folder held
        (``rm -rf .venv`` ends the virtualenv ``python -m venv .venv`` made): a pointer to one
        would name what is gone. At most ``MAX_GONE`` a call."""
        deleted = [e.path.rstrip("/") for e in effects if e.action == "delete" and e.path]
        if not deleted or not self.alive:
            return []
        out: list[Made] = []
        for e in self.alive.values():
            ident = str(e.get("id") or "")
            rooted = ident[:1] in ("/", "~")
            if not (rooted or e.get("type") in self.pack.path_kinds) or len(out) >= MAX_GONE:
                continue
            # a path made where the working folder was not known (``.venv``) is relative: the
            # deleted path (relative too, or resolved since) ends with it
            if any(
                ident == d or ident.startswith(d + "/") or (not rooted and d.endswith("/" + ident))
                for d in deleted
            ):
                out.append(Made(str(e.get("type")), ident, "delete", str(e.get("name") or ""),
                                (), (), clip(by)))  # fmt: skip
        return out

    def _may_make(self, command: str, written: Sequence[str]) -> bool:
        """Whether a command line can make anything beyond files: it names a program the pack
        knows, puts something in the background, writes a SQL script or runs one known to make
        tables. Most lines (tests, greps, heredocs) do none: one pass, no parse."""
        text = command[:MAX_SCAN]
        if written or ("&" in text and _BACKGROUND.search(text)) or self.pack.names(text):
            return True
        return any(path.rsplit("/", 1)[-1] in command for path in self.scripts)

    def _job_notice(self, result: str) -> bool:
        """Whether a result may hold the shell's notice of a job's end (``pack.job_ended``)."""
        ended = self.pack.job_ended
        if ended is None or "[" not in result:
            return False
        head = result[:MAX_SCAN]
        return any(w in head for w in _JOB_ENDS) and ended.search(head) is not None

    def tried(
        self, name: str, args: Mapping[str, Any], result: str, cwd: str | None
    ) -> list[tuple[str, str | None]]:
        """(``unknown_made.TRIED`` and the action, the kind) of each thing beyond files a failed
        shell call would have made: "the container you just started" after it is none made
        before (``unknown_made.newer_than``)."""
        command = shell_command(self.tools, name, args)
        if command is None or not self._may_make(command, []):
            return []
        facts = command_entities(self.pack, self.verbs, command, result, cwd, {})
        return [(TRIED + m.action, m.kind) for m in facts.made if m.action == "create"]

    def still_running(
        self, name: str, args: Mapping[str, Any], result: str, cwd: str | None, is_error: bool
    ) -> list[Made]:
        """A call that did not succeed but is still running (exit code -1: the agent's harness
        stopped waiting): the server it started, if its banner shows one."""
        command = shell_command(self.tools, name, args)
        if command is None or is_error or exit_code(result) != -1:
            return []
        return self._running(command, result, cwd)

    def _running(self, command: str, result: str, cwd: str | None) -> list[Made]:
        facts = command_entities(self.pack, self.verbs, command, result, cwd, {}, running=True)
        return self._kept([m for m in facts.made if m.kind == "process"])

    def _kept(self, made: Sequence[Made]) -> list[Made]:
        """Redacted, ends matched to what they end, duplicates of one call merged."""
        out: dict[tuple[str, str], Made] = {}
        for m in made:
            # the identifier alone: "secret:db-creds" reads as a secret's assignment
            if len(m.key) > MAX_PATH_CHARS or holds_secret(m.id):
                continue  # a pointer to a redacted identifier would be a wrong one
            m = Made(
                m.kind,
                m.id,
                m.action,
                redact_text(m.name),
                tuple((k, redact_text(v)) for k, v in m.attrs),
                m.rel,
                redact_text(m.by),
                m.source if not holds_secret(m.source) else "",
            )
            for target in self._ended(m) if m.action == "delete" else [m]:
                out[(target.key, target.action)] = target
        kept = list(out.values())  # and what a deleted namespace or database held
        kept += [m for m in contents_ended(kept, self.alive) if (m.key, m.action) not in out]
        for m in kept:
            self._note({**made_event(m, 0.0, "", 0, ""), "name": m.name})  # its rel too
        return kept

    def _ended(self, m: Made) -> list[Made]:
        """The entities an end names: by key, else by an identifier among their attributes
        (``kill 4242``: the server whose PID is 4242, ``kill %1`` the job's, ``lsof -ti:8000 |
        xargs kill`` the one serving port 8000), or by a pattern their command line or program
        matches (``pkill -f http.server``, ``killall python3``: none matching, nothing ends), or
        every one of its kind (``ends`` "all": ``tmux kill-server``, ``crontab -r``)."""
        if m.kind == "commit" and m.id.startswith(RESET_ID):
            return self._reset(m)
        ends = dict(m.attrs).get("ends")
        if ends is not None:
            return [
                Made(m.kind, str(e["id"]), "delete", str(e.get("name") or ""), (), (), m.by)
                for e in self.alive.values()
                if e.get("type") == m.kind and (ends == "all" or self._matched(e, m.id, ends))
            ]
        if m.key in self.alive:
            return [m]
        hits = [
            e
            for key, e in self.alive.items()
            if e.get("type") == m.kind
            and (m.id in (e.get("attrs") or {}).values() or str(e.get("id")) == f":{m.id}")
        ]
        if not hits and _HEX_ID.fullmatch(m.id):
            # `docker rm 9a8b7c`, or its full id (`docker container prune`): the one container
            # (image) whose id, or named one's `container_id`, that begins or begins with
            hits = [e for e in self.alive.values() if e.get("type") == m.kind and any(
                _HEX_ID.fullmatch(i) and (i.startswith(m.id) or m.id.startswith(i))
                for i in (str(e.get("id")), str((e.get("attrs") or {}).get(f"{m.kind}_id"))))]
            hits = hits if len(hits) == 1 else []
        if not hits:
            return [m]
        return [
            Made(m.kind, str(e["id"]), "delete", str(e.get("name") or ""), (), (), m.by)
            for e in hits
        ]

    def _reset(self, m: Made) -> list[Made]:
        """A reset's end (``HEAD~n``): the n newest commits made on its branch (on any, when
        the branch is not known and the commits all say one), newest first."""
        n = int(m.id[len(RESET_ID) :])
        branch = dict(m.attrs).get("on")
        commits = [e for e in self.alive.values() if e.get("type") == "commit"]
        if branch is not None:
            commits = [e for e in commits if (e.get("attrs") or {}).get("on") == branch]
        elif len({(e.get("attrs") or {}).get("on") for e in commits}) > 1:
            return []  # which branch was reset is not known
        commits.sort(key=lambda e: (e.get("first_seen", 0), e.get("seq", 0)), reverse=True)
        # the end is implied, the commits unnamed: "what we just removed" means none of them
        implied = (("implied", "reset"),)
        return [
            Made("commit", str(e["id"]), "delete", str(e.get("name") or ""), implied, (), m.by)
            for e in commits[:n]
        ]

    def _matched(self, e: Mapping[str, Any], pattern: str, ends: str) -> bool:
        """Whether a pattern names a process by its command line (``command``: `pkill -f`), its
        program (``program``: `pkill`, a part of it) or its program's name (``name``: `killall`);
        program names as the pack writes them (python3 is python)."""
        command = str(e.get("name") or "")
        if ends == "command":
            regex = pattern_regex(pattern)
            return regex is not None and regex.search(command) is not None
        program = posixpath.basename(program_of(command, self.pack, self.verbs))
        names = {pattern, self.pack.programs.get(pattern, pattern)}
        if ends == "name":
            return bool(program) and program in names
        regexes = [pattern_regex(p) for p in names]
        return bool(program) and any(r is not None and r.search(program) for r in regexes)


_JOB_ENDS = ("Exit", "Done", "Terminated", "Killed", "Aborted", "fault", "Hangup")
