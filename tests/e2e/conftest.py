"""Fixtures of the agent-protocol e2e tests (``tests/support/agent_proxy.py``): the scripted
Anthropic and Responses upstreams and a live proxy in front of them."""

from tests.support.agent_proxy import (  # noqa: F401
    _anthropic_server,
    _responses_server,
    agent_proxy,
    anthropic_upstream,
    responses_upstream,
)
