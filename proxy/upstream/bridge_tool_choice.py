"""A Messages request's ``tool_choice.disable_parallel_tool_use``, carried to a provider reached
through litellm's chat translation as ``parallel_tool_calls: false``.

litellm's Messages-to-chat adapter translates ``tool_choice``'s type and drops the flag: a client
that asked for one call at a time (an agent whose tools must run in order) got several from
OpenAI. A provider that speaks Messages itself reads the flag where it is, and is left alone."""

from __future__ import annotations

from typing import Any


def parallel_calls_off(kwargs: dict[str, Any], model: str, provider: str) -> dict[str, Any]:
    """``kwargs`` with ``parallel_tool_calls=False`` where the request's ``tool_choice`` turns
    parallel calls off, the provider takes the flag and does not read Messages itself."""
    choice = kwargs.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("disable_parallel_tool_use") is not True:
        return kwargs
    if not kwargs.get("tools") or choice.get("type") == "none" or _native(model, provider):
        return kwargs
    import litellm

    try:
        supported = litellm.get_supported_openai_params(model, provider) or ()
    except Exception:  # a provider litellm has no table for: the flag is not sent
        return kwargs
    if "parallel_tool_calls" not in supported:
        return kwargs
    return {**kwargs, "parallel_tool_calls": False}


def _native(model: str, provider: str) -> bool:
    """Whether litellm sends this provider the Messages body itself (Anthropic, Bedrock …)."""
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    try:
        known = LlmProviders(provider)
    except ValueError:
        return False
    config = ProviderConfigManager.get_provider_anthropic_messages_config(model, known)
    return config is not None
