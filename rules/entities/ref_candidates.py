"""Which remembered entities fit a mention: its kind (the noun's, or the kinds its verb takes),
its verb against what was done to them, whether they still exist, and the words before its
noun. Used by ``ref_resolve`` and ``ref_relations``; pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rules.entities import cache as entity_cache
from rules.entities.process_roles import servers
from rules.entities.ref_by import made_by
from rules.entities.ref_detect import Mention
from rules.entities.whole_words import holds_word


def kind_mismatch(mention: Mention) -> bool:
    """The noun names a kind its verb does not take ("push the file"): never resolved."""
    return bool(mention.type and mention.kinds and mention.type not in mention.kinds)


def _fits(mention: Mention, actions: set[str], e: Mapping[str, Any]) -> bool:
    """Whether the mention's verb fits what was done to ``e``: file actions for files, the
    entity action groups for other kinds (the ticket you opened, the server you started)."""
    if mention.kinds and e.get("type") not in mention.kinds:
        return False
    if e.get("type") in mention.needs_noun:
        return False
    if entity_cache.is_file_kind(e.get("type")):
        return not actions or e.get("action") in actions
    if not mention.action or e.get("action") in mention.entity_actions:
        return True
    # "the service you started": `systemctl start`, `docker start` ran a thing that was there
    return mention.action == "start" and (e.get("attrs") or {}).get("state") == "running"


def _of_kind(e: Mapping[str, Any], ends: tuple[str, ...], paths: tuple[str, ...]) -> bool:
    """Whether a file has one of the extensions ``ends``, or its path holds one of ``paths``."""
    if str(e.get("name", "")).lower().endswith(ends):
        return True
    path = str(e.get("path", "")).lower()
    return any(word in path for word in paths)


def _order(e: Mapping[str, Any]) -> tuple[Any, Any]:
    return (e.get("first_seen", 0), e.get("seq", 0))


def _renames(events: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Old path or key -> the moves away from it (renames), oldest first."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for e in sorted(events, key=_order):
        if e.get("action") == "move" and isinstance(e.get("from"), str):
            out.setdefault(e["from"], []).append(e)
    return out


def _now_known_as(
    e: Mapping[str, Any], alive: Mapping[str, str], renames: Mapping[str, list[Mapping[str, Any]]]
) -> Mapping[str, Any] | None:
    """``e`` as it exists now: itself, or under the name later renames gave it ("the branch you
    made", renamed since, is the new branch); None when it is gone. Each step is a later move,
    so the walk ends (at most one step per move)."""
    path, when, last = e["path"], _order(e), None
    while path not in alive:
        nxt = next((m for m in renames.get(path, ()) if _order(m) > when), None)
        if nxt is None:
            return None
        path, when, last = nxt["path"], _order(nxt), nxt
    if last is None:
        return e
    now = {**e, "path": path, "name": last.get("name") or path}
    if "id" in e:  # beyond files: its new identifier, and the one it had
        now["id"] = last.get("id", path)
        now["attrs"] = {**(e.get("attrs") or {}), "was": e["id"]}
    return now


def candidates(mention: Mention, events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Events that fit the mention, newest first, one per path. Only things that still exist
    fit, unless the verb is about their end ("the folder you deleted"): "delete it" cannot mean
    a folder already deleted, nor "the branch you made" one deleted since. A word before the noun
    that some candidates' names hold ("the backup folder") keeps those only; a file name there
    ("the day-8.md file") keeps that file only, and a format ("the csv") or a kind of file ("the
    script", "the Dockerfile") files of that format or kind."""
    if kind_mismatch(mention):
        return []
    actions = set(mention.actions or ((mention.action,) if mention.action else ()))
    hits = [e for e in entity_cache.query(events, type=mention.type) if _fits(mention, actions, e)]
    if mention.type is None:  # "what we just removed": an end the command named, not implied
        hits = [e for e in hits if not (e.get("attrs") or {}).get("implied")]
    if hits and not actions & {"delete", "move"}:  # none fits: no need to know what exists
        alive = entity_cache.known_types(events)
        if not all(e["path"] in alive for e in hits):  # most often all do: no rename to follow
            renames = _renames(events)
            hits = [r for e in hits if (r := _now_known_as(e, alive, renames)) is not None]
    out, paths = [], set()
    for e in hits:
        if e["path"] not in paths:
            paths.add(e["path"])
            out.append(e)
    if mention.by is not None:  # "the folder created by npm install": what it made or none
        out = made_by(mention.by, out)
    if mention.how is not None:  # "the folder you just cloned": what `git clone` made or none
        out = [e for e in out if e.get("how") == mention.how]
    if mention.extensions or mention.paths:  # "the csv", "the script": files of that kind or none
        ends = tuple(f".{ext}" for ext in mention.extensions)
        # (a noun of two kinds, "the image": the other kind's entities, which have no extension)
        out = [
            e
            for e in out
            if _of_kind(e, ends, mention.paths)
            or (e.get("type") in mention.kinds and not entity_cache.is_file_kind(e.get("type")))
        ]
        if len({entity_cache.is_file_kind(e.get("type")) for e in out}) > 1:
            return []  # "the image you built", a container image and a picture made: not guessed
    if mention.sense == "copy":  # "the copy you made", "the backup": a copy, or a name saying so
        out = [e for e in out if e.get("action") == "copy" or _holds(e, _copy_named)]
    if mention.sense == "variable" and any(_code(e) for e in events):
        return []  # "the variable you set", where the session wrote code: a program's, maybe
    if mention.named:  # "the day-8.md file": that file or none
        hint = f"/{mention.hint}"
        return [e for e in out if f"/{e['path']}".lower().endswith(hint)]
    if mention.serving:  # "the server you started": not a worker started after it
        out = servers(out)
    if mention.verb == "stop" and (not mention.action or "create" in mention.entity_actions):
        # "stop the container you started": not one stopped since, when another still runs
        stopped = _stopped(events)
        out = [e for e in out if e["path"] not in stopped] or out
    if mention.hint:
        holding = [e for e in out if _holds(e, mention.hint)]
        if mention.hint in _PROJECT_WORDS and mention.type == "folder":
            # "the project folder you made": one a scaffolder or a clone made, or so named
            holding += [e for e in out if e.get("how") and e not in holding]
        # a word no candidate holds: what it names is none of them ("the logs folder" when the
        # agent made only "cache"), unless it describes rather than names ("the temp folder")
        describing = (
            mention.hint in _DESCRIBING
            and not (mention.type == "file" and mention.hint in _FILE_KIND_WORDS)
        ) or (mention.type == "process" and mention.hint in _SERVER_ROLES)
        out = holding if holding or not describing else out
    elif mention.detail:  # "the container running redis": those holding it, if any does
        detail = mention.detail  # whole ("pr" is not in "profile"; "q1" is in q1.md)
        out = [e for e in out if _holds(e, lambda t: holds_word(t, detail))] or out
    return out


# words before a noun that say what a thing is like, not what it is called
_DESCRIBING = frozenset(
    (
        "temp", "tmp", "temporary", "dev", "development", "local", "running", "live", "background",
        "foreground", "new", "old", "empty", "scratch", "throwaway", "default", "current", "test",
        "testing", "staging", "main", "primary", "spare", "extra", "other", "same", "first",
        "last", "previous", "big", "small", "large", "k8s", "kubernetes", "docker",
    )
)  # fmt: skip
# of a file, what kind it is ("the test file": one whose name says test, not any file made)
_FILE_KIND_WORDS = frozenset(("test", "testing"))
# what a server does, said of a process no name of which says it ("the API server you started":
# `uvicorn main:app`); a process it names ("the celery worker") is still kept alone
_SERVER_ROLES = frozenset(
    ("api", "backend", "frontend", "web", "app", "http", "rest", "graphql", "grpc", "mock",
     "proxy", "static", "file")
)  # fmt: skip


# a word before "folder" that names the folder a project is ("the project folder"): not a name
_PROJECT_WORDS = frozenset(
    ("project", "repo", "repository", "proyecto", "projet", "projekt", "progetto", "projeto",
     "proje")
)  # fmt: skip


# files that hold code: where one was written, a bare "variable" may be one of its own
_CODE = (".py", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".rb", ".go", ".rs", ".java",
         ".kt", ".php", ".sh", ".bash", ".zsh", ".lua", ".c", ".h", ".cpp", ".cs", ".swift",
         ".scala", ".r", ".pl", ".ex", ".exs", ".vue", ".svelte", ".ipynb")  # fmt: skip


def _code(e: Mapping[str, Any]) -> bool:
    written = e.get("type") == "file" and e.get("action") in ("create", "modify")
    return written and str(e.get("path", "")).lower().endswith(_CODE)


def _copy_named(text: str) -> bool:
    """Whether a name says it is a copy (``settings.py.bak``, ``db-backup.sql``, ``copy_of_x``)."""
    return any(holds_word(text, w) for w in ("bak", "backup", "copy", "orig", "old"))


def _stopped(events: Sequence[Mapping[str, Any]]) -> set[str]:
    """The paths whose newest event that says a state (``docker stop``: stopped, ``docker
    start``: running) says stopped."""
    state: dict[str, str] = {}
    for e in sorted(events, key=_order):
        said = (e.get("attrs") or {}).get("state")
        if isinstance(said, str):
            state[str(e.get("path"))] = said
    return {path for path, said in state.items() if said == "stopped"}


def _holds(e: Mapping[str, Any], found: str | Callable[[str], object]) -> bool:
    """Whether the event's name, path, command or attributes hold ``found`` ("the postgres
    container": its image): a part of a word, or what a whole-word search finds."""
    attrs = e.get("attrs") or {}
    texts = (
        str(t).lower() for t in (e.get("name"), e.get("path"), e.get("by"), *attrs.values()) if t
    )
    if isinstance(found, str):
        return any(found in t for t in texts)
    return any(found(t) for t in texts)
