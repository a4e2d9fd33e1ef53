"""The sampled production check of the memos' invariant: nothing edits a message in place once a
session's memos hold it (``proxy.rewrite.session_memos``; docs/architecture.md). One request in
``memory.integrity_sample`` re-checks the messages its session's memos hold; a message changed in
place (a bug: the memos' values are no longer its content's) drops what the session's memos
hold, so its next request derives everything afresh; counted, and logged the first time."""

from __future__ import annotations

import itertools
import logging

from proxy.rewrite.pipeline import Pipeline
from rules.base import Context

log = logging.getLogger("ctxproxy.engine")


class IntegritySampler:
    def __init__(self, every: int, pipeline: Pipeline) -> None:
        self.every = every  # 0: never
        self.pipeline = pipeline
        self.failures = 0
        self._requests = itertools.count(1)
        self._warned = False

    def check(self, ctx: Context) -> None:
        """Check ``ctx``'s session when its turn comes."""
        if not self.every or next(self._requests) % self.every:
            return
        memos = self.pipeline.memos_of(ctx)
        changed = memos.changed() if memos is not None else []
        if not changed:
            return
        self.failures += 1
        self.pipeline.forget(ctx.session_id)
        if not self._warned:
            self._warned = True
            log.warning(
                "a memoised message was changed in place: the session's memos were dropped",
                extra={"session": ctx.session_id, "changed": len(changed)},
            )
