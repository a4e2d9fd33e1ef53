"""litellm, imported on first use (the import costs seconds), and which provider it calls for a
model name. Shared by the settings (a litellm upstream's provider, derived at start-up), the
litellm upstream and the resolver model; it imports nothing of the proxy, so none of them
imports another through it."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from proxy import (
    litellm_answers,
    litellm_anthropic_events,
    litellm_gemini_end,
    litellm_gemini_ids,
    litellm_gemini_usage,
    litellm_logs,
    litellm_tool_calls,
    litellm_urls,
)
from proxy.tokens import ensure_offline_tiktoken

_loading = threading.Lock()
_loaded: Any = None


def load_litellm() -> Any:
    """litellm, imported and set up once (thread-safe: ``litellm_ready`` imports it in a
    worker thread while a request may also ask for it)."""
    global _loaded
    if _loaded is None:
        with _loading:
            if _loaded is None:
                _loaded = _import_litellm()
    return _loaded


async def litellm_ready() -> None:
    """litellm imported off the event loop: its first import takes seconds, which every other
    request waited out (the first bridged request in a process held ``/healthz`` 2 s)."""
    if _loaded is None:
        await asyncio.to_thread(load_litellm)


def _import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # nothing litellm would fetch on its own (its Anthropic beta-header table on the first
    # streamed Messages request, from GitHub, blocking the event loop): its bundled copies
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    ensure_offline_tiktoken()
    litellm_logs.before_import()  # its records are redacted by ours, cut first
    import litellm

    litellm_logs.after_import()
    litellm_answers.install()  # its answers bounded, as the native relays' are
    litellm_gemini_end.install()  # a cut Gemini stream is a break, not an answer
    litellm_anthropic_events.install()  # an Anthropic error event keeps its type's status
    litellm_gemini_usage.install()  # a Gemini client is told its cache read
    litellm_gemini_ids.install()  # a Gemini client's calls keep their ids, both ways
    litellm_tool_calls.install()  # parallel calls' fragments each in their own tool_use block
    litellm_urls.install()  # no URL a request names is fetched from the proxy's host

    litellm.drop_params = True  # a field one provider lacks must not fail the request
    # the shape a provider requires, made where litellm knows it (a 400 on every retry otherwise):
    # Anthropic's 'thinking' dropped when the turn in progress kept no thinking block (Codex or
    # an SDK switched to a Claude model mid tool loop, with reasoning asked for), a first message
    # that is the user's, a call's result paired with it
    litellm.modify_params = True
    litellm.suppress_debug_info = True  # no banners on stdout for a name it cannot place
    # a client's cache_control marks are no Gemini context-cache objects: litellm made each
    # marked prefix one (a paid object, stored an hour), called the cache API before every
    # request, and failed the request where Google refused one; Gemini caches prefixes itself
    litellm.disable_anthropic_gemini_context_caching_transform = True
    return litellm


def provider_of(model: str) -> str | None:
    """The provider litellm picks for ``model`` by itself; None when the name does not tell.
    A prefix litellm knows is taken as it stands, without the lookup: for some providers the
    lookup acts (github_copilot's starts an OAuth device flow)."""
    litellm = load_litellm()
    prefix, slash, _ = model.partition("/")
    if slash and prefix in litellm.provider_list:
        return prefix
    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:  # litellm raises for a name it cannot place
        return None
