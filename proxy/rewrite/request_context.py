"""One request's inputs to the pipeline (``_Request``) and the rules' ``Context`` made of them:
its messages, the model's token counter, the session's state and ancestors (named as the client
names them), the call's budget and window room (``WindowBudgets``). Mixed into ``Engine``, whose
``__init__`` sets the attributes declared here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.principals import split_scoped
from proxy.protocols.base import Adapter, Lowered
from proxy.rewrite.budgets import WindowBudgets
from proxy.tokens import RequestTokens, TokenCounters
from rules.base import Ancestor, CacheFacts, Context, SessionState


@dataclass(frozen=True)
class _Request:
    """One request's inputs to the pipeline, but for the session's stored state."""

    body: dict[str, Any]
    lowered: Lowered
    adapter: Adapter
    now: float
    sid: str
    budget: int | None  # a lower budget for this call only
    heavy: bool = False  # its work runs in the worker thread (``proxy.rewrite.offload``)
    named_model: str | None = None  # the model, where the body does not name it (Gemini's path)
    hints: Mapping[str, Any] | None = None  # data for the rules (the workspace picture)
    call_ids: str = "anthropic"  # the ids the upstream accepts (``proxy.call_id_rules``)

    @property
    def model(self) -> str:
        return self.named_model if self.named_model is not None else str(self.body["model"])


class RequestContexts(WindowBudgets):
    counters: TokenCounters

    def _context(
        self, request: _Request, state: SessionState, ancestors: list[Ancestor], cache: CacheFacts
    ) -> Context:
        messages = request.lowered.messages
        return Context(
            messages=messages,
            original_messages=messages,
            model=request.model,
            tokens=RequestTokens(self.counters.for_model(request.model)),
            now=request.now,
            session_id=request.sid,
            state=state,
            tools=request.lowered.tools,
            request=request.body,
            # named as the client names them: a note forwarded upstream never shows a principal
            ancestors=tuple(
                Ancestor(split_scoped(a.session_id)[1], a.state, a.depth) for a in ancestors
            ),
            budget=self._budget(request),
            window_room=self._hard_limit(request),
            cache=cache,
            hints=request.hints or {},
            call_ids=request.call_ids,
        )

    def _budget(self, request: _Request) -> int | None:
        return self.call_budget(request.model, split_scoped(request.sid)[0], request.budget)

    def _hard_limit(self, request: _Request) -> int | None:
        principal = split_scoped(request.sid)[0]
        return self.hard_limit(request.model, principal, request.budget, request.body)
