"""Fixtures of the inspection tests: the scripted Anthropic and Responses upstreams and a live
proxy in front of them (``tests/support/agent_proxy.py``), for rows of each protocol."""

from tests.support.agent_proxy import (  # noqa: F401
    _anthropic_server,
    _responses_server,
    agent_proxy,
    anthropic_upstream,
    responses_upstream,
)
