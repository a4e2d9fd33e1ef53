"""GET /v1/models: the catch-all upstream's list plus configured names; no cookie jar shared
between clients; a broken list falls back to the configured names; an auth failure passes
through."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from proxy.app import create_app
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import Reply
from tests.support.live import serve_in_thread, stop

UPSTREAM = "http://upstream.test/v1"  # for requests that never reach an upstream


def settings(upstream: str = UPSTREAM):
    return proxy_settings(
        upstream,
        upstreams=[
            {"name": "named", "match": ["local-model"], "base_url": upstream},
            {"name": "all", "match": ["*"], "base_url": upstream},
        ],
    )


async def test_upstream_cookies_are_not_replayed_to_other_clients(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(
        {"object": "list", "data": [{"id": "m1"}]}, set_cookie="session=client-a-secret; Path=/"
    )
    base = edge.base_url.replace("127.0.0.1", "localhost")  # cookie jars skip IP addresses
    async with in_process(settings(base), str(tmp_path / "db")) as client:
        for auth in ("Bearer client-a", "Bearer client-b"):
            r = await client.get("/v1/models", headers={"authorization": auth})
            assert r.status_code == 200
    assert [s.target for s in edge.seen] == ["/v1/models", "/v1/models"]
    assert edge.seen[1].header("cookie") is None
    assert edge.seen[1].header("authorization") == "Bearer client-b"


@pytest.mark.parametrize(
    "listed",
    [
        {"object": "list", "data": None},
        {"object": "list", "data": "x"},
        {"object": "list"},
        [1, 2],
        "text",
        {"object": "list", "data": [5, None, {"id": 7}, {"id": "m1"}]},
        {"object": "list", "data": [{"id": ["x"]}, {"id": {"a": 1}}, {"id": "m1"}]},  # unhashable
    ],
)
async def test_malformed_upstream_lists_fall_back(tmp_path: Path, edge, listed) -> None:
    edge.reply = Reply.json(listed)
    async with in_process(settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models")
        assert r.status_code == 200
        ids = [m["id"] for m in r.json()["data"] if isinstance(m, dict)]
        assert "local-model" in ids


@pytest.mark.parametrize("status", [401, 403])
async def test_upstream_auth_failures_pass_through(tmp_path: Path, edge, status) -> None:
    err = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    edge.reply = Reply.json(err, status)
    async with in_process(settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models", headers={"authorization": "Bearer wrong"})
        assert r.status_code == status and r.json() == err


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/nope", 404),
        ("POST", "/v1/files", 404),
        ("GET", "/v1/chat/completions", 405),
        ("DELETE", "/v1/models", 405),
    ],
)
async def test_unknown_routes_answer_in_openai_shape(
    tmp_path: Path, method: str, path: str, status: int
) -> None:
    async with in_process(settings(), str(tmp_path / "db")) as client:
        r = await client.request(method, path)
        assert r.status_code == status
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error" and path in error["message"]
        if status == 405:
            assert "allow" in r.headers


async def test_an_unreachable_upstream_is_said_not_hidden(tmp_path: Path) -> None:
    dead = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    async with in_process(settings(dead), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models")
    assert r.status_code == 200
    body = r.json()
    assert [m["id"] for m in body["data"]] == ["local-model"]
    assert body["ctxproxy_unlisted"]["upstream"] == "all"
    assert "could not list its models" in body["ctxproxy_unlisted"]["error"]
    assert r.headers["x-ctxproxy-upstream-unlisted"] == "all"


async def test_a_listed_upstream_carries_no_warning(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json({"object": "list", "data": [{"id": "m1"}]})
    async with in_process(settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models")
    assert "ctxproxy_unlisted" not in r.json()
    assert "x-ctxproxy-upstream-unlisted" not in r.headers


async def test_a_model_list_past_its_bound_is_not_read(tmp_path: Path, edge) -> None:
    entries = [{"id": f"model-{i:07d}-" + "x" * 90} for i in range(90_000)]  # ~9.5 MiB
    edge.reply = Reply.json({"object": "list", "data": entries})
    async with in_process(settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models")
    assert r.status_code == 200
    body = r.json()
    assert [m["id"] for m in body["data"]] == ["local-model"]
    assert "larger than 8 MiB" in body["ctxproxy_unlisted"]["error"]


def _both(edge) -> object:
    """Claude models natively to ``edge`` as Anthropic, ``local-model`` and the rest to it as
    OpenAI's: one fake for both, so where each list request went is in ``edge.seen``."""
    return proxy_settings(
        edge.base_url,
        upstreams=[
            {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url},
            {"name": "named", "match": ["local-model"], "base_url": edge.base_url},
            {"name": "all", "match": ["*"], "base_url": edge.base_url},
        ],
    )


ANTHROPIC_LIST = {
    "data": [{"type": "model", "id": "claude-x", "display_name": "Claude X",
              "created_at": "2025-01-01T00:00:00Z"}],
    "has_more": False, "first_id": "claude-x", "last_id": "claude-x",
}  # fmt: skip


def test_the_anthropic_sdk_gets_the_anthropic_upstreams_list(tmp_path: Path, edge) -> None:
    """The Anthropic SDK's ``models.list()``: its key went to the OpenAI upstream, and the list
    that came back was OpenAI's."""
    import anthropic

    from proxy.app import create_app
    from tests.support.live import serve_in_thread, stop

    edge.reply = Reply.json(ANTHROPIC_LIST)
    server, base = serve_in_thread(create_app(_both(edge), db_path=str(tmp_path / "db")))
    try:
        sdk = anthropic.Anthropic(api_key="sk-ant-secret", base_url=base, max_retries=0)
        page = sdk.models.list(limit=5)
    finally:
        stop(server)
    assert [m.id for m in page.data] == ["claude-x"]
    (seen,) = edge.seen
    assert seen.target == "/v1/models?limit=5"  # the Anthropic upstream's path, its page asked
    assert seen.header("authorization") == "Bearer sk-ant-secret"  # as the SDK sent it


async def test_without_an_anthropic_upstream_the_names_come_in_anthropics_shape(
    tmp_path: Path,
) -> None:
    async with in_process(settings(), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models", headers={"anthropic-version": "2023-06-01",
                                                    "x-api-key": "sk-ant-secret"})  # fmt: skip
    assert r.status_code == 200
    assert r.json() == {
        "data": [{"type": "model", "id": "local-model", "display_name": "local-model",
                  "created_at": "1970-01-01T00:00:00Z"}],
        "has_more": False, "first_id": "local-model", "last_id": "local-model",
    }  # fmt: skip


async def test_googles_sdk_on_v1_gets_geminis_shape_and_no_upstream_sees_its_key(
    tmp_path: Path, edge
) -> None:
    async with in_process(_both(edge), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models", headers={"x-goog-api-key": "AIza-secret"})
    assert r.status_code == 200
    assert r.json()["models"][0]["name"] == "models/local-model"
    assert edge.seen == []


@pytest.mark.parametrize(
    ("headers", "shape"),
    [
        ({"anthropic-version": "2023-06-01"}, "anthropic"),  # models.retrieve, files
        ({"x-goog-api-key": "AIza-x"}, "gemini"),  # google-genai on its v1 API
        ({}, "openai"),
    ],
)
async def test_an_unknown_path_answers_in_the_asking_clients_shape(
    tmp_path: Path, headers: dict[str, str], shape: str
) -> None:
    """The SDKs read their own error shape: an Anthropic or Gemini client got OpenAI's."""
    async with in_process(settings(), str(tmp_path / "db")) as client:
        r = await client.get("/v1/files/f1", headers=headers)
    assert r.status_code == 404
    body = r.json()
    if shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    elif shape == "gemini":
        assert body["error"]["status"] == "NOT_FOUND" and body["error"]["code"] == 404
    else:
        assert body["error"]["code"] == "not_found"


@pytest.mark.parametrize("anthropic", [False, True])
async def test_a_redirect_is_no_list(tmp_path: Path, edge, anthropic: bool) -> None:
    """A redirect is not followed (it carries the key) and is not relayed either: the chat
    paths answer 502 for it, and so does the model list (it relayed a 302 with no Location)."""
    edge.reply = Reply(status=302, headers=[("location", "http://elsewhere.test/")], body=b"")
    upstreams = [{"name": "all", "match": ["*"], "base_url": edge.base_url}]
    if anthropic:
        upstreams.insert(0, {"name": "a", "match": ["claude-*"], "kind": "anthropic",
                             "base_url": edge.base_url.removesuffix("/v1")})  # fmt: skip
    headers = {"anthropic-version": "2023-06-01"} if anthropic else {}
    async with in_process(
        proxy_settings(edge.base_url, upstreams=upstreams), str(tmp_path / "db")
    ) as client:
        r = await client.get("/v1/models", headers=headers)
    if anthropic:
        assert r.status_code == 502 and r.json()["type"] == "error"
    else:
        assert r.status_code == 200 and "302" in r.json()["ctxproxy_unlisted"]["error"]


async def test_an_anthropic_list_sends_its_paging_parameters_only(tmp_path: Path, edge) -> None:
    """The client's whole query went upstream with the server's credential (``api-version``,
    ``key``, a path-like value): only the list's own paging goes."""
    edge.reply = Reply.json({"data": [], "has_more": False, "first_id": None, "last_id": None})
    claude = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    upstreams = [claude]
    async with in_process(proxy_settings(edge.base_url, upstreams=upstreams),
                          str(tmp_path / "db")) as client:  # fmt: skip
        r = await client.get(
            "/v1/models?limit=5&api-version=2099-01-01&key=k-123&x=%2F..%2F&after_id=claude-a",
            headers={"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-test-000001"},
        )
    assert r.status_code == 200, r.text
    assert edge.seen[-1].target == "/v1/models?limit=5&after_id=claude-a"


async def test_the_openai_sdk_retrieves_one_model(tmp_path: Path, edge) -> None:
    """``client.models.retrieve``: the entry of the list ``GET /v1/models`` gives (the upstream's
    or a configured name); a name in neither is OpenAI's 404 ``model_not_found``."""
    edge.reply = Reply.json({"object": "list", "data": [{"id": "m1", "object": "model"}]})
    async with in_process(settings(edge.base_url), str(tmp_path / "db")) as client:
        sdk = openai.AsyncOpenAI(base_url="http://localhost/v1", api_key="k", http_client=client)
        upstreams = await sdk.models.retrieve("m1")
        configured = await sdk.models.retrieve("local-model")
        with pytest.raises(openai.NotFoundError) as missing:
            await sdk.models.retrieve("no-such-model")
    assert upstreams.id == "m1" and configured.id == "local-model"
    assert configured.owned_by == "ctxproxy"
    assert missing.value.code == "model_not_found"
    assert [s.target for s in edge.seen] == ["/v1/models"] * 3  # the list, with the client's key
    assert edge.seen[0].header("authorization") == "Bearer k"


def test_the_anthropic_sdk_retrieves_one_model(tmp_path: Path, edge) -> None:
    """``client.models.retrieve`` with an Anthropic upstream: its own answer for the name, the
    name one quoted segment under its ``/v1/models`` (nothing else of the request in the URL)."""
    cfg = proxy_settings(
        edge.base_url,
        upstreams=[{"name": "claude", "kind": "anthropic", "match": ["claude-*"],
                    "base_url": edge.base_url.removesuffix("/v1")}],
    )  # fmt: skip
    edge.reply = Reply.json(
        {"type": "model", "id": "claude-x", "display_name": "Claude X",
         "created_at": "2025-01-01T00:00:00Z"}
    )  # fmt: skip
    server, url = serve_in_thread(create_app(cfg, db_path=str(tmp_path / "db"), strict=True))
    try:
        sdk = anthropic.Anthropic(base_url=url, api_key="sk-ant-k", max_retries=0)
        one = sdk.models.retrieve("claude-x")
        httpx.get(f"{url}/v1/models/a%3Fb?after_id=z", headers={"anthropic-version": "1"})
    finally:
        stop(server)
    assert one.id == "claude-x" and one.display_name == "Claude X"
    assert edge.seen[0].target == "/v1/models/claude-x"
    sent = edge.seen[0]
    assert "sk-ant-k" in (sent.header("x-api-key") or sent.header("authorization") or "")
    assert edge.seen[1].target == "/v1/models/a%3Fb"  # its query is not the upstream's


def test_the_anthropic_sdk_without_its_upstream_gets_configured_names(tmp_path: Path) -> None:
    server, url = serve_in_thread(create_app(settings(), db_path=str(tmp_path / "db"), strict=True))
    try:
        sdk = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        one = sdk.models.retrieve("local-model")
        with pytest.raises(anthropic.NotFoundError):
            sdk.models.retrieve("claude-none")
    finally:
        stop(server)
    assert one.id == "local-model"
