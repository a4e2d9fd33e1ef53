"""resolve_refs: turns vague references in the latest user message ("the folder I just created",
"that file", "删除刚创建的文件夹", "방금 만든 폴더", "さっき作ったフォルダ") into semantic pointers:
``{mention, entity: {type, name, path, action}, confidence, chain}``, reported under
``references`` for ``inject`` to render. It never edits messages.

Resolution: the session's recent entities (``track_entities``), made before that user message,
filtered by the mention's type and action, newest first; a sub-agent falls back to up to 3
ancestor sessions (``X-Parent-Session-Id``), nearest first, and ``chain`` lists the sessions
walked. Below ``threshold``, or when two entities fit equally well (same call), it abstains: the
report says why (with the candidates) and the text stands. An abstention can be settled by the
optional resolver model: the proxy asks it and re-runs the pipeline with its picks in
``ctx.hints["resolver"]`` (mention -> {path, confidence, model}); a pick counts only when it names
one of the candidates and clears the threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from rules.base import Context, Message, RuleConfig, RuleResult
from rules.entities import cache as entity_cache
from rules.entities.ref_detect import Mention, detect, load_lexicons, strip_injected
from rules.messages import PLACEHOLDER_PREFIX, call_id, role, text_of, tool_calls
from rules.report import ChainStep, EntityRef, Reference
from rules.text_cache import text_cache

# The entities a search may pick from: (session id, depth up the ancestors, its events).
Pool = tuple[str, int, Sequence[Mapping[str, Any]]]


class Config(RuleConfig):
    threshold: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="below it (or when two entities fit equally) abstain: the text stands",
    )
    ttl_seconds: float = Field(
        default=300.0, gt=0, description="entities older than this are not candidates"
    )
    languages: tuple[str, ...] = Field(
        default=("en", "zh", "ko", "ja"), description="languages whose references are detected"
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


def _candidates(mention: Mention, events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Events that fit the mention, newest first, one per path. Without an action word only
    things that still exist fit ("delete it" cannot mean a folder already deleted)."""
    hits = entity_cache.query(events, type=mention.type, action=mention.action)
    if mention.action is None:
        alive = entity_cache.known_types(events)
        hits = [e for e in hits if e["path"] in alive]
    out, paths = [], set()
    for e in hits:
        if e["path"] not in paths:
            paths.add(e["path"])
            out.append(e)
    return out


def _entity_ref(event: Mapping[str, Any]) -> EntityRef:
    return {
        "type": event["type"],
        "name": event["name"],
        "path": event["path"],
        "action": event["action"],
    }


def resolve(mention: Mention, pools: Sequence[Pool], cfg: Config) -> Reference:
    chain: list[ChainStep] = []
    ref: Reference = {"mention": mention.text, "lang": mention.lang, "kind": mention.kind}
    for session, depth, events in pools:
        cands = _candidates(mention, events)
        chain.append({"session": session, "depth": depth, "candidates": len(cands)})
        if not cands:
            continue
        top = cands[0]
        confidence = mention.base - cfg.ancestor_penalty * depth
        if mention.action is None and not mention.recency:
            confidence -= cfg.crowd_penalty * (len(cands) - 1)
        ties = [
            c
            for c in cands[1:]
            if c.get("call_id") == top.get("call_id")
            and c.get("first_seen") == top.get("first_seen")
        ]
        ref["confidence"] = round(max(confidence, 0.0), 3)
        ref["chain"] = chain
        if ties:
            ref["entity"] = None
            ref["abstained"] = "ambiguous"
            ref["candidates"] = [c["path"] for c in [top, *ties]][:5]
        elif confidence < cfg.threshold:
            ref["entity"] = None
            ref["abstained"] = "low_confidence"
            ref["candidates"] = [c["path"] for c in cands][:5]
        else:
            ref["entity"] = _entity_ref(top)
            ref["call_id"] = top.get("call_id")
        return ref
    ref["entity"] = None
    ref["confidence"] = 0.0
    ref["chain"] = chain
    ref["abstained"] = "no_candidate"
    return ref


def _latest_user_text(messages: Sequence[Message]) -> tuple[int, str] | None:
    """The latest message the user wrote, and its text: text the proxy wrote is skipped (an orphan
    result turned into a user message starts with PLACEHOLDER_PREFIX; an injected block alone)."""
    for i in range(len(messages) - 1, -1, -1):
        if role(messages[i]) == "user":
            text = text_of(messages[i].get("content"))
            own = strip_injected(text).strip()
            if own and not own.startswith(PLACEHOLDER_PREFIX):
                return i, text
    return None


@text_cache(max_chars=4_000_000)
def _mentions(
    text: str, extra_packs: tuple[str, ...], languages: tuple[str, ...], threshold: float
) -> tuple[Mention, ...]:
    """Memoised: an agent's tool loop sends the same latest user message many times. Kinds whose
    base confidence is below the threshold (a bare "it") could never resolve: left out."""
    kinds, lexicons = load_lexicons(extra_packs)
    return tuple(m for m in detect(text, kinds, lexicons, languages) if m.base >= threshold)


def apply(ctx: Context, cfg: Config) -> RuleResult:
    found_user = _latest_user_text(ctx.messages)
    if found_user is None:
        return RuleResult.unchanged(ctx)
    idx, text = found_user
    if len(text) > cfg.max_scan_chars:
        half = cfg.max_scan_chars // 2
        text = text[:half] + "\n" + text[-half:]
    found = _mentions(text, cfg.extra_packs, cfg.languages, cfg.threshold)
    mentions = found[: cfg.max_mentions]
    if not mentions:
        return RuleResult.unchanged(ctx)
    # Only what existed when the user wrote: calls made after the message cannot be meant.
    later = {call_id(c) for m in ctx.messages[idx + 1 :] for c in tool_calls(m)}
    own = entity_cache.fresh(ctx.state.get(entity_cache.NAMESPACE) or [], ctx.now, cfg.ttl_seconds)
    pools: list[Pool] = [(ctx.session_id, 0, [e for e in own if e.get("call_id") not in later])]
    if cfg.use_ancestors:
        for anc in ctx.ancestors:
            if anc.depth <= cfg.max_ancestor_depth:
                events = anc.state.get(entity_cache.NAMESPACE) or []
                pools.append(
                    (
                        anc.session_id,
                        anc.depth,
                        entity_cache.fresh(events, ctx.now, cfg.ttl_seconds),
                    )
                )
    refs = [resolve(m, pools, cfg) for m in mentions]
    picks = ctx.hints.get("resolver") or {}
    if picks:
        refs = [_settle(ref, picks.get(ref["mention"]), pools, cfg) for ref in refs]
    return RuleResult.unchanged(ctx, {"references": refs})


def _settle(
    ref: Reference, pick: Mapping[str, Any] | None, pools: Sequence[Pool], cfg: Config
) -> Reference:
    """An abstention settled by the resolver model's pick, if the pick is one of its candidates."""
    if ref.get("entity") is not None or not isinstance(pick, Mapping):
        return ref
    path, confidence = pick.get("path"), pick.get("confidence")
    if path not in ref.get("candidates", ()) or not isinstance(confidence, (int, float)):
        return ref
    if confidence < cfg.threshold:
        return ref
    for session, depth, events in pools:
        for e in entity_cache.query(events):
            if e["path"] == path:
                chain: list[ChainStep] = [
                    *ref["chain"],
                    {"resolver": pick.get("model"), "session": session, "depth": depth},
                ]
                settled = ref.copy()  # keys in the same order, less the abstention's
                settled.pop("abstained", None)
                settled.pop("candidates", None)
                settled["entity"] = _entity_ref(e)
                settled["call_id"] = e.get("call_id")
                settled["confidence"] = round(float(confidence), 3)
                settled["chain"] = chain
                settled["resolved_by"] = "resolver_model"
                return settled
    return ref
