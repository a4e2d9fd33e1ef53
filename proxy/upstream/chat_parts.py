"""Chat content parts a provider is not given through litellm, refused by name.

litellm's conversion of a chat request to Anthropic's Messages carries a user message's ``text``,
``image_url``, ``file`` and ``document`` parts; any other (``input_audio``, ``video_url``, a part
of a type it does not know) it drops without a word. A message of such parts only went as no
message at all (``messages: []``, which Anthropic refuses in its own words), and beside text the
model answered without what the user sent. Such a part is refused here, before anything is sent:
a 400 naming it, in the client's protocol."""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest

# per provider: the user content parts litellm's conversion carries to it
_CARRIED = {"anthropic": frozenset({"text", "image_url", "file", "document"})}
_MAX_SHOWN = 64  # characters of a part's type, named to the client


def refuse_dropped_parts(provider: str, messages: Any) -> None:
    """Raises ``BadRequest`` naming the first user content part litellm would not carry to
    ``provider``."""
    carried = _CARRIED.get(provider)
    if carried is None or not isinstance(messages, list):
        return
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        for j, part in enumerate(content if isinstance(content, list) else ()):
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(kind, str) or kind not in carried:  # a type of any JSON kind
                shown = kind[:_MAX_SHOWN] if isinstance(kind, str) else "no type"
                raise BadRequest(
                    f"A content part of type '{shown}' cannot be sent to {provider} "
                    f"(it carries {', '.join(sorted(carried))}): remove it or send it as one "
                    "of those.",
                    param=f"messages[{i}].content[{j}]",
                )
