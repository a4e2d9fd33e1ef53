"""``GET /metrics``: Prometheus text from a live proxy, parsed with the official client's parser."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.telemetry.metrics import MAX_MODEL_LABELS, Metrics
from tests.conftest import proxy_settings
from tests.proxy.inspect.test_show import realistic_row
from tests.support.factories import request, system, user


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed: dict, name: str, **labels: str) -> float:
    return parsed.get((name, frozenset(labels.items())), 0.0)


def test_metrics_after_a_few_requests(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    url = proxy.base_url + "/chat/completions"
    ids = []
    for text in ("one", "two"):
        r = httpx.post(url, json=request(system(), user(text)), headers={"x-session-id": "m"})
        assert r.status_code == 200
        ids.append(r.headers["x-ctxproxy-request-id"])
    bad = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400
    fake_upstream.script.status = 500
    failed = httpx.post(url, json=request(user("three"), model="gpt-4o-mini"))
    assert failed.status_code == 500
    rows = [proxy.row(i) for i in ids] + [proxy.row(failed.headers["x-ctxproxy-request-id"])]

    r = httpx.get(proxy.url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    m = samples(r.text)
    assert value(m, "ctxproxy_requests_total", status="200", model="gpt-4o") == 2
    # never answered yet: not labelled (an upstream's 5xx to made-up names takes no label)
    assert value(m, "ctxproxy_requests_total", status="500", model="other") == 1
    assert value(m, "ctxproxy_requests_total", status="400", model="none") == 1
    assert value(m, "ctxproxy_in_flight_requests") == 0
    assert value(m, "ctxproxy_added_latency_seconds_count") == 4
    assert value(m, "ctxproxy_added_latency_seconds_bucket", le="+Inf") == 4
    # Upstream latency only for requests that reached an upstream (not the 400).
    assert value(m, "ctxproxy_upstream_latency_seconds_count") == 3
    before = sum(row["tokens_before"] for row in rows)
    assert value(m, "ctxproxy_tokens_total", when="before") == before > 0
    assert value(m, "ctxproxy_tokens_total", when="after") == sum(r["tokens_after"] for r in rows)
    assert value(m, "ctxproxy_cached_tokens_total") == 10  # 5 per successful fake response
    assert value(m, "ctxproxy_store_write_errors_total") == 0
    assert value(m, "ctxproxy_memo_integrity_failures_total") == 0  # the engine's, read at scrape
    # Families exist before any pruning or repair happened (so dashboards do not break).
    assert "ctxproxy_tokens_freed" in r.text and "ctxproxy_repairs" in r.text


def _row(**over: Any) -> dict[str, Any]:
    row = realistic_row()
    row.update(status=200, latency_ms=812.5, cached_tokens=384)
    row.update(over)
    return row


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [_row()],
            {
                ("ctxproxy_tokens_freed_total", (("stage", "supersede"),)): 395,
                ("ctxproxy_repairs_total", (("kind", "missing_result"),)): 1,
                ("ctxproxy_upstream_latency_seconds_sum", ()): 0.810766,
            },
        ),
        (
            [_row(), _row()],
            {
                ("ctxproxy_tokens_freed_total", (("stage", "supersede"),)): 790,
                ("ctxproxy_cached_tokens_total", ()): 768,
            },
        ),
        (
            [
                _row(
                    report={
                        "pruning": [
                            {"action": "mask", "tokens_freed": 40},
                            {"action": "drop_turn", "tokens_freed": 60},
                        ],
                        "repairs": [
                            {"kind": "orphan_result"},
                            {"kind": "orphan_result"},
                            {"kind": "duplicate_id"},
                        ],
                    }
                )
            ],
            {
                ("ctxproxy_tokens_freed_total", (("stage", "mask"),)): 40,
                ("ctxproxy_tokens_freed_total", (("stage", "drop_turn"),)): 60,
                ("ctxproxy_repairs_total", (("kind", "orphan_result"),)): 2,
                ("ctxproxy_repairs_total", (("kind", "duplicate_id"),)): 1,
            },
        ),
        (
            [_row(report=None, upstream=None, latency_ms=2.0, status=401, tokens_before=None)],
            {
                # refused, of a model never served: not a label of its own
                ("ctxproxy_requests_total", (("model", "other"), ("status", "401"))): 1,
                ("ctxproxy_upstream_latency_seconds_count", ()): 0,
                ("ctxproxy_tokens_total", (("when", "before"),)): 0,
            },
        ),
    ],
)
def test_metrics_from_report_rows(rows: list[dict[str, Any]], expected: dict) -> None:
    metrics = Metrics()
    for row in rows:
        metrics.started()
        metrics.finished(row)
    m = samples(metrics.exposition().decode())
    for (name, labels), want in expected.items():
        assert value(m, name, **dict(labels)) == pytest.approx(want), name


def test_model_label_cardinality_is_bounded() -> None:
    metrics = Metrics()
    for i in range(MAX_MODEL_LABELS + 5):
        metrics.finished({"status": 200, "model": f"model-{i}", "upstream": "fake"})
    m = samples(metrics.exposition().decode())
    models = {dict(labels)["model"] for name, labels in m if name == "ctxproxy_requests_total"}
    assert len(models) == MAX_MODEL_LABELS + 1 and "other" in models
    assert value(m, "ctxproxy_requests_total", status="200", model="other") == 5


def test_made_up_model_names_never_take_the_labels_of_served_models() -> None:
    metrics = Metrics()
    metrics.finished({"status": 200, "model": "gpt-4o", "upstream": "fake"})
    for i in range(MAX_MODEL_LABELS + 5):  # one tenant's requests of models nobody serves
        metrics.finished({"status": 404, "model": f"junk-{i}"})
        metrics.finished({"status": 400, "model": f"junk-{i}"})
        metrics.finished({"status": 502, "model": f"down-{i}"})  # the upstream away, or 5xx
        metrics.finished({"status": 500, "model": f"down-{i}"})
    metrics.finished({"status": 200, "model": "claude-sonnet-4-5", "upstream": "fake"})
    metrics.finished({"status": 429, "model": "gpt-4o"})  # a served model's errors: its label
    m = samples(metrics.exposition().decode())
    models = {dict(labels)["model"] for name, labels in m if name == "ctxproxy_requests_total"}
    assert models == {"gpt-4o", "claude-sonnet-4-5", "other"}
    assert value(m, "ctxproxy_requests_total", status="404", model="other") == MAX_MODEL_LABELS + 5
    assert value(m, "ctxproxy_requests_total", status="429", model="gpt-4o") == 1


def test_in_flight_gauge_counts_requests_started_and_not_finished() -> None:
    metrics = Metrics()
    metrics.started()
    metrics.started()
    assert value(samples(metrics.exposition().decode()), "ctxproxy_in_flight_requests") == 2
    metrics.finished({"status": 200, "model": "x"})
    assert value(samples(metrics.exposition().decode()), "ctxproxy_in_flight_requests") == 1


def test_each_app_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    a.finished({"status": 200, "model": "x"})
    assert (
        value(samples(b.exposition().decode()), "ctxproxy_requests_total", status="200", model="x")
        == 0
    )


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"authorization": "Bearer wrong-admin-key"}, 401),
        ({"authorization": "Bearer proxy-client-key"}, 401),
        ({"authorization": "Bearer the-admin-key-123"}, 200),
    ],
)
def test_metrics_need_the_admin_key_in_keys_mode(
    live_proxy, fake_upstream, monkeypatch, headers, status
) -> None:
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", "the-admin-key-123")
    monkeypatch.setenv("CTXPROXY_KEYS", "proxy-client-key")
    proxy = live_proxy(
        proxy_settings(
            fake_upstream.base_url,
            auth={"mode": "keys"},
            upstreams=[
                {"name": "fake", "base_url": fake_upstream.base_url, "api_key_env": "FAKE_KEY"}
            ],
        )
    )
    r = httpx.get(proxy.url + "/metrics", headers=headers)
    assert r.status_code == status
    if status == 200:
        assert "ctxproxy_requests" in r.text


def test_metrics_count_what_the_live_rules_did(live_proxy) -> None:
    from proxy.inspect import report_view as rv
    from tests.proxy.inspect.test_show import agent_history

    proxy = live_proxy(pipeline={"on_rule_error": "fail", "budget_tokens": 2000})
    r = httpx.post(proxy.base_url + "/chat/completions", json=request(*agent_history()))
    report = proxy.row(r.headers["x-ctxproxy-request-id"])["report"]
    stages, kinds = rv.freed_by_stage(report), rv.repair_kinds(report)
    assert stages and kinds, "today's rules prune and repair this request"
    m = samples(httpx.get(proxy.url + "/metrics").text)
    for stage, freed in stages.items():
        assert value(m, "ctxproxy_tokens_freed_total", stage=stage) == freed
    for kind, n in kinds.items():
        assert value(m, "ctxproxy_repairs_total", kind=kind) == n


def test_a_stream_that_began_well_and_ended_in_an_error_is_counted() -> None:
    """A stream cut off or ending in an error event is logged with status 200 and an
    error_type: /metrics counted it a success, so an upstream cutting its streams raised no
    alert. Counted by type (an exception's name is "other"); a client that left is not."""
    metrics = Metrics()
    for error_type in ("upstream_stream_error", "upstream_connection_error",
                       "MidStreamFallbackError", "client_disconnected", None):  # fmt: skip
        metrics.finished({"status": 200, "model": "gpt-4o", "error_type": error_type})
    metrics.finished({"status": 502, "model": "gpt-4o", "error_type": "upstream_error"})
    m = samples(metrics.exposition().decode())
    assert value(m, "ctxproxy_stream_errors_total", error_type="upstream_stream_error") == 1
    assert value(m, "ctxproxy_stream_errors_total", error_type="upstream_connection_error") == 1
    assert value(m, "ctxproxy_stream_errors_total", error_type="other") == 1
    labels = {dict(lb)["error_type"] for name, lb in m if name == "ctxproxy_stream_errors_total"}
    assert labels == {"upstream_stream_error", "upstream_connection_error", "other"}


def test_token_counts_the_proxy_answers_itself_take_no_model_label(
    live_proxy, fake_upstream
) -> None:
    """A count of tokens for a model no Anthropic or Gemini upstream serves is answered by the
    proxy (200) whatever the name: one tenant's counts under 105 made-up names took every model
    label, and another tenant's served model was counted as ``other`` until a restart."""
    proxy = live_proxy()
    counted = {"messages": [{"role": "user", "content": "hi"}]}
    headers = {"anthropic-version": "2023-06-01"}
    for i in range(MAX_MODEL_LABELS + 5):
        r = httpx.post(
            proxy.url + "/v1/messages/count_tokens",
            json={**counted, "model": f"made-up-{i}"},
            headers=headers,
        )
        assert r.status_code == 200 and "x-ctxproxy-request-id" in r.headers
    gemini = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    r = httpx.post(proxy.url + "/v1beta/models/made-up-gemini:countTokens", json=gemini)
    assert r.status_code == 200, r.text
    served = httpx.post(proxy.base_url + "/chat/completions", json=request(user("hi")))
    assert served.status_code == 200
    m = samples(httpx.get(proxy.url + "/metrics").text)
    assert value(m, "ctxproxy_requests_total", status="200", model="gpt-4o") == 1
    assert value(m, "ctxproxy_requests_total", status="200", model="other") == MAX_MODEL_LABELS + 6
