"""track_entities: remembers, per session, which files and folders the agent created, deleted,
copied, moved, modified, read and opened, from tool calls whose results show success.

Shell-like tools (names in the ``tools`` pack) are parsed by ``rules.activity.shell_parse`` (in
the call's ``workdir`` when it names one), ``apply_patch`` by its file headers
(``rules.activity.agent_tools``); file tools are recognised by their argument schema
(``rules.activity.file_tools``). A result flagged ``is_error`` is a failure. Each call is
read once: only calls after the newest one already read are new
(``rules.activity.observations.high_water``), so an event keeps the time it was first seen,
however long the history, and the memory outlives the agent's own truncation of its history.
Events live in state namespace ``entities`` (oldest first, newest last; see
``rules.entities.cache``); the working directory and the keys of calls already read live in
``track_entities``. Optionally restores the history of stateless clients
(``rules.entities.history_restore``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field, field_validator

from rules import abandon
from rules.activity.entity_pack import load_entity_pack
from rules.activity.file_tools import (
    call_effects,
    call_succeeded,
    cwd_hint,
    effects_before_failure,
    load_tools,
)
from rules.activity.harness_cwd import harness_cwd
from rules.activity.observations import exit_code, high_water, load_arguments
from rules.activity.shell_parse import load_verbs
from rules.activity.storable import MAX_PATH_CHARS, storable, stored_id
from rules.base import Context, RuleConfig, RuleResult, SessionState
from rules.entities import cache as entity_cache
from rules.entities import forgotten, history_restore, parallel_calls, unknown_made
from rules.entities.folder_ends import FolderEnds
from rules.entities.known_paths import KnownPaths
from rules.entities.seen_calls import SeenCalls
from rules.entities.track_made import MadeTracker
from rules.messages import (
    PLACEHOLDER_PREFIX,
    call_arguments_text,
    call_id,
    call_name,
    text_of,
    tool_pairs,
)
from rules.redact import holds_secret
from rules.report import MAX_REPORTED_ENTITIES, Entity, Report
from rules.tool_pairs import pairs_of
from rules.workspace.observe import KnownTypes
from rules.workspace.workspace_map import NAMESPACE as WORKSPACE

META = "track_entities"
MAX_PENDING = 100  # keys of calls seen unanswered, read once their result arrives
READ_MEMO = "entities_read"  # ``Context.recall`` name: a list, a meta it left as it was, unread


class Config(RuleConfig):
    max_entities: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description=(
            "newest N events of each kind (files, folders, branches, processes …) remembered"
            " per session, 8 N in all"
        ),
    )
    ttl_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="events older than this (from first seen) are forgotten (the count bounds "
        "the memory; this, how long ago \"the folder you just created\" may have been made)",
    )
    persist_cwd: bool = Field(
        default=True,
        description="a `cd` carries over to later calls (agents with a persistent shell)",
    )
    max_seen_calls: int = Field(
        default=5_000,
        ge=10,
        le=20_000,
        description="keys of the newest calls read, to find where the previous request stopped "
        "(older calls are never read again)",
    )
    # validated (loaded) even when left empty
    extra_packs: tuple[str, ...] = Field(
        default=(),
        validate_default=True,
        description="your own YAML packs (`tools:` / `shell_verbs:` sections), loaded at start-up",
    )
    restore_history: bool = Field(
        default=False,
        description="a client sending only its newest message gets the session's stored turns "
        "back (also set by `memory.restore_history`)",
    )
    restore_max_messages: int = Field(
        default=60, ge=1, description="bound of the stored history, in messages"
    )
    restore_max_chars: int = Field(
        default=200_000,
        ge=1_000,
        description="bound of the stored history, in serialised characters",
    )

    @field_validator("extra_packs")
    @classmethod
    def _load_packs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        load_tools(value)  # at start-up: a bad pack file fails here, not per request
        load_verbs(value)
        load_entity_pack(value)
        return value


def call_key(call: dict[str, Any]) -> str:
    """Identifies a call across requests; the arguments count too (some agents reuse ids).
    At most ``MAX_ID_CHARS`` + 13 characters, whatever the id's length (``stored_id``)."""
    text = call_arguments_text(call).encode("utf-8", "surrogatepass")  # lone surrogates too
    digest = hashlib.blake2b(text, digest_size=6).hexdigest()
    return f"{stored_id(call_id(call))}:{digest}"


def apply(ctx: Context, cfg: Config) -> RuleResult:
    messages, state = ctx.messages, ctx.state
    report: Report = {}
    if cfg.restore_history:
        restored = history_restore.restore(messages, state.get(history_restore.NAMESPACE) or [])
        if restored is not None:
            report["history_restored"] = len(restored) - len(messages)
            messages = restored
        remembered = history_restore.remember(
            messages, cfg.restore_max_messages, cfg.restore_max_chars
        )
        if remembered != state.get(history_restore.NAMESPACE):
            state = state.with_value(history_restore.NAMESPACE, remembered)

    meta = state.get(META) or {}
    stored = state.get(entity_cache.NAMESPACE) or []
    events = entity_cache.fresh(stored, ctx.now, cfg.ttl_seconds)
    forgot = recorded = forgotten.recorded(meta)
    if len(events) != len(stored):  # past their time: "the first branch" is no longer known
        forgot |= forgotten.dropped(stored, events)
    # the very messages that left this meta as it was with no call to read: none to read again,
    # only the events past their time to forget
    if messages is ctx.messages and ctx.recall(READ_MEMO, (meta, cfg))[0]:
        report["entities"] = []
        state = _with_events(state, events, stored)
        if forgot != recorded:
            state = state.with_value(META, {**meta, forgotten.KEY: sorted(forgot)})
        return RuleResult(messages, state, report)
    tools, verbs = load_tools(cfg.extra_packs), load_verbs(cfg.extra_packs)
    made = MadeTracker(load_entity_pack(cfg.extra_packs), tools, verbs)
    pending: list[str] = list(meta.get("pending") or [])
    # where no ``cd`` set one, the folder the harness says the agent works in
    cwd: str | None = meta.get("cwd") or harness_cwd(messages)
    seq: int = int(meta.get("seq") or 0)
    unknown: Sequence[unknown_made.Marker] = unknown_made.markers(meta)
    known: dict[str, str] | None = None  # what exists now, once a call is read
    exists = KnownPaths({}, {})  # and what the workspace map listed (``known_paths``)
    workspace = state.get(WORKSPACE) or {}
    made.load(meta.get("scripts"), events, meta.get("head"))
    new_events: list[dict[str, Any]] = []
    # Only calls after the newest one already read, however long the history (a call read long
    # ago is never read again with a new first_seen), plus earlier ones unanswered back then.
    pairs = (
        pairs_of(ctx)  # shared with the observations of later rules
        if messages is ctx.messages
        else tool_pairs(messages)
    )
    calls = SeenCalls(ctx.memo, meta.get("seen"), cfg.max_seen_calls)
    seen = calls.keys
    start = high_water(len(pairs), lambda i: call_key(pairs[i][1]), seen)
    todo = [p for p in pairs[:start] if call_key(p[1]) in pending] if pending else []
    read = 0  # calls read, and answers waited for
    batches: list[tuple[int, str | None]] = []  # each call read: events before it, its batch
    batch_at: dict[int, str | None] = {}  # a message's batch, made once for all its calls
    for index, call, answer in [*todo, *pairs[start:]]:
        abandon.check()
        key = call_key(call)
        if key in seen:
            continue
        read += 1
        if index not in batch_at:
            batch_at[index] = parallel_calls.batch_of(messages[index], index)
        batches.append((len(new_events), batch_at[index]))
        if known is None:
            known = entity_cache.known_types(events)
            exists = KnownPaths(known, KnownTypes(workspace.get("nodes") or {}))
        result = "" if answer is None else text_of(messages[answer].get("content"))
        if answer is None or result.startswith(PLACEHOLDER_PREFIX):
            # unanswered, or a result the proxy wrote for an interrupted call: read once answered
            if key not in pending:
                pending.append(key)
            continue
        if key in pending:
            pending.remove(key)
        calls.add(key)
        name, args = call_name(call), load_arguments(call_arguments_text(call))
        is_error = messages[answer].get("is_error") is True  # Anthropic's tool_result flag
        job_made = made.of_job_call(name, args, result, is_error)
        if job_made is not None:  # a detached job: its start, its output, its end
            for m in job_made:
                seq += 1
                new_events.append(
                    entity_cache.made_event(m, ctx.now, stored_id(call_id(call)), seq, name)
                )
            continue
        if not call_succeeded(tools, name, args, result, is_error):
            # a server still running when the call returned did start (its banner says so)
            running = made.still_running(name, args, result, cwd, is_error)
            for m in running:
                seq += 1
                new_events.append(
                    entity_cache.made_event(m, ctx.now, stored_id(call_id(call)), seq, name)
                )
            tried = [] if running else made.tried(name, args, result, cwd)
            if tried:  # "the container you just started" is not one started before it
                unknown, seq = unknown_made.remember(
                    unknown, tried, seq, ctx.now, stored_id(call_id(call))
                )
            # `mkdir dist && npm run build` failing in the build still made dist; only a line
            # the shell ran and ended (an exit code shown: not one the user rejected)
            code = exit_code(result)
            if code is None or code <= 0:
                continue
            effects = effects_before_failure(tools, verbs, name, args, result, cwd, exists)
            if not effects:
                continue
        else:
            before, shell_named = cwd, list[tuple[str, str | None]]()
            effects, cwd = call_effects(
                tools, verbs, name, args, result, cwd, exists, cfg.persist_cwd, shell_named
            )
            if shell_named:  # made, but named only by the shell: "just created" may mean it
                unknown, seq = unknown_made.remember(
                    unknown, shell_named, seq, ctx.now, stored_id(call_id(call))
                )
            for m in made.of_call(name, args, result, before, effects, call_id(call)):
                seq += 1
                new_events.append(
                    entity_cache.made_event(m, ctx.now, stored_id(call_id(call)), seq, name)
                )
        cwd = cwd_hint(tools, result) or cwd
        if cwd is not None and len(cwd) > MAX_PATH_CHARS:  # not a directory one can be in
            cwd = None
        ends, now_known = FolderEnds(), known if known is not None else {}
        # lazily: a folder's contents are what is known once the effects before it are noted
        for effect in (e for own in effects for e in (own, *ends.inside(own, now_known))):
            if _unkept(effect.path) or (effect.source and _unkept(effect.source)):
                # a path holding a key is never remembered: stored redacted it would make a
                # pointer to a path that does not exist, and a wrong pointer is worse than none
                # (nor is one longer than a path can be: the state stays bounded)
                continue
            seq += 1
            event = entity_cache.make_event(effect, ctx.now, stored_id(call_id(call)), seq, name)
            new_events.append(event)
            entity_cache.note(now_known, event)  # the newest event: known stays current, linearly
            exists.noted(event)

    if new_events:
        parallel_calls.mark(new_events, batches)
        new_events = storable(new_events)  # lone surrogates in paths: the state must store
        remembered = entity_cache.add(events, new_events, cfg.max_entities)
        if len(remembered) < len(events) + len(new_events):  # past the count kept, or repeats
            forgot |= forgotten.dropped([*events, *new_events], remembered)
        events = remembered
    if made.learned:  # a detached job's port, shown after the call that started it
        events = storable(made.updated(events))
    state = _with_events(state, events, stored)
    kept = calls.kept_list()
    new_meta: dict[str, Any] = {"cwd": cwd, "seq": seq, "seen": kept}
    if made.scripts:
        new_meta["scripts"] = made.scripts
    if made.head is not None:
        new_meta["head"] = list(made.head)
    if unknown:
        new_meta[unknown_made.KEY] = unknown
    if forgot:
        new_meta[forgotten.KEY] = sorted(forgot)
    if pending:
        new_meta["pending"] = pending[-MAX_PENDING:]
    if not calls.storable_as_is({k: v for k, v in new_meta.items() if k != "seen"}):
        new_meta = storable(new_meta)
    as_is = new_meta["seen"] is kept  # no lone surrogate replaced: the set is the list's
    if new_meta != meta:
        state = state.with_value(META, new_meta)
        if as_is:
            calls.keep(kept)
    else:
        if as_is:
            calls.keep(meta.get("seen"))  # the state keeps its list: the same keys
        if not read and messages is ctx.messages:
            ctx.keep(READ_MEMO, (meta, cfg), True)
    report["entities"] = [_reported(e) for e in new_events[:MAX_REPORTED_ENTITIES]]
    if len(new_events) > MAX_REPORTED_ENTITIES:  # the row is redacted, stored and shown whole
        report["entities_more"] = len(new_events) - MAX_REPORTED_ENTITIES
    return RuleResult(messages, state, report)


def _with_events(state: SessionState, events: list[Any], stored: Any) -> SessionState:
    """``state`` holding ``events`` (and their summary) where they are not ``stored``."""
    if events == stored:
        return state
    state = state.with_value(entity_cache.NAMESPACE, events)
    held = entity_cache.summary(events)
    if held != (state.get(entity_cache.SUMMARY) or entity_cache.EMPTY_SUMMARY):
        state = state.with_value(entity_cache.SUMMARY, held)
    return state


def _unkept(path: str) -> bool:
    """A path never remembered: one holding a secret, or longer than any file system takes."""
    return len(path) > MAX_PATH_CHARS or holds_secret(path)


def _reported(event: entity_cache.Event) -> Entity:
    """A new event as the report shows it (``entity_cache.make_event`` set every key read here;
    its time, sequence number and tool are left out)."""
    entity: Entity = {
        "type": event["type"],
        "name": event["name"],
        "path": event["path"],
        "action": event["action"],
        "call_id": event["call_id"],
    }
    if "from" in event:
        entity["from"] = event["from"]
    return entity
