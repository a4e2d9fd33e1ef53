"""A request sent again as it was (a client's retry after a 429, a 5xx or a timeout; a
regenerate) is scheduled as the one it repeats was: prune's memory is saved while the upstream
still reads the request, so the retry found the memory counting its first attempt (one more
request, the growth measured again) and could be compacted where the first attempt was not,
re-billing the prompt from the cut on.

The memory keeps the request's fingerprint (its message count, its last message's hash, its
tokens less inject's blocks), the memory as it was before it and the blocks' tokens it counted; a
request with the same fingerprint runs on those (a block the first attempt placed at the tail is
stored now, but was not there when it was scheduled). When the first attempt compacted, the memory
after it stands: its cut is in the overlay, replayed as forwarded, and the schedule's spacing
holds another. A resend then leaves the memory as its first attempt saved it (``retried``), but
for the time of the provider's last read, whether that attempt compacted (the resend comes with
its cut replayed: the same messages, with the tokens the cut left) or looked at what a cut could
free: counted as one more request, or saving no look, retries (a client resending an overloaded
request several times) spent the spacing after a cut or undid a look's figures, and the
session's later requests were forwarded otherwise than had no retry come."""

from __future__ import annotations

from typing import Any, NamedTuple

from rules.base import Context
from rules.context.session_roots import OTHERS, ROOT

FINGERPRINT = "fp"
BEFORE = "before"
BLOCKS = "fp_blocks"
STEPS = "fp_steps"  # the per-step figures it read, when it replaced them (a look)
_NOT_KEPT = (ROOT, OTHERS, FINGERPRINT, BEFORE, BLOCKS, STEPS)
_UNCHANGED: Any = object()


class Repeat(NamedTuple):
    """What the first attempt of a resent request was scheduled on."""

    memory: dict[str, Any]
    blocks: int  # inject's blocks' tokens it counted
    steps: Any  # the per-step figures it read; ``_UNCHANGED``: those stored now


def fingerprint(ctx: Context, tokens: int) -> list[Any]:
    messages = ctx.original_messages
    return [len(messages), ctx.hash_of(messages[-1]) if messages else "", tokens]


def repeated(session: Any, print_: list[Any]) -> Repeat | None:
    """What the request this one repeats ran on, when it repeats the last one and that one did
    not compact; else None."""
    if not isinstance(session, dict) or session.get(FINGERPRINT) != print_:
        return None
    before, blocks = session.get(BEFORE), session.get(BLOCKS)
    requests, last_cut = session.get("requests"), session.get("last_cut")
    if not isinstance(before, dict) or not isinstance(blocks, int):
        return None
    if isinstance(requests, int) and last_cut == requests - 1:
        return None
    return Repeat(before, blocks, session.get(STEPS, _UNCHANGED))


def repeats_cut(session: Any, print_: list[Any]) -> bool:
    """Whether this request repeats the last one, which compacted: the same messages, with the
    tokens that one's cut left (replayed from the overlay), as its memory counted them."""
    if not isinstance(session, dict):
        return False
    before = session.get(FINGERPRINT)
    if not isinstance(before, list) or before[:2] != print_[:2]:
        return False
    requests, last_cut = session.get("requests"), session.get("last_cut")
    cut = isinstance(requests, int) and last_cut == requests - 1
    return cut and session.get("last_tokens") == print_[2]


def retried(session: dict[str, Any], now: float) -> dict[str, Any]:
    """The memory after a resend that did not compact: its first attempt's, as that one saved it
    (its count, growth and look), but for the time, the provider's last read of the prompt."""
    return session if session.get("last_at") == now else {**session, "last_at": now}


def steps_read(found: Repeat | None, stored: Any) -> Any:
    """The per-step figures to schedule on: the first attempt's, for a resend."""
    if found is None or found.steps is _UNCHANGED:
        return stored
    return found.steps


def noted(
    memo: dict[str, Any], print_: list[Any], before: Any, blocks: int, steps: Any = _UNCHANGED
) -> dict[str, Any]:
    """``memo`` with this request's fingerprint, the memory it ran on, the blocks' tokens it
    counted and (``steps``) the per-step figures it read, when it replaces them."""
    kept = {}
    if isinstance(before, dict):
        kept = {k: v for k, v in before.items() if k not in _NOT_KEPT}
    out = {**memo, FINGERPRINT: print_, BEFORE: kept, BLOCKS: blocks}
    if steps is not _UNCHANGED:
        out[STEPS] = steps
    return out


UNCHANGED = _UNCHANGED
