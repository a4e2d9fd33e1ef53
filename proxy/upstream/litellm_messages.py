"""A streamed Anthropic Messages request through litellm, without litellm's proxy server.

``litellm.anthropic_messages(stream=True)`` relays a provider that speaks Messages itself
(anthropic, bedrock, vertex_ai …) with the stream handler of litellm's *proxy server*
(``litellm.proxy.pass_through_endpoints``), which imports that server's dependencies at module
level: fastapi, soundfile (with numpy), redis, backoff … none of which a plain ``pip install
litellm`` brings. With litellm 1.110 every streamed Messages request to such a provider failed
with ``ModuleNotFoundError`` (``502 … failed (ModuleNotFoundError)``).

A stream therefore takes litellm's Messages-to-chat adapter, the path litellm itself takes for a
provider without a Messages API (``openai``, ``gemini`` …): the request is translated to a chat
completion, streamed by ``litellm.acompletion``, and translated back to Anthropic's SSE
(``message_start`` … ``message_stop``; thinking blocks keep their signature, tool_use ids are
kept). A request without ``stream`` still takes ``litellm.anthropic_messages``. What the chat
translation carries: ``docs/protocols.md#routing``."""

from __future__ import annotations

from typing import Any

from proxy.providers import load_litellm


async def streamed_messages(**kwargs: Any) -> Any:
    """``litellm.anthropic_messages(**kwargs)`` with ``stream=True``, through the chat adapter:
    an async iterator of SSE bytes (or event dicts). Raises what litellm raises."""
    load_litellm()
    from litellm.llms.anthropic.messages.adapters.handler import (
        LiteLLMMessagesToCompletionTransformationHandler as Adapter,
    )

    kwargs["stream"] = True
    return await Adapter.async_anthropic_messages_handler(**kwargs)
