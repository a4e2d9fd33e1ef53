"""Resolving one detected mention against the entities of the sessions it may mean: which entities
fit it, which sessions are searched in which order (its actor decides), and when to abstain.
Used by ``resolve_refs``; pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rules.entities import cache as entity_cache
from rules.entities.forgotten import counts_from_first, unsure
from rules.entities.ref_candidates import kind_mismatch
from rules.entities.ref_detect import Mention
from rules.entities.ref_pointer import describe, pointer
from rules.entities.ref_relations import pick
from rules.entities.ruled_out import USERS_WORD
from rules.entities.unknown_made import Marker, newer_than
from rules.report import ChainStep, EntityRef, Reference

_NONE: frozenset[str] = frozenset()

# The entities a search may pick from: (session id, depth up the ancestors, its events).
Pool = tuple[str, int, Sequence[Mapping[str, Any]]]


class Weights(Protocol):
    """The options of resolve_refs that resolution reads."""

    threshold: float
    ancestor_penalty: float
    crowd_penalty: float


def order_pools(mention: Mention, own: Pool, ancestors: Sequence[Pool]) -> list[Pool]:
    """The sessions to search, in order. "The file the lead agent made" means an ancestor's
    entities only, and "the branch she created" someone else's: never this session's, so with
    no ancestor none; "the file I made" in a sub-agent's message was written by its lead, so the
    ancestors come first; otherwise (you, or no actor) the session's own, then its ancestors."""
    if mention.actor == "other":
        return list(ancestors)
    if ancestors and mention.actor == "speaker":
        return [*ancestors, own]
    return [own, *ancestors]


def crowded(mention: Mention) -> bool:
    """Whether each further candidate lowers the mention's confidence: a pronoun or a bare noun
    ("delete it", "that commit"), no verb of making nor a recency word to pick the one."""
    return mention.crowd or (mention.action is None and not mention.recency)


def pools_for(
    mention: Mention, own: Pool, ancestors: Sequence[Pool], now: float, near_seconds: float
) -> list[Pool]:
    """``order_pools``; for a mention whose candidates crowd it (a pronoun, "that commit"), only
    what each made within ``near_seconds``: a verb of making ("the server you started") may
    mean an older thing, a bare "it" among an hour's things guesses."""
    pools = order_pools(mention, own, ancestors)
    if not crowded(mention):
        return pools
    return [
        (session, depth, [e for e in events if now - float(e.get("first_seen", 0)) <= near_seconds])
        for session, depth, events in pools
    ]


def entity_ref(event: Mapping[str, Any]) -> EntityRef:
    ref: EntityRef = {
        "type": event["type"],
        "name": event["name"],
        "path": event["path"],
        "action": event["action"],
    }
    if "id" in event:  # beyond files: its identifier and what the block says of it
        ref["id"] = str(event["id"])
        ref["description"] = describe(event)
    return ref


def resolve(
    mention: Mention,
    pools: Sequence[Pool],
    cfg: Weights,
    asked_at: float | None = None,
    unknown: Mapping[str, Sequence[Marker]] | None = None,
    forgot: Mapping[str, frozenset[str]] | None = None,
) -> Reference:
    """The first session (in ``pools``' order) with a fitting entity decides: its newest one,
    unless the confidence falls below the threshold, another from the same call fits as well, or
    the session made something newer that only the shell named (``unknown``, per session) that
    the mention may mean, or it counts from the first one made and the session forgot one of
    the kind (``forgot``, per session)."""
    chain: list[ChainStep] = []
    ref: Reference = {"mention": mention.text, "lang": mention.lang, "kind": mention.kind}
    if kind_mismatch(mention):
        ref["entity"], ref["confidence"], ref["chain"] = None, 0.0, chain
        ref["abstained"] = "kind_mismatch"
        return ref
    for session, depth, events in pools:
        if forgot and counts_from_first(mention) and unsure(mention, forgot.get(session, _NONE)):
            chain.append({"session": session, "depth": depth, "candidates": 0})
            ref["entity"], ref["confidence"], ref["chain"] = None, 0.0, chain
            ref["abstained"] = "forgotten"
            return ref
        cands, ties, crowd = pick(mention, events)
        chain.append({"session": session, "depth": depth, "candidates": len(cands)})
        if not cands:
            continue
        top = cands[0]
        confidence = mention.base - cfg.ancestor_penalty * depth
        if crowd and crowded(mention):
            confidence -= cfg.crowd_penalty * (len(cands) - 1)
        ref["confidence"] = round(max(confidence, 0.0), 3)
        ref["chain"] = chain
        if ties:
            ref["entity"] = None
            ref["abstained"] = "ambiguous"
            ref["candidates"] = [c["path"] for c in [top, *ties]][:5]
        elif unknown and newer_than(mention, top, unknown.get(session, ())):
            ref["entity"] = None
            ref["abstained"] = "newer_unnamed"
            ref["candidates"] = [c["path"] for c in cands][:5]
        elif confidence < cfg.threshold:
            ref["entity"] = None
            ref["abstained"] = "low_confidence"
            ref["candidates"] = [c["path"] for c in cands][:5]
        else:
            ref["entity"] = entity_ref(top)
            ref["call_id"] = top.get("call_id")
            ref["pointer"] = pointer(top, ref, chain, session)
            seen = top.get("first_seen")
            if asked_at is not None and isinstance(seen, (int, float)):
                ref["age_s"] = max(0, int(asked_at - seen))
        return ref
    ref["entity"] = None
    ref["confidence"] = 0.0
    ref["chain"] = chain
    ref["abstained"] = "no_candidate"
    return ref


def settle(
    ref: Reference, pick: Mapping[str, Any] | None, pools: Sequence[Pool], cfg: Weights
) -> Reference:
    """An abstention settled by the resolver model's pick, if the pick is one of its candidates."""
    if ref.get("entity") is not None or not isinstance(pick, Mapping):
        return ref
    if ref.get("abstained") in USERS_WORD:  # the user ruled it out: no pick overrules that
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
                settled["entity"] = entity_ref(e)
                settled["call_id"] = e.get("call_id")
                settled["confidence"] = round(float(confidence), 3)
                settled["chain"] = chain
                settled["pointer"] = pointer(e, settled, chain, session)
                settled["resolved_by"] = "resolver_model"
                return settled
    return ref
