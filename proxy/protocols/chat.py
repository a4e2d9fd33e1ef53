"""Chat Completions: the rules' own message model, so the adapter maps nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.protocols.base import Lowered
from rules.base import Message


class ChatAdapter:
    name = "chat"

    def lower(self, body: dict[str, Any], session: str | None = None) -> Lowered:
        return Lowered(body["messages"], body.get("tools"))

    def lift(
        self,
        body: dict[str, Any],
        lowered: Lowered,
        messages: list[Message],
        hashes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        if messages is lowered.messages:
            return body
        forwarded = dict(body)
        forwarded["messages"] = messages
        return forwarded

    def hidden_text(self, body: dict[str, Any], lowered: Lowered | None = None) -> dict[str, str]:
        return {}

    def violations(self, forwarded: dict[str, Any], lowered: Lowered) -> list[str]:
        return []  # the chat view's own check runs in the pipeline


CHAT = ChatAdapter()
