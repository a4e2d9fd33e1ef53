"""Fixtures of the agent-protocol e2e tests (``tests/support/agent_proxy.py``,
``tests/support/gemini_proxy.py``): the scripted Anthropic, Responses and Gemini upstreams and a
live proxy in front of them."""

from tests.support.agent_proxy import (  # noqa: F401
    _anthropic_server,
    _responses_server,
    agent_proxy,
    anthropic_upstream,
    responses_upstream,
)
from tests.support.gemini_proxy import _gemini_server, gemini_proxy, gemini_upstream  # noqa: F401
