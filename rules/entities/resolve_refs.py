"""resolve_refs: turns vague references in the latest user message ("the folder I just created",
"that file", "删除刚创建的文件夹", "방금 만든 폴더", "さっき作ったフォルダ") into semantic pointers:
``{mention, entity, confidence, chain}``, reported under ``references`` for ``inject``; no edit.

The user's latest own message (``ref_question``), its mentions detected once (``ref_read``;
``ref_detect``, from the grammar of the ``references`` pack), then resolution
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
from rules.base import Context, RuleConfig, RuleResult
from rules.entities import cache as entity_cache
from rules.entities import forgotten, ref_memo, unknown_made
from rules.entities.order_unread import order_unread
from rules.entities.ref_detect import load_lexicons
from rules.entities.ref_ends import ends_of, with_ends
from rules.entities.ref_pointer import with_model_description
from rules.entities.ref_question import NEAR_END, latest_own
from rules.entities.ref_read import _clipped, _mentions
from rules.entities.ref_resolve import Pool, pools_for, resolve, settle
from rules.entities.ref_since import since_ended
from rules.entities.ruled_out import ruled_out
from rules.entities.scan_key import held_sorts, scan_key
from rules.entities.several import several
from rules.entities.too_recent import too_recent
from rules.entities.track_entities import META as TRACK_META
from rules.entities.user_made import said_own, user_made
from rules.messages import call_id, last_of_role, text_of, tool_calls

NAMESPACE = "resolve_refs"  # state: the question being answered, and when it was first seen
LAST_USER_MEMO = "resolve_refs_last_user"  # ``Context.memo`` name: the last user-role message
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
