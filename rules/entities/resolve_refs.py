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
from rules.messages import PLACEHOLDER_PREFIX, call_id, text_of, tool_calls
from rules.text_cache import text_cache


class Config(RuleConfig):
    threshold: float = Field(default=0.6, ge=0, le=1)  # below it: abstain, the text stands
    ttl_seconds: float = Field(default=300.0, gt=0)  # entities older than this are not candidates
    languages: tuple[str, ...] = ("en", "zh", "ko", "ja")
    use_ancestors: bool = True
    max_ancestor_depth: int = Field(default=3, ge=0, le=3)
    ancestor_penalty: float = Field(default=0.05, ge=0, le=1)  # per level up the chain
    crowd_penalty: float = Field(default=0.1, ge=0, le=1)  # per extra candidate of a bare "that X"
    max_mentions: int = Field(default=5, ge=1)
    # A long message (a pasted log, a task statement) is read at its start and end only.
    max_scan_chars: int = Field(default=8_000, ge=200)
    # YAML files extending the references pack; validated (loaded) even when left empty
    extra_packs: tuple[str, ...] = Field(default=(), validate_default=True)

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


def resolve(
    mention: Mention, pools: Sequence[tuple[str, int, list[Mapping[str, Any]]]], cfg: Config
) -> dict[str, Any]:
    chain: list[dict[str, Any]] = []
    ref: dict[str, Any] = {"mention": mention.text, "lang": mention.lang, "kind": mention.kind}
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
        ref.update(confidence=round(max(confidence, 0.0), 3), chain=chain)
        if ties:
            ref.update(
                entity=None, abstained="ambiguous", candidates=[c["path"] for c in [top, *ties]][:5]
            )
        elif confidence < cfg.threshold:
            ref.update(
                entity=None, abstained="low_confidence", candidates=[c["path"] for c in cands][:5]
            )
        else:
            ref.update(
                entity={k: top[k] for k in ("type", "name", "path", "action")},
                call_id=top.get("call_id"),
            )
        return ref
    ref.update(entity=None, confidence=0.0, chain=chain, abstained="no_candidate")
    return ref


def _latest_user_text(messages: Sequence[Message]) -> tuple[int, str] | None:
    """The latest message the user wrote, and its text: text the proxy wrote is skipped (an orphan
    result turned into a user message starts with PLACEHOLDER_PREFIX; an injected block alone)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":  # role() inlined: not a string is not "user"
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
    pools = [(ctx.session_id, 0, [e for e in own if e.get("call_id") not in later])]
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
    ref: dict[str, Any],
    pick: Mapping[str, Any] | None,
    pools: Sequence[tuple[str, int, list[Mapping[str, Any]]]],
    cfg: Config,
) -> dict[str, Any]:
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
                chain = [
                    *ref["chain"],
                    {"resolver": pick.get("model"), "session": session, "depth": depth},
                ]
                settled = {k: v for k, v in ref.items() if k not in ("abstained", "candidates")}
                settled.update(
                    entity={k: e[k] for k in ("type", "name", "path", "action")},
                    call_id=e.get("call_id"),
                    confidence=round(float(confidence), 3),
                    chain=chain,
                    resolved_by="resolver_model",
                )
                return settled
    return ref
