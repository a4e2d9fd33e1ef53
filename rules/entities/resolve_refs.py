"""resolve_refs: turns vague references in the latest user message ("the folder I just created",
"that file", "删除刚创建的文件夹", "방금 만든 폴더", "さっき作ったフォルダ") into semantic pointers:
``{mention, entity, confidence, chain}``, reported under ``references`` for ``inject``; no edit.

Detection (``ref_detect``, from the grammar of the ``references`` pack), then resolution
(``ref_resolve``): the session's recent entities (``track_entities``), made before that user
message, filtered by the mention's type and verb, newest first; a sub-agent falls back to up to 3
ancestor sessions (``X-Parent-Session-Id``), nearest first, and searches them first when the
mention names another actor ("the config the lead agent set up"); ``chain`` lists the sessions
walked. Below ``threshold``, or when two entities fit equally well (same call), it abstains: the
report says why (with the candidates) and the text stands. An abstention can be settled by the
optional resolver model: the proxy asks it and re-runs the pipeline with its picks in
``ctx.hints["resolver"]`` (mention -> {path, confidence, model}); a pick counts only when it names
one of the candidates and clears the threshold. It may also write the description of a pointer
resolved through a parent session (``ctx.hints["resolver_descriptions"]``: mention ->
{description, model}); the identifier stays the rule's.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import Field, field_validator

from rules.activity.storable import stored_id
from rules.base import Context, ListMemo, Message, RuleConfig, RuleResult
from rules.entities import cache as entity_cache
from rules.entities import forgotten, ref_memo, unknown_made
from rules.entities.order_unread import order_unread
from rules.entities.ref_detect import (
    Mention,
    Prepared,
    finish,
    load_lexicons,
    merge,
    prepare,
    scan_prepared,
    strip_injected,
    wanted,
)
from rules.entities.ref_ends import ends_of, with_ends
from rules.entities.ref_pointer import with_model_description
from rules.entities.ref_resolve import Pool, pools_for, resolve, settle
from rules.entities.ref_scan import Wanted
from rules.entities.ref_since import since_ended
from rules.entities.ruled_out import ruled_out
from rules.entities.scan_key import held_sorts, scan_key
from rules.entities.several import several
from rules.entities.too_recent import too_recent
from rules.entities.track_entities import META as TRACK_META
from rules.entities.user_made import said_own, user_made
from rules.memo_scope import memo_scope
from rules.messages import (
    HARNESS_TURNS,
    INJECT_OPEN,
    PLACEHOLDER_PREFIX,
    call_id,
    last_of_role,
    last_where,
    text_of,
    tool_calls,
)
from rules.text_cache import text_cache

# Entries each text memo below keeps: a question is scanned once per layer and kept with its
# session (``ref_memo``); these serve a layer another session or a later request reads again.
# A table that stays this small is never copied whole as it grows (see ``text_cache``).
MEMO_ENTRIES = 256

NAMESPACE = "resolve_refs"  # state: the question being answered, and when it was first seen
LATEST_MEMO = "resolve_refs_latest"  # ``Context.memo`` name: the user's latest message, found
LAST_USER_MEMO = "resolve_refs_last_user"  # and the last user-role message
_FILES = ("file", "folder")


class Config(RuleConfig):
    threshold: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="below it (or when two entities fit equally) abstain: the text stands",
    )
    ttl_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="entities older than this are not candidates (an agent's task runs for "
        "tens of minutes: a server it started is still asked about)",
    )
    near_seconds: float = Field(
        default=300.0,
        gt=0,
        description='a mention whose candidates crowd it ("delete it", "that commit") means what '
        "was made this recently: among an hour's things it would guess",
    )
    languages: tuple[str, ...] = Field(
        default=("en", "zh", "ko", "ja", "es", "fr", "de", "pt", "ru", "it", "tr", "hi"),
        description="languages whose references are detected",
    )
    use_ancestors: bool = Field(
        default=True,
        description="sub-agents (`X-Parent-Session-Id`) resolve through their parents",
    )
    max_ancestor_depth: int = Field(
        default=3, ge=0, le=3, description="ancestor sessions searched at most"
    )
    ancestor_penalty: float = Field(
        default=0.05, ge=0, le=1, description="confidence lost per level up the chain"
    )
    crowd_penalty: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description='confidence lost per extra candidate of a bare "that file" (no action, '
        "no recency word)",
    )
    max_mentions: int = Field(default=5, ge=1, description="mentions taken per message at most")
    max_scan_chars: int = Field(
        default=8_000,
        ge=200,
        description="a longer message (a pasted log, a task statement) is read at its start "
        "and end only",
    )
    # validated (loaded) even when left empty
    extra_packs: tuple[str, ...] = Field(
        default=(),
        validate_default=True,
        description="your own YAML packs (`references:` sections), loaded at start-up",
    )

    @field_validator("extra_packs")
    @classmethod
    def _load_packs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        load_lexicons(value)  # at start-up: a bad lexicon fails here, not per request
        return value


def _users_own(message: Message) -> bool:
    if message.get("role") != "user":  # role(), inlined: most of the request is read
        return False
    text = text_of(message.get("content"))
    own = strip_injected(text) if INJECT_OPEN in text else text
    if not own or own.isspace():
        return False
    if own[0].isspace():  # rare: only then is a stripped copy made
        own = own.lstrip()
    # nor a turn the harness wrote (a compaction's summary retells the session's references)
    return not own.startswith((PLACEHOLDER_PREFIX, *HARNESS_TURNS))


# How far from the end the user's latest own message is looked for before the incremental search
# (``last_where``): agents whose tool results are user messages keep it near the end.
NEAR_END = 64


def latest_own(messages: Sequence[Message], memo: ListMemo, near: int | None) -> int | None:
    """The index of the user's latest own message: looked for from ``near``, the last user-role
    message (``last_of_role``), down to ``NEAR_END`` from the end first (a new question is the
    last message or near it: a walk of a few messages costs less than comparing the whole list
    with the session's last one), then by ``last_where`` (a long tool loop since, or results
    sent as user messages)."""
    if near is not None:
        for i in range(near, max(-1, len(messages) - 1 - NEAR_END), -1):
            if _users_own(messages[i]):
                return i
    return last_where(messages, _users_own, memo, LATEST_MEMO)


@text_cache(max_chars=2_000_000, max_entries=MEMO_ENTRIES)
def _clipped(text: str, limit: int) -> str:
    """A long message's start and end, the same string object while the message is cached: the
    memos below hash it, and a new copy of thousands of characters on every request of a tool
    loop would be hashed anew each time."""
    half = limit // 2
    return text[:half] + "\n" + text[-half:]


# The text last prepared: a question's two scan layers read it, and so does a session's later
# second layer (its first entity beyond files). One slot, swapped whole (safe across threads):
# a memo of every text would hold three times each, and filling it is what costs at a first scan.
# Whose request prepared it is part of the key: a hit on another tenant's text would be timed.
_last_prepared: tuple[str, str, tuple[str, ...], tuple[str, ...], Prepared] | None = None


def _prepared(text: str, extra_packs: tuple[str, ...], languages: tuple[str, ...]) -> Prepared:
    """The text as both layers of ``_scan`` read it, prepared once."""
    global _last_prepared
    last, scope = _last_prepared, memo_scope()
    if (
        last is not None
        and last[0] == scope
        and last[1] == text
        and last[2] == extra_packs
        and last[3] == languages
    ):
        return last[4]
    prep = prepare(text, load_lexicons(extra_packs)[1], languages)
    _last_prepared = (scope, text, extra_packs, languages, prep)
    return prep


def _scan_layer(
    text: str,
    extra_packs: tuple[str, ...],
    languages: tuple[str, ...],
    threshold: float,
    present: str | None,
) -> tuple[Mention, ...]:
    """One layer of mentions. ``present`` None: the patterns that need nothing; else only those
    needing what is present (a session's first commit scans its question again for these
    alone), with the object verbs of the kinds held (``scan_key``)."""
    kinds, _ = load_lexicons(extra_packs)
    prep = _prepared(text, extra_packs, languages)
    return tuple(scan_prepared(prep, kinds, threshold, _selection(present)))


# The first layer, memoised: an agent's tool loop sends the same latest user message many times,
# and a question read again with other sorts present reads the second layer alone. The second
# layer is kept by ``_mentions``' own memo, whose key holds ``present``.
_scan = text_cache(max_chars=4_000_000, max_entries=MEMO_ENTRIES)(_scan_layer)


@functools.lru_cache(maxsize=256)
def _selection(present: str | None) -> Wanted:
    """The patterns a layer runs (see ``_scan``), built once per key: the same object each time,
    so the patterns it selects are found by one lookup."""
    if present is None:
        return wanted(frozenset(), False)
    sorts, _, verbs = present.partition("#")
    return wanted(frozenset(sorts.split("|")), True, frozenset(verbs.split(",")) - {""})


@text_cache(max_chars=4_000_000, max_entries=MEMO_ENTRIES)
def _mentions(
    text: str,
    extra_packs: tuple[str, ...],
    languages: tuple[str, ...],
    threshold: float,
    present: str,
) -> tuple[Mention, ...]:
    """Kinds whose base confidence is below the threshold (a bare "it") could never resolve:
    left out."""
    kinds, lexicons = load_lexicons(extra_packs)
    layers = [_scan(text, extra_packs, languages, threshold, None)]
    if present:
        layers.append(_scan_layer(text, extra_packs, languages, threshold, present))
    found = finish(
        text, kinds, lexicons, merge(*layers), lambda: _prepared(text, extra_packs, languages)
    )
    return tuple(m for m in found if m.base >= threshold)


def _in_reach(verb_kinds: Sequence[str], held: set[str]) -> bool:
    """Whether a mention's verb takes a kind some session in reach holds ("stop it" with no
    process held: never resolved, so not reported, as when its verb is not looked for)."""
    return not verb_kinds or any(k in held or k in _FILES for k in verb_kinds)


def apply(ctx: Context, cfg: Config) -> RuleResult:
    # the last user-role message: compared with the question kept, else where a new question
    # is looked for first (a user-role message the proxy wrote is not the user's own)
    near = last_of_role(ctx.messages, "user", NEAR_END, ctx.memo, LAST_USER_MEMO)
    if near is None:  # none at all, so none of the user's own
        return RuleResult.unchanged(ctx)
    held = ctx.state.data.get(entity_cache.SUMMARY)
    if ref_memo.nothing_asked_again(ctx, cfg, held, near):
        return RuleResult.unchanged(ctx)  # most requests of a tool loop: nothing worked out
    if ctx.ancestors:
        kinds, present = held_sorts(ctx, cfg.use_ancestors)
    else:  # one session (most requests): its summary's sorts, kinds only when there is a mention
        kinds, present = None, entity_cache.joined_sorts(held)
    if present:
        present = scan_key(held, kinds, present, cfg.extra_packs)
    # a tool loop's next request: the question read last time, nothing read again
    summary = ref_memo.ANCESTRAL if ctx.ancestors else held  # ``present``'s source, kept
    seen = ref_memo.asked_again(ctx, cfg, present, near, summary)
    if seen is None:
        at = latest_own(ctx.messages, ctx.memo, near)
        if at is None:
            return RuleResult.unchanged(ctx)
        seen = ref_memo.asked_again(ctx, cfg, present, at, summary) or (at, "", None)
    idx, text, found = seen
    if found is None:  # a new question: read
        text = text_of(ctx.messages[idx].get("content"))
        if len(text) > cfg.max_scan_chars:
            text = _clipped(text, cfg.max_scan_chars)
        found = _mentions(text, cfg.extra_packs, cfg.languages, cfg.threshold, present)
        question = ref_memo.Question(ctx.messages[idx], text, cfg, present, found, summary)
        ref_memo.keep_question(ctx, question)
    if not found:
        return RuleResult.unchanged(ctx)
    if kinds is None:
        kinds = set((held or {}).get("kinds") or ())
    mentions = [
        m
        for m in found
        if (m.type is None or m.type in _FILES or m.type in kinds) and _in_reach(m.kinds, kinds)
    ]
    mentions = mentions[: cfg.max_mentions]
    if not mentions:
        return RuleResult.unchanged(ctx)
    stored = ctx.state.get(entity_cache.NAMESPACE) or []
    # When the question was first seen: an entity's age is told relative to it, so the block
    # says the same on every request of the agent's tool loop (its bytes stay cacheable).
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    key = f"{idx}:{digest}"
    asked = ctx.state.get(NAMESPACE) or {}
    seen_before = asked.get("text") == key and isinstance(asked.get("at"), (int, float))
    sources = [(ctx.session_id, 0, stored)]
    metas = [ctx.state.get(TRACK_META)]
    if cfg.use_ancestors:
        for anc in ctx.ancestors:
            if anc.depth <= cfg.max_ancestor_depth:
                found_events = anc.state.get(entity_cache.NAMESPACE) or []
                sources.append((anc.session_id, anc.depth, found_events))
                metas.append(anc.state.get(TRACK_META))
    # Seen before and nothing changed (the tool loop's next request): the answer already given.
    plain = not ctx.hints.get("resolver") and not ctx.hints.get("resolver_descriptions")
    if seen_before and plain:
        again = ref_memo.recall(ctx, key, float(asked["at"]), cfg, mentions, sources)
        if again is not None:
            again = since_ended(again, _after(stored, float(asked["at"]), None))
            return RuleResult(ctx.messages, ctx.state, {"references": again})
    fresh = [entity_cache.fresh(events, ctx.now, cfg.ttl_seconds) for *_, events in sources]
    events = fresh[0]
    # Only what existed when the user wrote: calls made after the message cannot be meant. Seen
    # before, the question's time says it (events first seen later came after it); at its first
    # sighting the calls after it in the request are read (a long tool loop: once per question).
    later: set[str] = set()
    if seen_before:
        asked_at, state = float(asked["at"]), ctx.state
        mine = [e for e in events if float(e.get("first_seen", 0)) <= asked_at]
    else:
        asked_at = ctx.now
        state = ctx.state.with_value(NAMESPACE, {"text": key, "at": ctx.now})
        later = {stored_id(call_id(c)) for m in ctx.messages[idx + 1 :] for c in tool_calls(m)}
        mine = [e for e in events if e.get("call_id") not in later]
    own: Pool = (ctx.session_id, 0, mine)
    ancestors: list[Pool] = []
    ends = ends_of(mine)  # what the nearer sessions ended: gone for the ancestors too
    for (session, depth, _), found in zip(sources[1:], fresh[1:], strict=True):
        ancestors.append((session, depth, with_ends(found, ends)))
        ends += ends_of(found)
    unnamed = unknown_made.in_reach(
        ctx, TRACK_META, cfg.ttl_seconds, cfg.use_ancestors, cfg.max_ancestor_depth,
        asked_at if seen_before else None, later,
    )  # fmt: skip
    forgot = {
        session: forgotten.of_session(meta, events_stored, kept)
        for (session, _, events_stored), kept, meta in zip(sources, fresh, metas, strict=True)
    }
    refs = [
        resolve(
            m,
            pools_for(m, own, ancestors, ctx.now, cfg.near_seconds),
            cfg,
            asked_at,
            unnamed,
            forgot,
        )
        for m in mentions
    ]
    # "…, not beta": beta is not meant; "… you created last week": what was made since is not
    # "… the one before the last": an order word not read as the mention's place
    # "… in my other terminal", "I created data/raw by hand": the user's making, said since
    # what a reference points at was made (read only for a mention of the speaker's)
    own_words = functools.partial(said_own, ctx.messages, idx)
    # "both branches you created", "…都删掉": several asked for, and a pointer names one
    refs = [
        several(
            user_made(
                order_unread(too_recent(ruled_out(r, text), text, m), text, m),
                text,
                m,
                own_words,
                mentions,
            ),
            text,
            m,
        )
        for r, m in zip(refs, mentions, strict=True)
    ]
    picks = ctx.hints.get("resolver") or {}
    if picks:
        pools = [own, *ancestors]
        refs = [settle(ref, picks.get(ref["mention"]), pools, cfg) for ref in refs]
    said = ctx.hints.get("resolver_descriptions") or {}
    if said:
        refs = [with_model_description(ref, said.get(ref["mention"])) for ref in refs]
    if seen_before and plain:
        windows = (cfg.ttl_seconds, cfg.near_seconds)
        searched = tuple(
            ref_memo.searched(
                session, depth, stored_events, ctx.now, windows, None if depth else asked_at
            )
            for session, depth, stored_events in sources
        )
        answer = ref_memo.Answer(
            key, asked_at, cfg, tuple(mentions), searched, windows, orjson.dumps(refs)
        )
        ref_memo.keep(ctx, answer)
    refs = since_ended(refs, _after(stored, asked_at, None if seen_before else later))
    return RuleResult(ctx.messages, state, {"references": refs})


def _after(events: Sequence[Any], asked_at: float, later: set[str] | None) -> list[Any]:
    """The session's events after the question: first seen after it, or (``later``: at its
    first sighting) made by the calls after it in the request."""
    if later is not None:
        return [e for e in events if e.get("call_id") in later]
    return [e for e in events if float(e.get("first_seen", 0)) > asked_at]
