"""The first-seen cap of large tool results, for ``prune_plan.Run``: a result over
``max_result_tokens`` is capped the first time a request carries it, and the decision is
remembered (the overlay replays it byte for byte). The latest failure goes whole up to
``max_evidence_tokens`` for good, a file's read until a compaction elides it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Protocol

from rules.activity.observations import Observation
from rules.base import Context, Message, TokenCounter, frozen
from rules.context import evidence, overlay
from rules.context.overlay import Overlay
from rules.messages import shared_prefix


class CapOptions(Protocol):
    max_result_tokens: int
    max_evidence_tokens: int


class Run(Protocol):
    """What of ``prune_plan.Run`` the cap reads and writes."""

    @property
    def ctx(self) -> Context: ...

    @property
    def tokens(self) -> TokenCounter: ...

    @property
    def messages(self) -> Sequence[Message]: ...

    @property
    def anchors(self) -> Sequence[str]: ...

    @property
    def overlay(self) -> Overlay: ...

    @property
    def by_result(self) -> Mapping[int, Observation]: ...

    @property
    def cfg(self) -> CapOptions: ...

    @property
    def evidence(self) -> evidence.Evidence: ...

    def edited(self, i: int, edit: dict[str, str]) -> Message: ...

    def decide(
        self, ov: Overlay, i: int, action: str, edit: dict[str, str], freed: int
    ) -> None: ...


VERBATIM = ("latest failing test output", "latest build error", "latest error")
# ``Context.memo`` name: the last list capped, with the cap and the tool results it did not find
# within it (over it, or already edited or dropped)
CAP_MEMO = "prune_cap"


def cap_new_results(run: Run) -> None:
    """Cap oversized results when first seen, the decision remembered; of the messages shared
    with the session's last list, only those over the cap then are looked at again."""
    dropped = set(run.overlay.dropped)
    edits, limit = run.overlay.edits, run.cfg.max_result_tokens
    messages, anchors = run.messages, run.anchors
    kept = run.ctx.memo.get(CAP_MEMO)
    start, again = 0, []
    if kept and kept[0][1][0] == limit:
        start = shared_prefix(kept[0][0], messages)
        again = [i for i in kept[0][1][1] if i < start]
    unproven: list[int] = []  # tool results not found within the cap: looked at next time
    for i in chain(again, range(start, len(messages))):
        m = messages[i]
        if m.get("role") != "tool":  # role(m), inlined: every new message
            continue
        a = anchors[i]
        if a in edits or a in dropped:
            unproven.append(i)
            continue
        size = overlay.capped_size(m, run.tokens)  # its text: a cap keeps its images
        if size <= limit:
            continue
        unproven.append(i)
        why, seen = run.evidence.protected.get(i), run.by_result.get(i)
        whole = size <= run.cfg.max_evidence_tokens
        if whole and why in VERBATIM:  # the latest failure: whole for good
            edits[a] = {"action": "keep", "reason": why}
            continue
        if whole and seen is not None and seen.action.kind == "read":
            continue  # a file's page it asked for: whole until a compaction elides it
        cap = run.cfg.max_result_tokens  # stored: the replay renders it as it was forwarded
        edit = {"action": "cap", "reason": f"over {cap:,} tokens", "cap": str(cap)}
        freed = size - overlay.capped_size(run.edited(i, edit), run.tokens)
        run.decide(run.overlay, i, "cap", edit, freed)
    run.ctx.memo[CAP_MEMO] = [(frozen(messages), (limit, unproven))]
