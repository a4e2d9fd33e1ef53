"""The body a request forwards, from the pipeline's outcome: lifted back into the client's
protocol (described in the report for a protocol other than chat), its bytes (the adapter's, or
written here for a heavy request), and the check that nothing memoised was changed in place
(every request of the tests' strict engine, a sample in production). Mixed into ``Engine``, whose
``__init__`` sets the attributes declared here."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.chat import CHAT
from proxy.protocols.report import describe_lift
from proxy.rewrite.integrity import IntegritySampler
from proxy.rewrite.pipeline import Pipeline, PipelineOutcome
from proxy.rewrite.request_context import _Request
from rules.base import Context


class Lifting:
    strict: bool
    pipeline: Pipeline
    integrity: IntegritySampler

    def _check(self, ctx: Context, forwarded: dict[str, Any], data: bytes | None) -> None:
        """The tests' checks of a request (``strict``): the adapter's bytes are the forwarded
        body's JSON, and no message a session's memos hold was changed in place since."""
        if data is not None and data != orjson.dumps(forwarded):
            raise AssertionError("the adapter's bytes of the forwarded body are not its JSON")
        memos = self.pipeline.memos_of(ctx)
        if memos is not None and memos.changed():
            raise AssertionError(f"changed in place after being memoised: {memos.changed()[:3]}")

    def _lift(
        self, ctx: Context, request: _Request, outcome: PipelineOutcome
    ) -> tuple[dict[str, Any], bytes | None]:
        """The body to forward and its bytes: the adapter's, or written here (a heavy request)."""
        lowered, adapter, body = request.lowered, request.adapter, request.body
        forwarded = adapter.lift(body, lowered, outcome.messages, outcome.hashes)
        if adapter is not CHAT:
            describe_lift(adapter, body, forwarded, lowered, outcome.report, ctx.tokens)
        data = lowered.data if forwarded is not body else None
        if data is None and forwarded is not body and request.heavy:
            try:
                data = orjson.dumps(forwarded)
            except (TypeError, orjson.JSONEncodeError):  # written (or refused) where sent
                data = None
        if self.strict:
            self._check(ctx, forwarded, data)
        else:
            self.integrity.check(ctx)
        return forwarded, data
