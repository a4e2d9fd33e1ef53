"""Nothing a client sends to Gemini's ``generateContent`` makes the proxy answer 5xx: arbitrary
bodies of its shape (and of no shape), in strict mode (a rule or the adapter that raises fails
the request, so this also proves the adapter accepts anything). Errors come in Gemini's shape;
what reaches the upstream passes Gemini's pairing rule."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.protocols.gemini_checks import pairing_violations
from proxy.settings import settings_from_mapping
from tests.proxy.server.test_fuzz_protocols import ids, json_values, texts
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.fuzz_proxy import FuzzProxy, fuzz_proxy

names = st.sampled_from(["run_shell_command", "read_file", "x"])
signatures = st.sampled_from(["sig==", "skip_thought_signature_validator"])
part = st.one_of(
    st.fixed_dictionaries({"text": st.one_of(texts, json_values)},
                          optional={"thought": st.booleans(),
                                    "thoughtSignature": st.just("sig==")}),
    st.fixed_dictionaries({"functionCall": st.fixed_dictionaries(
                               {"name": names, "args": st.one_of(
                                   st.just({"command": "mkdir -p a"}), json_values)},
                               optional={"id": ids})},
                          optional={"thoughtSignature": signatures}),
    st.fixed_dictionaries({"functionResponse": st.fixed_dictionaries(
                               {"name": names, "response": st.one_of(
                                   st.fixed_dictionaries({"output": texts}), json_values)},
                               optional={"id": ids})}),
    st.fixed_dictionaries({"inlineData": st.just({"mimeType": "image/png", "data": "iVBO"})}),
    json_values,
)  # fmt: skip
content = st.one_of(
    st.fixed_dictionaries(
        {"parts": st.one_of(st.lists(part, max_size=4), json_values)},
        optional={"role": st.one_of(st.sampled_from(["user", "model"]), json_values)},
    ),
    json_values,
)
bodies = st.one_of(
    st.fixed_dictionaries(
        {"contents": st.one_of(st.lists(content, max_size=6), json_values)},
        optional={
            "systemInstruction": st.one_of(
                st.fixed_dictionaries({"parts": st.lists(part, max_size=2)}), texts, json_values
            ),
            "tools": json_values,
            "generationConfig": json_values,
        },
    ),
    json_values,
)
PATH = "/v1beta/models/gemini-2.5-flash:generateContent"


@pytest.fixture(scope="module")
def edge() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json({"candidates": []})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxy(edge: EdgeUpstream) -> Iterator[FuzzProxy]:
    cfg = settings_from_mapping(
        {
            "upstreams": [{"name": "g", "kind": "gemini", "match": ["gemini-*"],
                           "base_url": edge.url}],
            "pipeline": {"on_rule_error": "fail"},
        }
    )  # fmt: skip
    with fuzz_proxy(cfg, edge) as served:
        yield served


def _post(proxy: FuzzProxy, body: object) -> tuple[int, dict, object]:  # type: ignore[type-arg]
    headers = {"content-type": "application/json", "x-goog-api-key": "k"}
    answer, forwarded = proxy.post(PATH, body, headers)
    return answer.status_code, answer.json(), forwarded


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies)
def test_no_gemini_body_gets_a_5xx(proxy: FuzzProxy, body: object) -> None:
    status, answer, forwarded = _post(proxy, body)
    assert status in (200, 400), (status, answer)
    if status != 200:
        assert set(answer["error"]) == {"code", "message", "status"}
        assert answer["error"]["code"] == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    else:
        assert isinstance(forwarded, dict)
        assert pairing_violations(forwarded["contents"]) == []
