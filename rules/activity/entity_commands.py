"""What a shell command line made beyond files, from its words and what it printed: branches
(``git checkout -b``), commits (the ``[main 0509ee3] msg`` line), containers, images, virtualenvs,
packages, Kubernetes resources, buckets, background servers (``&`` with a printed PID or a
"listening on :5173" banner), tables, databases and rows (SQL a client ran, or a script the
command ran whose content an earlier call wrote). The rules come from the ``entities`` pack
(``entity_pack``); this module applies them. Pure: the caller says whether the call succeeded.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from rules.activity.command_words import (
    container_extras,
    positionals,
)
from rules.activity.cron_entries import cron_jobs
from rules.activity.entity_pack import (
    MAX_BY_CHARS,
    MAX_SCAN,
    REDIS_CLI,
    CommandRule,
    EntityPack,
    Made,
)
from rules.activity.entity_results import singular
from rules.activity.exec_inside import inside
from rules.activity.git_head import GitHead, Head, switched_elsewhere, without_globals
from rules.activity.placement import NAMESPACED_PROGRAMS, client_database, namespace_of, placed
from rules.activity.redis_keys import redis_made
from rules.activity.rule_words import identifier, rehearsal, renamed, reset_ends, rule_ids
from rules.activity.shell_lex import SimpleCommand, split_commands, tokenize
from rules.activity.shell_parse import Verbs, resolve_path
from rules.activity.shell_words import without_prefixes
from rules.activity.sql_statements import (
    Statement,
    script_made,
    script_statements,
    sql_made,
)
from rules.redact import redacted_prefix


@dataclass
class CommandFacts:
    """What one command line did beyond files, and the SQL scripts it wrote (path -> statements)."""

    made: list[Made] = field(default_factory=list)
    scripts: dict[str, list[Statement]] = field(default_factory=dict)
    head: Head | None = None  # the git branch checked out after it ran, when known


def clip(text: str) -> str:
    """A command as an entity keeps it; cut, redacted before the cut (a key it split was kept)."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_BY_CHARS else redacted_prefix(text, MAX_BY_CHARS - 1) + "…"


def _words(cmd: SimpleCommand, pack: EntityPack, verbs: Verbs) -> list[str]:
    """The command's words without prefixes (sudo, env, FOO=bar) nor a container's exec, its
    program normalised."""
    argv = without_prefixes(cmd.argv, verbs.prefixes, verbs.keywords)
    inner = inside(argv)  # `docker exec db psql -c …`: what runs in the container
    if inner is not None:
        argv = without_prefixes(inner, verbs.prefixes, verbs.keywords)
    if not argv:
        return []
    program = posixpath.basename(argv[0])
    argv = [*pack.programs.get(program, program).split(), *argv[1:]]
    if argv[:3] == ["python", "-m", "pip"]:
        argv = ["pip", *argv[3:]]
    takes_value = pack.global_options.get(argv[0])
    if takes_value:  # `helm -n infra uninstall cache`: the rules read `helm uninstall cache`
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            i += 2 if argv[i] in takes_value else 1
        argv = [argv[0], *argv[i:]]
    return argv


def _apply_rule(
    rule: CommandRule,
    argv: Sequence[str],
    output: str,
    cwd: str | None,
    pack: EntityPack,
    head: GitHead | None = None,
) -> Iterator[Made]:
    args = argv[len(rule.argv) :]
    if rehearsal(args):  # `kubectl create … --dry-run=client`: nothing made, nothing ended
        return
    by = clip(" ".join(argv))
    kind = rule.kind
    if "kind_arg" in rule.spec:
        pos = positionals(args, frozenset(rule.spec.get("skip_values") or ()))
        n = int(rule.spec["kind_arg"])
        word = pos[n - 1].lower() if len(pos) >= n else ""
        kind = pack.resource_kinds.get(word, "")
        if not kind:
            return
    if rule.spec.get("resets"):  # `git reset --hard HEAD~2`: the branch's 2 newest commits
        yield from reset_ends(args, by, head.current(cwd) if head is not None else None)
        return
    if rule.spec.get("rename"):  # `git branch -m old new`: the old key moves to the new one
        current = head.renamed(args, cwd) if head is not None and rule.spec.get("current") else None
        yield from renamed(rule, args, cwd, by, current)
        return
    if rule.spec.get("ends_all"):  # `tmux kill-server`: every one of the kind known
        yield Made(kind, "*", rule.action, "", (("ends", "all"),), (), by)
        return
    named = rule_ids(rule, args) if "flag" in rule.spec else []
    if rule.output is not None and not named:  # `docker run` without --name: its printed id
        for m in rule.output.finditer(output[:MAX_SCAN]):
            groups = m.groupdict()
            ident = groups.get("id") or rule.spec.get("fixed_id")
            if not ident:
                continue
            rel = tuple(
                (name, f"{target}:{groups[name]}")
                for name, target in (rule.spec.get("rel") or {}).items()
                if groups.get(name)
            )
            attrs = tuple((k, v) for k, v in groups.items() if v and k not in ("id", "name"))
            name = (groups.get("name") or "").strip()
            yield Made(kind, str(ident), rule.action, name, attrs, rel, by)
        return
    attrs, rel = container_extras(rule, args, cwd) if kind == "container" else ((), ())
    printed = rule.output.search(output[:MAX_SCAN]) if rule.output is not None else None
    if printed is not None and printed.groupdict().get("id"):
        attrs += ((f"{kind}_id", printed.group("id")),)  # docker run --name web: its id too
    id_attr = rule.spec.get("id_attr")
    if rule.spec.get("state"):  # `docker stop web`: it still exists, stopped
        attrs += (("state", str(rule.spec["state"])),)
    if rule.spec.get("match"):  # `pkill -f http.server`: a pattern the process's command matches
        full = any(a in (rule.spec.get("full") or ()) for a in args)
        attrs += (("ends", "command" if full else str(rule.spec["match"])),)
    for raw in rule_ids(rule, args):
        ident = identifier(rule, raw, cwd)
        if ident is None:
            continue
        own = kind  # `systemctl enable backup.timer`: a timer, known as backup
        for suffix, suffixed in (rule.spec.get("suffix_kinds") or {}).items():
            if ident.endswith(suffix) and len(ident) > len(suffix):
                ident, own = ident[: -len(suffix)], str(suffixed)
        name = posixpath.basename(ident) if rule.spec.get("path") else ident
        extra = ((str(id_attr), ident),) if id_attr else ()
        yield Made(own, ident, rule.action, name, attrs + extra, rel, by)


def _in(kind: str, ident: str | None) -> str | None:
    return f"{kind}:{ident}" if ident else None


def _matches(rule: CommandRule, argv: Sequence[str]) -> bool:
    return len(argv) >= len(rule.argv) and tuple(argv[: len(rule.argv)]) == rule.argv


def _fed(rule: CommandRule, consumer: str | None) -> bool:
    """Whether a rule applies given the program its command's output feeds: a rule with
    ``feeds`` (`lsof -ti:8000`) only when that is one of them (`| xargs kill`, `kill $(…)`)."""
    wanted = rule.spec.get("feeds")
    return not wanted or consumer in wanted


_XARGS_VALUES = frozenset(("-n", "-I", "-i", "-P", "-L", "-l", "-d", "-s", "-E", "-a"))


def _consumer(cmd: SimpleCommand, pack: EntityPack, verbs: Verbs) -> str | None:
    """The program a piped command is (`| xargs kill -9`: kill)."""
    argv = _words(cmd, pack, verbs)
    if argv[:1] == ["xargs"]:
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            i += 2 if argv[i] in _XARGS_VALUES else 1
        argv = argv[i:]
    return posixpath.basename(argv[0]) if argv else None


def _substituted(cmd: SimpleCommand) -> Iterator[SimpleCommand]:
    """The commands inside a word substituted by their output: `$(lsof -t -i:8000)`."""
    for word in cmd.argv:
        if word.startswith("$(") and word.endswith(")") and "$(" not in word[2:]:
            yield from split_commands(word[2:-1])
        elif len(word) > 2 and word[0] == word[-1] == "`":
            yield from split_commands(word[1:-1])


def program_of(command: str, pack: EntityPack, verbs: Verbs) -> str:
    """The program a remembered command line runs (`nohup python3 -m http.server`: python)."""
    cmds = split_commands(command[:MAX_BY_CHARS])
    argv = _words(cmds[0], pack, verbs) if cmds else []
    return argv[0] if argv else ""


def _servers(
    pack: EntityPack, output: str, command: str, background: bool, jobs: list[str]
) -> Iterator[Made]:
    """Each background job: its printed PID, the port its banner (or else its command) names.
    Several put in the background on one line (`a & b &`: `[1] 9101`, `[2] 9102`) are each
    their own, in order, the port its own command names (a banner could be either's)."""
    if background and len(jobs) > 1:
        pids = list(pack.background_pid.finditer(output[:2_000]))[: len(jobs)]
        if len(pids) == len(jobs):
            for job, printed in zip(jobs, pids, strict=True):
                yield from _server(pack, "", command, printed, job)
            return
    job = jobs[0] if jobs else ""
    pid_m = pack.background_pid.search(output[:2_000]) if background else None
    yield from _server(pack, output, command, pid_m, job)


def _server(
    pack: EntityPack, output: str, command: str, pid_m: re.Match[str] | None, job: str
) -> Iterator[Made]:
    port = None
    for rule in pack.outputs if output else ():
        if rule.kind == "process":
            m = rule.regex.search(output[:MAX_SCAN])
            if m:
                port = m.group("port")
                break
    pid = (pid_m.group("pid") or pid_m.groupdict().get("moved")) if pid_m else None
    if port is None and pid is None:
        return
    if port is None:  # no banner (sent to a file): the port its command line names, if any
        named = pack.command_port.search((job or command)[:MAX_SCAN])
        port = named.group("port") if named else None
    number = pid_m.groupdict().get("job") if pid_m else None  # `[1] 4242`: `kill %1` ends it
    spec = f"%{number}" if number else None
    attrs = tuple((k, v) for k, v in (("pid", pid), ("port", port), ("jobspec", spec)) if v)
    if port:
        attrs += (("url", f"http://localhost:{port}"),)
    rel = (("serves", f"port:{port}"),) if port else ()
    name = clip(job) if job else clip(command)
    yield Made("process", pid or f":{port}", "create", name, attrs, rel, clip(command))


def command_entities(
    pack: EntityPack,
    verbs: Verbs,
    command: str,
    output: str,
    cwd: str | None,
    scripts: Mapping[str, Sequence[Statement]],
    written: Sequence[str] = (),
    running: bool = False,
    detached: bool = False,
    head: Head | None = None,
) -> CommandFacts:
    """What ``command`` made beyond files. ``written``: files it wrote (SQL in its text is then
    a script's content, not run); ``running``: the call is still running (a server's banner
    then makes a process even in the foreground); ``detached``: the tool ran it in the
    background (Gemini CLI's ``is_background``), as ``&`` would. ``head``: the git branch
    checked out before it ran."""
    facts = CommandFacts(head=head)
    git: GitHead | None = None  # read once a git command is met
    tokens = tokenize(command[:MAX_SCAN])
    ops = [v for k, v in tokens if k == "op"]
    background = "&" in ops or detached
    programs: list[str] = []
    here = cwd
    cmds = split_commands(command[:MAX_SCAN])
    # the commands put in the background: each before `&` (the next one's connector; the last
    # one's when the line ends with it), else the last
    ends = "&" if tokens and tokens[-1] == ("op", "&") else ""
    after = [c.connector for c in cmds[1:]] + [ends]
    jobs = [" ".join(c.argv) for c, nxt in zip(cmds, after, strict=True) if nxt == "&"]
    job = jobs[0] if jobs else (" ".join(cmds[-1].argv) if cmds else "")
    namespaces: set[str | None] = set()  # those the Kubernetes commands named
    database: str | None = None  # the one the SQL client connected to
    for i, cmd in enumerate(cmds):
        argv = _words(cmd, pack, verbs)
        if not argv:
            continue
        programs.append(argv[0])
        if argv[0] == "cd" and len(argv) > 1 and "$" not in argv[1]:
            here = resolve_path(argv[1], here)
            continue
        piped = cmds[i + 1] if i + 1 < len(cmds) and cmds[i + 1].connector == "|" else None
        feeds = _consumer(piped, pack, verbs) if piped is not None else None
        where = here  # the folder this command runs in (`git -C app …`: app)
        if argv[0] == "git":
            argv, where = without_globals(argv, here)
            git = GitHead(head, output[:MAX_SCAN]) if git is None else git
        start = len(facts.made)
        for rule in pack.by_program.get(argv[0], ()):
            if _matches(rule, argv) and _fed(rule, feeds):
                facts.made.extend(_apply_rule(rule, argv, output, where, pack, git))
        if argv[0] in NAMESPACED_PROGRAMS:  # `kubectl -n qa create …`: made in namespace qa
            namespace = namespace_of(without_prefixes(cmd.argv, verbs.prefixes, verbs.keywords))
            namespaces.add(namespace)
            facts.made[start:] = placed(facts.made[start:], _in("namespace", namespace), None)
        database = database or client_database(argv)
        if argv[0] == REDIS_CLI:
            facts.made.extend(redis_made(argv, output, clip(" ".join(argv))))
        if git is not None:
            git.step(argv, where)
        for inner in _substituted(cmd):  # `kill $(lsof -t -i:8000)`: what lsof prints is killed
            inner_argv = _words(inner, pack, verbs)
            for rule in pack.by_program.get(inner_argv[0], ()) if inner_argv else ():
                if rule.spec.get("feeds") and _matches(rule, inner_argv) and _fed(rule, argv[0]):
                    facts.made.extend(_apply_rule(rule, inner_argv, "", here, pack))
        ran = [resolve_path(w, here) for w in argv[1:] if not w.startswith("-")]
        ran += [resolve_path(t, here) for op, t in cmd.redirects if op == "<"]
        for path in ran:
            if path in scripts:
                facts.made.extend(script_made(scripts[path], path, clip(" ".join(argv))))
    by = clip(command)
    if any(p in pack.sql_clients for p in programs):
        facts.made.extend(sql_made(pack, command, output, by, None, database))
    elif written:
        found = script_statements(pack, command)
        if found:
            facts.scripts[written[-1]] = found
    run_programs = set(programs)
    for printed in pack.outputs:
        wanted = set(printed.spec.get("programs") or ())
        if printed.kind == "process" or not run_programs & wanted:
            continue
        named = printed.command.search(command[:MAX_SCAN]) if printed.command else None
        if printed.command is not None and named is None:
            continue
        for m in printed.regex.finditer(output[:MAX_SCAN]):
            g = m.groupdict()
            if named is not None:  # `db.customers.insertOne(…)`: a customer
                g["kind"] = singular(named.group("kind").lower())
            kind = pack.resource_kinds.get(g.get("kind") or "", printed.kind)
            kind = g["kind"] if named is not None else kind
            if printed.spec.get("kind_group") and kind == printed.kind:
                continue  # a word kubectl prints that names no kind we know
            made = Made(kind, g["id"], printed.action, g["id"], (), (), by)
            # `kubectl apply -n qa -f k8s/`: what it printed it made is in qa
            one = next(iter(namespaces)) if len(namespaces) == 1 else None
            facts.made.extend(placed([made], _in("namespace", one), None))
    if pack.job_ended is not None and "]" in output:
        # the shell's notice of a job's end (`[1]+  Exit 1  node server.js`, from `jobs` or
        # before a later command's output): the job `kill %1` would have ended, ended
        for m in pack.job_ended.finditer(output[:MAX_SCAN]):
            facts.made.append(Made("process", f"%{m.group('job')}", "delete", "", (), (), by))
    if "crontab" in programs:  # `(crontab -l; echo '0 3 * * * …') | crontab -`
        facts.made.extend(cron_jobs(cmds, by, verbs.prefixes))
    if background or running:
        facts.made.extend(_servers(pack, output, command, background, jobs or [job]))
    if git is not None:
        facts.head = git.finished()
    elif head is not None and switched_elsewhere(output[:MAX_SCAN]):
        facts.head = None  # ``gh pr checkout 42``: checked out, by no git command
    return facts
