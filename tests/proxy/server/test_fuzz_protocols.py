"""Nothing a client sends to ``/v1/messages`` or ``/v1/responses`` makes the proxy answer 5xx:
arbitrary bodies of each protocol's shape (and of no shape), in strict mode (a rule or an adapter
that raises fails the request, so this also proves the adapters accept anything). Errors come in
the protocol's own shape; what reaches the upstream passes the protocol's integrity check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.protocols.checks import anthropic_violations, responses_violations
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings
from tests.support.fuzz_proxy import FuzzProxy, fuzz_proxy

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20))
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
ids = st.one_of(st.sampled_from(["toolu_1", "toolu_2", "call_1", "call 1", "", "x!y"]), json_values)
texts = st.one_of(st.sampled_from(["", " ", "mkdir -p demo && echo made", "删除刚创建的文件夹"]),
                  st.text(max_size=30))  # fmt: skip

anthropic_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(texts, json_values)},
                          optional={"cache_control": st.just({"type": "ephemeral"})}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": ids,
                           "name": st.sampled_from(["Bash", "Write", "Read", "x"]),
                           "input": st.one_of(st.just({"command": "mkdir -p a"}), json_values)}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": ids},
                          optional={"content": st.one_of(texts, st.lists(json_values, max_size=2)),
                                    "is_error": st.booleans()}),
    st.fixed_dictionaries({"type": st.sampled_from(["thinking", "redacted_thinking"]),
                           "thinking": texts, "signature": st.just("sig==")}),
    json_values,
)  # fmt: skip
anthropic_message = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system"]),
            "content": st.one_of(texts, st.lists(anthropic_block, max_size=4)),
        }
    ),
    json_values,
)
anthropic_bodies = st.one_of(
    st.fixed_dictionaries(
        {
            "model": st.one_of(st.just("claude-opus-5-5"), json_values),
            "messages": st.one_of(st.lists(anthropic_message, max_size=6), json_values),
        },
        optional={
            "system": st.one_of(texts, st.lists(anthropic_block, max_size=2), json_values),
            "tools": json_values,
            "max_tokens": st.just(100),
            "metadata": json_values,
        },
    ),
    json_values,
)

part = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text"]), "text": texts}),
    json_values,
)
item = st.one_of(
    st.fixed_dictionaries({"type": st.just("message"),
                           "role": st.sampled_from(["user", "assistant", "developer", "system"]),
                           "content": st.one_of(texts, st.lists(part, max_size=3))}),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": ids,
                           "name": st.sampled_from(["exec_command", "x"]),
                           "arguments": st.one_of(st.just('{"cmd": "mkdir -p d"}'), texts)}),
    st.fixed_dictionaries({"type": st.just("custom_tool_call"), "call_id": ids,
                           "name": st.just("apply_patch"), "input": texts}),
    st.fixed_dictionaries({"type": st.sampled_from(["function_call_output",
                                                    "custom_tool_call_output"]),
                           "call_id": ids, "output": st.one_of(texts, st.lists(part, max_size=2))}),
    st.fixed_dictionaries({"type": st.just("reasoning"), "encrypted_content": st.just("gAAA"),
                           "summary": st.lists(part, max_size=2)}),
    json_values,
)  # fmt: skip
responses_bodies = st.one_of(
    st.fixed_dictionaries(
        {
            "model": st.one_of(st.just("gpt-5"), json_values),
            "input": st.one_of(texts, st.lists(item, max_size=6), json_values),
        },
        optional={"instructions": st.one_of(texts, json_values), "tools": json_values},
    ),
    json_values,
)


@pytest.fixture(scope="module")
def edge() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json({"ok": True})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxy(edge: EdgeUpstream) -> Iterator[FuzzProxy]:
    with fuzz_proxy(protocol_settings(edge), edge) as served:
        yield served


def _post(proxy: FuzzProxy, path: str, body: object) -> tuple[int, dict, object]:  # type: ignore[type-arg]
    answer, forwarded = proxy.post(path, body)
    return answer.status_code, answer.json(), forwarded


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=anthropic_bodies)
def test_no_messages_body_gets_a_5xx(proxy: FuzzProxy, body: object) -> None:
    status, answer, forwarded = _post(proxy, "/v1/messages", body)
    # 401: a valid body for a model another kind serves (through litellm), whose upstream has no
    # key configured here and the request sent none
    assert status in (200, 400, 401, 404), (status, answer)
    if status != 200:
        assert answer["type"] == "error" and set(answer["error"]) == {"type", "message"}
    else:
        assert anthropic_violations(forwarded) == []


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=responses_bodies)
def test_no_responses_body_gets_a_5xx(proxy: FuzzProxy, body: object) -> None:
    status, answer, forwarded = _post(proxy, "/v1/responses", body)
    assert status in (200, 400, 404), (status, answer)
    if status != 200:
        assert set(answer["error"]) == {"message", "type", "param", "code"}
    else:
        assert responses_violations(forwarded) == []


def test_an_empty_messages_array_is_a_400_in_anthropics_shape(proxy: FuzzProxy) -> None:
    # it was forwarded as it came (or met the upstream's key check first, through litellm)
    for model in ("claude-x", "0"):
        status, answer, forwarded = _post(proxy, "/v1/messages", {"model": model, "messages": []})
        assert status == 400, answer
        assert answer["type"] == "error"
        assert answer["error"]["type"] == "invalid_request_error"
        assert "at least one message" in answer["error"]["message"]
        assert forwarded is None


@pytest.mark.parametrize("kind", [{}, [], 5, None])
def test_a_tool_results_block_of_no_string_type_is_a_400(proxy: FuzzProxy, kind: object) -> None:
    """A block inside a tool result is read as a message's own blocks are: one whose ``type``
    is not a string (an orphan result's, kept as the user's text, met a set of names) is
    refused in Anthropic's shape, naming it, and nothing is forwarded."""
    block = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": kind, "text": "a"}]}
    body = {"model": "claude-x", "max_tokens": 10,
            "messages": [{"role": "user", "content": [block]}]}  # fmt: skip
    status, answer, forwarded = _post(proxy, "/v1/messages", body)
    assert status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error"
    assert "messages[0].content[0].content[0]" in answer["error"]["message"]
    assert forwarded is None
    # a null content, or none, is the provider's to judge, as before
    for content in ({"content": None}, {}):
        ok = {"type": "tool_result", "tool_use_id": "t1", **content}
        status, answer, _ = _post(proxy, "/v1/messages", {**body, "messages": [
            {"role": "user", "content": [ok]}]})  # fmt: skip
        assert status == 200, answer


@pytest.mark.parametrize("flag", ["stream", "background"])
@pytest.mark.parametrize("value", ["false", "true", 1, 0, [], {}])
@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/messages", {"model": "claude-x", "max_tokens": 10,
                          "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"model": "gpt-5", "input": "hi"}),
        ("/v1/chat/completions", {"model": "gpt-5",
                                  "messages": [{"role": "user", "content": "hi"}]}),
    ],
)  # fmt: skip
def test_a_flag_of_no_boolean_is_a_400(
    proxy: FuzzProxy, path: str, body: dict, flag: str, value: object  # type: ignore[type-arg]
) -> None:
    """``"stream": "false"`` was taken for a stream here (it is truthy) and forwarded as sent,
    which a provider refuses and a pydantic server reads as false: refused, naming the flag."""
    status, answer, forwarded = _post(proxy, path, {**body, flag: value})
    assert status == 400, answer
    assert f"'{flag}' must be a boolean" in str(answer)
    assert forwarded is None
    status, answer, _ = _post(proxy, path, {**body, flag: None})  # null: as if absent
    assert status == 200, answer
