"""A model's budget and window room: the configured budget, the model's known context window,
and the windows upstreams stated in "prompt too long" errors to a principal's requests (learned
for that principal only, kept in the store). Mixed
into ``Engine``, whose ``__init__`` sets the attributes declared here."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from proxy.rewrite.model_windows import LearnedWindows, context_window, window_floor
from proxy.settings import PipelineSettings, Settings
from proxy.store import learned_windows
from proxy.store.base import Store
from rules.redact import redact_text

log = logging.getLogger("ctxproxy.engine")
DEFAULT_RESERVE: int = PipelineSettings.model_fields["output_reserve_tokens"].default
# where each protocol's body asks for its longest answer (Gemini's under generationConfig)
OUTPUT_LIMIT_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def window_room(window: int | None, reserve: int = DEFAULT_RESERVE) -> int | None:
    """What a window of ``window`` tokens leaves for the prompt: less the output reserve, at
    least 256; None for an unknown window."""
    return max(256, window - reserve) if window else None


def default_window_room(model: str) -> int | None:
    """``window_room`` of the model's bundled window with the default reserve (the benches build
    their ``Context`` as the engine does)."""
    return window_room(context_window(model))


def _memoised(
    kept: dict[str, int | None], model: str, compute: Callable[[str], int | None]
) -> int | None:
    """``compute(model)``, kept per model name (at most 1,024: names come from clients)."""
    if model in kept:
        return kept[model]
    if len(kept) >= 1024:
        kept.clear()
    value = kept[model] = compute(model)
    return value


def asked_output(body: Mapping[str, Any]) -> int:
    """The longest answer the request asks for (0: it does not say)."""
    config = body.get("generationConfig") or body.get("generation_config")  # proto-JSON's too
    values = [body.get(key) for key in OUTPUT_LIMIT_KEYS]
    if isinstance(config, Mapping):
        values.append(config.get("maxOutputTokens") or config.get("max_output_tokens"))
    asked = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(asked, default=0)


class WindowBudgets:
    settings: Settings
    store: Store
    budget_override: int | None
    learned: LearnedWindows
    _budgets: dict[str, int | None]
    _rooms: dict[str, int | None]

    def budget_for(self, model: str, principal: str | None = None) -> int | None:
        """min(configured budget, model window − output reserve); None when neither is known.
        The window is the smaller of the known one and one learned from the upstream's errors
        to ``principal``'s requests (None: none learned counts). Memoised per model name
        (bounded: names come from clients); a learned window is applied after the memo."""
        budget = _memoised(self._budgets, model, self._budget_for)
        learned = self._learned_room(model, principal)
        if learned is None:
            return budget
        return min(budget, learned) if budget is not None else learned

    def _budget_for(
        self,
        model: str,
        stated: int | None = None,
        scale: float = 1.0,
        principal: str | None = None,
    ) -> int | None:
        configured = self.budget_override or self.settings.pipeline.budget_tokens
        limits = [b for b in (configured,) if b]
        room = self._window_room(model, stated, scale, principal)
        if room is not None:
            limits.append(room)
        return min(limits) if limits else None

    def _window_room(
        self,
        model: str,
        stated: int | None = None,
        scale: float = 1.0,
        principal: str | None = None,
    ) -> int | None:
        """What the model's window leaves for the prompt (less the output reserve, at least 256
        tokens); None when no window is known. The window is the smaller of the known one, one
        learned from the upstream's errors to ``principal``'s requests and ``stated``."""
        window = self._known_window(model)
        learned = self._learned_window(model, principal)
        for lower in (learned, stated):
            if lower is not None:
                window = min(window, lower) if window else lower
        room = window_room(window, self.settings.pipeline.output_reserve_tokens)
        return None if room is None else int(room * scale)

    def call_budget(self, model: str, principal: str, budget: int | None) -> int | None:
        """``budget_for``, and a lower ``budget`` for this call only (None: none)."""
        known = self.budget_for(model, principal)
        if budget is None:
            return known
        return min(known, budget) if known is not None else budget

    def hard_limit(
        self, model: str, principal: str, budget: int | None, body: Mapping[str, Any]
    ) -> int | None:
        """The size no forwarded request may pass: the window's room (less the answer ``body``
        asks for, where that is more than the reserve), and this call's own lower ``budget``
        (the overflow rescue's retry: a limit the upstream stated). None: no window known.
        Where a request over the budget is refused (``on_over_budget: reject``), the budget: a
        request held over it would be refused on every retry, where a cut would have fitted."""
        room = self.window_room_for(model, principal)
        if room is not None and self.settings.pipeline.on_over_budget == "reject":
            limit = self.call_budget(model, principal, budget)
            room = min(room, limit) if limit is not None else room
        reserve = self.settings.pipeline.output_reserve_tokens
        asked = asked_output(body)
        if room is not None and asked > reserve:  # a longer answer asked for than reserved
            room = max(256, room - (asked - reserve))
        if budget is not None:
            room = min(room, budget) if room is not None else budget
        return room

    def window_room_for(self, model: str, principal: str | None = None) -> int | None:
        """``_window_room`` memoised per model name, as ``budget_for`` is (and cleared with it);
        a window learned from ``principal``'s requests applied after the memo."""
        room = _memoised(self._rooms, model, self._window_room)
        learned = self._learned_room(model, principal)
        if learned is None:
            return room
        return min(room, learned) if room is not None else learned

    def _learned_window(self, model: str, principal: str | None) -> int | None:
        if principal is None or not self.learned.knows(principal):
            return None
        return self.learned.get(principal, *self._window_key(model))

    def _learned_room(self, model: str, principal: str | None) -> int | None:
        """The room of a window learned for ``principal`` (window_room is monotonic, so the
        room of the smaller window is the smaller of the two rooms)."""
        learned = self._learned_window(model, principal)
        reserve = self.settings.pipeline.output_reserve_tokens
        return None if learned is None else window_room(learned, reserve)

    def budget_under(
        self, model: str, stated: int, scale: float = 1.0, principal: str | None = None
    ) -> int:
        """The model's budget were its window ``stated``, for the one request an upstream said
        it to (the overflow rescue's retry): below the floor a learned window keeps, and the
        window's room scaled by ``scale`` (our count of the prompt / the upstream's)."""
        budget = self._budget_for(model, stated, scale, principal)
        assert budget is not None  # a window is known: the stated one
        return budget

    def _known_window(self, model: str) -> int | None:
        return self.settings.context_window_for(model) or context_window(model)

    def _window_key(self, model: str) -> tuple[str, str]:
        """(upstream, model) as learned windows are kept: the model's name redacted."""
        upstream = self.settings.upstream_for(model)
        return (upstream.name if upstream is not None else "", redact_text(model))

    def learn_window(self, model: str, window: int, principal: str) -> int:
        """Remember (here and in the store) the window an upstream stated for ``model`` to one
        of ``principal``'s requests, for that principal's requests only, never below the
        model's ``window_floor``. Returns the window kept."""
        upstream, name = self._window_key(model)
        kept = self.learned.learn(principal, upstream, name, window, self._floor(model))
        learned_windows.save(self.store, principal, upstream, name, kept, time.time())
        return kept

    def _floor(self, model: str) -> int:
        return window_floor(self._known_window(model))

    async def recall_windows(self, now: float) -> int:
        """The windows learned before (by this process before a restart, or by another
        replica), from the store; how many. A store that cannot be read leaves none known."""
        try:
            known = await learned_windows.load(self.store, now)
        except Exception as exc:  # fail-open: the upstream's next overflow teaches it again
            log.warning("could not read the learned context windows: %s", exc)
            return 0
        for principal, upstream, model, window in known:
            # a row stored below the floor (by an older version, or by hand) is raised to it
            self.learned.learn(principal, upstream, model, window, self._floor(model))
        return len(known)
