"""``GET /metrics``: Prometheus text format from the official client. Each app gets its own
``CollectorRegistry`` (no process-global metrics), fed by the request observers: ``started`` and
``finished(row)`` with the completed log row."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

from proxy.auth import COOKIE, check_admin
from proxy.errors import (
    ClientGone,
    ProxyError,
    UpstreamFailed,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from proxy.inspect import report_view as rv
from proxy.inspect import usage_view
from proxy.store.base import Store

# The proxy adds milliseconds; upstream calls take seconds. Buckets in seconds.
ADDED_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
UPSTREAM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
MAX_MODEL_LABELS = 100  # model names come from clients: bound the label's cardinality
RESCUE_OUTCOMES = frozenset({"fitted", "failed_again", "floor_too_big", "no_window", "no_gain"})
CACHE_CAUSES = frozenset({"expiry", "client", "proxy", "unexplained", "unknown"})
PAYBACK_OUTCOMES = frozenset({"paid_back", "not_paid_back"})
# a stream's ends the log row names (an exception's class name, a provider's type, is "other":
# the label's values stay few)
STREAM_ERROR_TYPES = frozenset(
    {"upstream_stream_error", UpstreamUnreachable.code, UpstreamTimeout.code, UpstreamFailed.code,
     "stream_max_exceeded", "shutting_down"}
)  # fmt: skip


class _StoreCollector:
    """Reads the store's counts at scrape time (the store owns the numbers)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "ctxproxy_store_write_errors", "Request-log and state writes that failed."
        )
        family.add_metric([], self.store.write_errors)
        yield family
        dropped = CounterMetricFamily(
            "ctxproxy_store_rows_dropped",
            "Log writes dropped unwritten: the buffer was full while the database was away.",
        )
        dropped.add_metric([], self.store.rows_dropped)
        yield dropped
        backlog = GaugeMetricFamily(
            "ctxproxy_store_backlog", "Log writes queued, not in the database yet."
        )
        backlog.add_metric([], getattr(self.store, "backlog", 0))
        yield backlog


class _GcCollector:
    """Reads the process's garbage collections at scrape time from the collector ``ctxproxy
    serve`` runs (``proxy.server.collector``, which hands itself over: ``count_collections``):
    how many, how long they held the interpreter."""

    def __init__(self, counts: Any) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self.counts
        yield CounterMetricFamily(
            "ctxproxy_gc_collections", "Garbage collections run.", value=counts.collections
        )
        yield CounterMetricFamily(
            "ctxproxy_gc_pause_seconds",
            "Time garbage collections held the interpreter (every request waited meanwhile).",
            value=counts.pause_s,
        )
        yield GaugeMetricFamily(
            "ctxproxy_gc_longest_pause_seconds",
            "The longest garbage collection since the server started.",
            value=counts.longest_s,
        )
        yield CounterMetricFamily(
            "ctxproxy_gc_reclaims",
            "Full collections run to collect the cycles among frozen objects.",
            value=counts.reclaims,
        )


class _BodyCollector:
    """Reads each protocol's body memory at scrape time (``proxy.protocols.body_memory``): how
    many bodies were read from the session's last one, and what it holds."""

    def __init__(self, handlers: Mapping[str, Any]) -> None:
        self.handlers = handlers

    def collect(self) -> Iterator[Metric]:
        reused = CounterMetricFamily(
            "ctxproxy_bodies_reused",
            "Request bodies parsed only where they differ from the session's last one.",
            labels=["protocol"],
        )
        held = GaugeMetricFamily(
            "ctxproxy_body_memory_bytes",
            "Bytes charged for the request bodies kept for the sessions' next requests.",
            labels=["protocol"],
        )
        for name, handler in self.handlers.items():
            bodies = getattr(handler, "bodies", None)  # (count_tokens keeps none)
            if bodies is not None:
                reused.add_metric([name], bodies.reused)
                held.add_metric([name], bodies.held_bytes)
        yield reused
        yield held


class _EngineCollector:
    """Reads the engine's counts at scrape time: memoised messages found changed in place by
    the sampled check (``memory.integrity_sample``; each drops its session's memos)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        failures = CounterMetricFamily(
            "ctxproxy_memo_integrity_failures",
            "Sampled requests that found a memoised message changed in place (memos dropped).",
        )
        failures.add_metric([], self.engine.integrity.failures)
        yield failures


class Metrics:
    """The proxy's metrics; an observer of requests (see proxy.telemetry.observe)."""

    def __init__(
        self,
        store: Store | None = None,
        handlers: Mapping[str, Any] | None = None,
        engine: Any = None,
    ) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "ctxproxy_requests",
            "Requests by HTTP status and model.",
            ["status", "model"],
            registry=r,
        )
        self.added = Histogram(
            "ctxproxy_added_latency_seconds",
            "Time the proxy adds before forwarding.",
            buckets=ADDED_BUCKETS,
            registry=r,
        )
        self.upstream = Histogram(
            "ctxproxy_upstream_latency_seconds",
            "Time spent upstream (latency minus overhead).",
            buckets=UPSTREAM_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "ctxproxy_tokens",
            "Billed input tokens (system, tools schema and messages, in the proxy's count) as the "
            "client sent them (before) and as forwarded (after).",
            ["when"],
            registry=r,
        )
        self.cached = Counter(
            "ctxproxy_cached_tokens",
            "Prompt tokens the upstream served from its cache.",
            registry=r,
        )
        self.freed = Counter(
            "ctxproxy_tokens_freed", "Tokens freed by pruning, by stage.", ["stage"], registry=r
        )
        self.repairs = Counter(
            "ctxproxy_repairs", "Tool-chain repairs by kind.", ["kind"], registry=r
        )
        self.loops = Counter(
            "ctxproxy_loops", "Loops broken by a note (break_loops), by kind.", ["kind"], registry=r
        )
        self.rescues = Counter(
            "ctxproxy_overflow_rescues",
            "Upstream 'prompt too long' answers, by what the proxy's rescue made of them.",
            ["outcome"],
            registry=r,
        )
        self.rebilled = Counter(
            "ctxproxy_cache_rebilled_tokens",
            "Prompt tokens the cache held for a request and did not serve, billed again, by "
            "cause (expiry, client, proxy, unexplained).",
            ["cause"],
            registry=r,
        )
        self.busts = Counter(
            "ctxproxy_cache_busts",
            "Requests whose cache read fell, by cause.",
            ["cause"],
            registry=r,
        )
        self.stream_errors = Counter(
            "ctxproxy_stream_errors",
            "Answers begun with a 2xx that ended in an error (a stream cut off, an error event), "
            "by the log row's error_type.",
            ["error_type"],
            registry=r,
        )
        self.compactions = Counter(
            "ctxproxy_compactions",
            "Compactions whose account was settled: paid_back (later requests saved at least "
            "their re-bill) or not_paid_back (the session compacted again first).",
            ["outcome"],
            registry=r,
        )
        self.in_flight = Gauge(
            "ctxproxy_in_flight_requests", "Requests being handled now.", registry=r
        )
        # counted in a plain int, read at scrape time: the gauge's inc and dec take its lock
        self._in_flight = 0
        self.in_flight.set_function(lambda: self._in_flight)
        self._models: set[str] = set()
        # labelled children by (metric, label values): ``labels()`` checks and locks each call
        self._children: dict[tuple[Any, ...], Any] = {}
        if store is not None:
            r.register(_StoreCollector(store))
        if handlers is not None:
            r.register(_BodyCollector(handlers))
        if engine is not None:
            r.register(_EngineCollector(engine))

    def count_collections(self, counts: Any) -> None:
        """Serve the garbage collections ``counts`` (the process's collector) keeps."""
        self.registry.register(_GcCollector(counts))

    def _model(self, model: Any, status: Any, upstream: Any = None) -> str:
        """The model's label: its name once an upstream answered a request of it (``upstream``
        named, a 2xx status), at most ``MAX_MODEL_LABELS`` names; else ``other``. Names come
        from clients: were every name labelled, one tenant's requests of 100 made-up models
        (each refused, or failed by an upstream that is down or answers 5xx to names it does not
        know) would leave every other tenant's real models under ``other`` until the proxy
        restarts. A 200 the proxy gave itself (a count of tokens for a model no Anthropic or
        Gemini upstream serves, counted here whatever the name) vouches for no name either."""
        if not model:
            return "none"
        name = str(model)
        if name in self._models:
            return name
        served = bool(upstream) and isinstance(status, int) and 200 <= status < 300
        if not served or len(self._models) >= MAX_MODEL_LABELS:
            return "other"
        self._models.add(name)
        return name

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, looked up once: the client library hands back the same
        child for the same values, so keeping it changes nothing but the cost."""
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def started(self) -> None:
        self._in_flight += 1

    def finished(self, row: dict[str, Any]) -> None:
        self._in_flight -= 1
        status = row.get("status")
        label = self._model(row.get("model"), status, row.get("upstream"))
        self._child(self.requests, str(status), label).inc()
        failed = row.get("error_type")
        began = isinstance(status, int) and 200 <= status < 300
        if failed and began and failed != ClientGone.code:  # a client that left: not counted
            label = failed if failed in STREAM_ERROR_TYPES else "other"
            self._child(self.stream_errors, label).inc()
        if row.get("overhead_ms") is not None:
            self.added.observe(float(row["overhead_ms"]) / 1000)
        up = usage_view.upstream_ms(row)
        if up is not None:
            self.upstream.observe(up / 1000)
        for when in ("before", "after"):
            billed = rv.billed(row, when)  # the messages plus the tools schema
            if billed:
                self._child(self.tokens, when).inc(billed)
        if row.get("cached_tokens"):
            self.cached.inc(row["cached_tokens"])
        report = rv.report_of(row)
        for stage, freed in rv.freed_by_stage(report).items():
            self._child(self.freed, stage).inc(freed)
        for kind, n in rv.repair_kinds(report).items():
            self._child(self.repairs, kind).inc(n)
        for kind, n in rv.loop_kinds(report).items():
            self._child(self.loops, kind).inc(n)
        self._cache(row.get("cache"))
        rescue = report.get("rescue")
        if isinstance(rescue, dict) and rescue.get("outcome") in RESCUE_OUTCOMES:
            self._child(self.rescues, rescue["outcome"]).inc()

    def _cache(self, line: Any) -> None:
        """The request's cache line (``proxy.attribution``): its re-bill and settled accounts."""
        if not isinstance(line, dict):
            return
        cause = line.get("cause")
        if cause in CACHE_CAUSES:
            self._child(self.busts, cause).inc()
            rebilled = line.get("rebilled")
            if isinstance(rebilled, int) and rebilled > 0:
                self._child(self.rebilled, cause).inc(rebilled)
        for outcome in line.get("decided") or ():
            if outcome in PAYBACK_OUTCOMES:
                self._child(self.compactions, outcome).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def setup(app: Any, services: Any) -> None:
    """Setup hook (run in the lifespan): one Metrics per app, subscribed to the requests."""
    app.state.metrics = Metrics(
        services.store, getattr(app.state, "handlers", None), getattr(services, "engine", None)
    )
    services.observers.add(app.state.metrics)


async def metrics_endpoint(request: Request) -> Response:
    """Behind the admin key when one is set (bearer), else loopback clients only unless
    ``ui.public``: the same rule as /ui (``proxy.auth.check_admin``)."""
    settings = request.app.state.services.settings
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        check_admin(
            settings.auth,
            settings.ui.public,
            headers,
            request.scope.get("client"),
            request.cookies.get(COOKIE),
            time.time(),
        )
    except ProxyError as exc:
        return Response(exc.body_bytes(), exc.status, media_type="application/json")
    return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
