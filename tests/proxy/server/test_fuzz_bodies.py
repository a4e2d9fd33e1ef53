"""Nothing a client sends can make the proxy answer 500: arbitrary bodies, in strict mode (a rule
that raises fails the request, so this also proves the rules accept any message shape), under
any content type (a JSON one is never refused; any other gets 415, unread)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.fuzz_proxy import FuzzProxy, fuzz_proxy

OK = {
    "id": "c",
    "object": "chat.completion",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30))
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.sampled_from(["call_1", "call_2", "CALL_1", "call 1", "ｃａｌｌ_1", "", "x!y"])
args = st.one_of(
    st.sampled_from(
        [
            '{"command": "mkdir -p a && cd a"}',
            '{"path": "f.py"}',
            "{",
            "null",
            "[]",
            '{"command": 5}',
        ]
    ),
    json_values,
)
call = st.fixed_dictionaries(
    {
        "id": st.one_of(ids, json_values),
        "type": st.just("function"),
        "function": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {"name": st.sampled_from(["bash", "write_file", "", "todo"]), "arguments": args}
            ),
        ),
    }
)
content = st.one_of(
    st.none(),
    st.text(max_size=60),
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {"type": st.just("text"), "text": st.one_of(st.text(max_size=30), json_values)}
            ),
            json_values,
        ),
        max_size=3,
    ),
)
message = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "user", "developer"]),
            "content": st.one_of(st.text(max_size=60), content),
        }
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": content},
        optional={"tool_calls": st.one_of(st.lists(call, max_size=3), st.none())},
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "content": content},
        optional={"tool_call_id": st.one_of(ids, json_values)},
    ),
    json_values,
)
bodies = st.one_of(
    st.fixed_dictionaries(
        {
            "model": st.one_of(st.just("gpt-4o"), json_values),
            "messages": st.one_of(st.lists(message, max_size=8), json_values),
        },
        optional={
            "tools": json_values,
            "stream": st.just(False),
            "metadata": json_values,
            "user": json_values,
        },
    ),
    json_values,
)


@pytest.fixture(scope="module")
def edge() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(OK)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxy(edge: EdgeUpstream) -> Iterator[FuzzProxy]:
    with fuzz_proxy(proxy_settings(edge.base_url), edge) as served:
        yield served


JSON_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "Application/JSON;charset=UTF-8",
    "application/vnd.api+json",
]
# Mostly JSON (so bodies are exercised), sometimes anything printable, or none at all.
content_types = st.one_of(
    st.sampled_from(JSON_TYPES),
    st.sampled_from(JSON_TYPES),
    st.sampled_from(JSON_TYPES),
    st.none(),
    # as a header value goes on the wire: HTTP trims the blanks around it
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies, content_type=content_types)
def test_no_body_makes_the_proxy_answer_500(
    proxy: FuzzProxy, body: object, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    answer, _ = proxy.post("/v1/chat/completions", body, headers)
    status = answer.status_code
    if status != 200:
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    assert status in ((200, 400) if content_type in JSON_TYPES else (200, 400, 415)), status
