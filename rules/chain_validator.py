"""Checks a message list against the tool-chain rules providers enforce (placeholder)."""

from __future__ import annotations

from typing import Any

from rules.base import Messages


def find_violations(messages: Messages) -> list[dict[str, Any]]:
    return []
