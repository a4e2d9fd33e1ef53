"""Where the common request's added time goes: each stage of one request, timed in-process.

    .venv/bin/python -m bench.overhead_stages [--messages 20] [--requests 2000] [--stream]
    .venv/bin/python -m bench.overhead_stages --protocol gemini   # messages, responses, chat
    .venv/bin/python -m bench.overhead_stages --profile 40     # cProfile's top 40 instead
    .venv/bin/python -m bench.overhead_stages --without-writes # the writer's batches dropped

The app ``ctxproxy serve`` runs (``create_app`` with its lifespan, the request log on a file, the
garbage collector set as the server sets it) and the floor's handler (``bench.bare_relay``) are
called as ASGI apps in this process, in alternation, with the bench's chat body
(``bench.overhead_protocols.bodies``: 20 messages and Claude Code's tools, one session; with
``--protocol``, that protocol's, through its own handler and adapter); the
upstream is ``bench.upstream_server`` on loopback, called through the real upstream client. The
stages are the functions the handler calls, wrapped with ``perf_counter`` (inclusive: a stage's
time holds the stages it calls), one request at a time as a client at concurrency 1 sends them
(the writer task wakes when its batch window ends, as in the server). The server's own HTTP
parsing (uvicorn) is the same for both and not in these figures (``bench.overhead_protocols``
measures over HTTP). The writer task's work (``paced_statements``: redacting and encoding the
rows; the batch's write) comes after the request's answer, on the same loop: shown per request
(a batch's whole time falls to the request during which it ran).

Beside the wall times: each call's thread CPU time (what runs on the loop during it, the work after
the answer included) and its thread CPU until its upstream call began (``wire.forward``: what the
client waits on; the rewrite's finish runs while the upstream reads the request), each stage's mean
over the slowest 1% of ctxproxy's requests (where the tail comes from), and the garbage collector's
runs while measuring. Two trees compare in the same minutes by running this file with the other tree
first on the path (``cd /tmp/base && PYTHONPATH=/tmp/base python
/path/to/bench/overhead_stages.py``).

With ``--without-writes`` the store's writer drops its batches (nothing redacted, encoded or sent
to the connection's thread): the difference to a run with them is what the writer's work costs
the requests, in their tail above all.

Wall time on a shared machine swings: read the medians, and the difference to the floor."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import dataclasses
import functools
import gc
import inspect
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import orjson

from bench.bare_relay import create_bare_app
from bench.overhead import percentile, start
from bench.overhead_protocols import PATHS, bodies, ctxproxy_config, path_of
from tests.support.live import free_port

WINDOW = 128_000


class Stages:
    """Per-request inclusive times of the wrapped functions (ms), and the writer's."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}
        self.per_request: list[dict[str, float]] = []
        self.enabled = True
        # rows the writer encoded in a lull / while a request was being handled
        self.rows_encoded = {False: 0, True: 0}
        # statements and commits the writer sent to its connection's thread, likewise
        self.thread_calls = {False: 0, True: 0}

    def add(self, name: str, ms: float) -> None:
        if self.enabled:
            self.current[name] = self.current.get(name, 0.0) + ms

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        stages = self
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    stages.add(name, (time.perf_counter() - t0) * 1000)

            return timed_async

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                stages.add(name, (time.perf_counter() - t0) * 1000)

        return timed

    def patch(self, owner: Any, attr: str, name: str) -> None:
        wrapped = self.wrap(name, getattr(owner, attr))
        try:
            setattr(owner, attr, wrapped)
        except (AttributeError, TypeError, ValueError):  # a frozen dataclass, a pydantic model
            object.__setattr__(owner, attr, wrapped)

    def next_request(self) -> None:
        self.per_request.append(self.current)
        self.current = {}


class GcWatch:
    """The garbage collector's runs while measuring: how many of each generation, how long."""

    def __init__(self) -> None:
        self.runs: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._began = 0.0

    def _note(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.runs[info["generation"]].append((time.perf_counter() - self._began) * 1000)

    def start(self) -> None:
        gc.callbacks.append(self._note)

    def stop(self) -> None:
        gc.callbacks.remove(self._note)

    def summary(self) -> str:
        parts = [
            f"gen{g}: {len(ms)} runs, longest {max(ms, default=0.0):.2f} ms"
            for g, ms in self.runs.items()
        ]
        return "garbage collections while measuring: " + "; ".join(parts)


def instrument(stages: Stages, app: Any, protocol: str = "chat") -> None:
    """Wrap the stages of the protocol's handler and of what it calls."""
    import proxy.rewrite.engine as engine_mod
    import proxy.server.handler as handler_mod
    import proxy.server.stream_relay as stream_relay_mod
    import proxy.store.sqlite as sqlite_mod
    from proxy.rewrite.engine import Engine
    from proxy.server.handler import ProtocolHandler

    services = app.state.services
    handler = app.state.handlers[protocol]
    p = stages.patch
    p(handler_mod, "header_dict", "headers")
    p(services.principals, "of", "auth")
    p(handler_mod, "read_body", "receive (ASGI)")
    p(handler_mod, "read_body_json", "body memory (parse, validate)")
    p(handler_mod, "redact_text", "model redaction")
    p(handler_mod, "header_session", "session header")
    p(services.settings, "upstream_for", "routing")
    p(services.engine, "prepare", "rewrite (all, to the body forwarded)")
    adapter = handler.wire.adapter
    p(adapter, "lower", "  lower")
    p(engine_mod, "session_key", "  session key")
    p(services.store, "session", "  session hold (enter)")  # the context manager's creation
    p(services.store, "load_state", "  session lookup")
    p(services.store.cache_feedback, "get", "  cache feedback")
    p(Engine, "_run", "  pipeline (rules)")
    from rules.context.prune_plan import Run

    p(Run, "plan", "    prune's look for a compaction that pays (its plan)")
    p(services.engine.costs, "summary", "  cache summary (report)")
    p(engine_mod, "redact_state", "  state redaction")
    p(services.store, "save_state", "  state save (queued)")
    p(Engine, "_lift", "  lift, checks")
    p(services.engine.ledger, "begin", "  cache attribution (this request's facts)")
    from proxy.rewrite.prepared import Prepared

    p(Prepared, "_complete", "rewrite's finish, the upstream call under way (save, attribution)")
    p(services.store, "insert_request", "log row queued")
    handler.wire = dataclasses.replace(
        handler.wire, forward=stages.wrap("upstream call (send, wait, read)", handler.wire.forward)
    )
    p(handler_mod, "rescue_overflow", "overflow check")
    p(ProtocolHandler, "_answer", "answer (relay, row completion)")
    p(handler_mod, "relay_stream", "answer (relay, row completion)")  # a streamed answer's
    p(handler_mod, "raw_headers", "  response headers")
    p(stream_relay_mod, "raw_headers", "  response headers")
    p(stream_relay_mod, "note_cache_usage", "  cache feedback noted")
    p(handler_mod, "usage_of", "  usage read")
    p(handler_mod, "note_cache_usage", "  cache feedback noted")
    p(handler, "_fields", "  row completion fields")
    p(handler_mod, "with_cache_line", "  cache line (attribution settled)")
    p(services.store, "finish_request", "  row completion queued")
    for observer in services.observers.observers:
        p(observer, "finished", f"  observer {type(observer).__name__}")
    import proxy.store.batch as batch_mod

    p(batch_mod, "encode_row", "  writer: a row's redaction and encoding")
    lull = services.store.lull
    encode_row = batch_mod.encode_row

    def counted(row: dict[str, Any]) -> dict[str, Any]:  # where the writer's work lands
        stages.rows_encoded[bool(lull.open)] += 1
        return encode_row(row)  # type: ignore[no-any-return]

    batch_mod.encode_row = counted
    writer = services.store.writer
    execute = writer._execute

    async def sent(*args: Any, **kwargs: Any) -> Any:  # a statement or commit to the thread
        stages.thread_calls[bool(lull.open)] += 1
        return await execute(*args, **kwargs)

    writer._execute = sent
    p(batch_mod, "redact", "    writer: the report's redaction")
    p(batch_mod, "stored_state", "  writer: a state's encoding")
    p(sqlite_mod, "paced_statements", "writer: rows encoded, redacted (all turns)")
    p(services.store, "_write_batch", "writer: batch (encode, execute, commit)")
    # each statement and the commit: sent to the connection's thread, waited for
    p(services.store.writer, "_execute", "  writer: statements, commit (the connection's thread)")


async def _dropped(ops: list[Any]) -> None:
    """A batch of the writer's, not written (``--without-writes``)."""


def scope_for(target: str, body: bytes, session: str) -> dict[str, Any]:
    from proxy.server.disconnect_watch import SIGNAL_KEY, DisconnectSignal

    path, _, query = target.partition("?")  # Gemini's streaming path asks ``alt=sse``

    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer sk-bench"),
        (b"x-session-id", session.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "extensions": {SIGNAL_KEY: {"signal": DisconnectSignal()}},
        "state": {},
    }


async def call(app: Any, path: str, body: bytes, session: str) -> tuple[float, float, float, float]:
    """One request through ``app``: ms until its last body message was sent, the thread CPU ms of
    the whole call (what runs after the answer included), ms until its answer began (the
    response's start: what the client waits for before the relay), and the thread CPU ms until its
    upstream call began (``note_forward``)."""
    sent = False
    end = began = 0.0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never: the client stays
        return {}

    async def send(message: dict[str, Any]) -> None:
        nonlocal end
        nonlocal began
        if message["type"] == "http.response.start":
            if message["status"] != 200:
                raise RuntimeError(f"status {message['status']}")
            began = time.perf_counter()
        if message["type"] == "http.response.body" and not message.get("more_body"):
            end = time.perf_counter()

    t0, cpu0 = time.perf_counter(), time.thread_time()
    FORWARDED.clear()
    await app(scope_for(path, body, session), receive, send)
    presend = (FORWARDED[0] - cpu0) * 1000 if FORWARDED else 0.0
    return (end - t0) * 1000, (time.thread_time() - cpu0) * 1000, (began - t0) * 1000, presend


# the thread CPU time when the call's upstream request began (``wire.forward``): what ran before
# it is what the client waits on; the rest of the rewrite's work runs while the upstream reads
FORWARDED: list[float] = []


def note_forward(handler: Any) -> None:
    """``handler``'s wire with its ``forward`` noting the thread CPU time it is entered at."""
    forward = handler.wire.forward

    async def noted(*args: Any, **kwargs: Any) -> Any:
        if not FORWARDED:
            FORWARDED.append(time.thread_time())
        return await forward(*args, **kwargs)

    handler.wire = dataclasses.replace(handler.wire, forward=noted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--protocol", choices=list(PATHS), default="chat")
    parser.add_argument("--profile", type=int, metavar="TOP", help="cProfile's top functions")
    parser.add_argument(
        "--without-writes",
        action="store_true",
        help="the store's writer drops its batches (no encoding, no statements): what the "
        "requests' times are without the writer's work",
    )
    args = parser.parse_args()

    beside_upstream("ctxproxy-stages-", functools.partial(run, args))


def beside_upstream(prefix: str, main: Callable[[Path, str], Coroutine[Any, Any, None]]) -> None:
    """``main(a temporary folder, the fake upstream's root URL)``, run with the fake upstream
    (``bench.upstream_server``) on a free loopback port, stopped after."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    upstream = start(
        [sys.executable, "-m", "bench.upstream_server", str(port)], f"{root}/v1/models"
    )
    try:
        asyncio.run(main(tmp, root))
    finally:
        upstream.terminate()
        upstream.wait(10)


async def run(args: argparse.Namespace, tmp: Path, root: str) -> None:
    from proxy.app import create_app
    from proxy.server.collector import install_collector
    from proxy.server.heap import settle_heap
    from proxy.settings import load_settings
    from proxy.telemetry.jsonlog import configure

    cfg = tmp / "ctxproxy.yaml"
    cfg.write_text(ctxproxy_config(root, WINDOW))
    settings = load_settings(cfg)
    configure(settings.logging)
    app = create_app(settings, db_path=str(tmp / "bench.db"))
    app.state.log_stream = (tmp / "requests.log").open("w", buffering=1)  # line-buffered, as stderr
    app.state.setup_hooks.append(settle_heap)
    app.state.setup_hooks.append(install_collector)
    floor = create_bare_app(settings.model_copy())  # its own: the stages wrap ctxproxy's
    body = orjson.dumps(bodies(args.messages, args.stream)[args.protocol])
    path = path_of(args.protocol, args.stream)
    stages = Stages()
    async with app.router.lifespan_context(app), floor.router.lifespan_context(floor):
        instrument(stages, app, args.protocol)
        note_forward(app.state.handlers[args.protocol])
        note_forward(floor.state.handlers[args.protocol])
        if args.without_writes:
            app.state.services.store._write_batch = _dropped
        totals: dict[str, list[float]] = {"ctxproxy": [], "floor": []}
        cpu: dict[str, list[float]] = {"ctxproxy": [], "floor": []}
        began: dict[str, list[float]] = {"ctxproxy": [], "floor": []}
        presend: dict[str, list[float]] = {"ctxproxy": [], "floor": []}
        warm = 50
        collections = GcWatch()
        profile = cProfile.Profile() if args.profile else None
        process_cpu = 0.0
        for r in range(args.requests + warm):
            if r == warm:
                process_cpu = time.process_time()
            stages.enabled = r >= warm
            for name, target in (("ctxproxy", app), ("floor", floor)):
                if profile is not None and name == "ctxproxy" and r >= warm:
                    profile.enable()
                ms, cpu_ms, began_ms, presend_ms = await call(target, path, body, "stages")
                if profile is not None:
                    profile.disable()
                if r >= warm:
                    totals[name].append(ms)
                    cpu[name].append(cpu_ms)
                    began[name].append(began_ms)
                    presend[name].append(presend_ms)
            if r >= warm:
                stages.next_request()
            if r == warm - 1:
                collections.start()
        collections.stop()
        process_cpu = time.process_time() - process_cpu
        await app.state.services.store.flush()
    print_stages(args, body, totals, cpu, began, presend, stages)
    # the process's CPU outside the calls: the loop between requests (the writer's batches, timers),
    # the store's connection thread, the offload worker
    calls = sum(cpu["ctxproxy"]) + sum(cpu["floor"])
    other = (process_cpu * 1000 - calls) / max(1, args.requests)
    outside = "the loop between requests, the store's connection, the offload worker"
    print(f"CPU outside the calls ({outside}): {other:.3f} ms a request")
    print(collections.summary())
    inside, lulls = stages.rows_encoded[True], stages.rows_encoded[False]
    during = "while a request was being handled"
    print(f"rows the writer encoded {during}: {inside} of {inside + lulls}")
    inside, lulls = stages.thread_calls[True], stages.thread_calls[False]
    print(f"statements and commits sent to the connection's thread {during}: {inside} of "
          f"{inside + lulls}")  # fmt: skip
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.profile)
        print(out.getvalue())
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue())


def print_stages(
    args: argparse.Namespace,
    body: bytes,
    totals: dict[str, list[float]],
    cpu: dict[str, list[float]],
    began: dict[str, list[float]],
    presend: dict[str, list[float]],
    stages: Stages,
) -> None:
    n = len(stages.per_request)
    names: dict[str, None] = {}
    for per in stages.per_request:
        names.update(dict.fromkeys(per))
    kind = "streaming" if args.stream else "non-streaming"
    print(
        f"\n{args.protocol}, {args.messages} messages ({len(body) / 1024:.0f} KB), {kind}, "
        f"{n} requests (wall ms, in-process, inclusive)\n"
    )

    # the slowest 1% of ctxproxy's requests: each stage's mean there (where the tail comes from),
    # by the whole request's wall time and by its thread CPU (steadier on a shared machine)
    def slowest(values: list[float]) -> list[dict[str, float]]:
        cut = percentile(values, 0.99)
        return [per for per, ms in zip(stages.per_request, values, strict=True) if ms >= cut]

    slow, slow_cpu = slowest(totals["ctxproxy"]), slowest(cpu["ctxproxy"])
    print("| stage | median | mean | p90 | p99 | p99 ÷ median | mean, slowest 1% | "
          "mean, 1% of most CPU |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    presend_rows = (("ctxproxy, thread CPU to the upstream call", presend["ctxproxy"]),
                    ("floor, thread CPU to the upstream call", presend["floor"]))  # fmt: skip
    for label, values in (("ctxproxy, whole request", totals["ctxproxy"]),
                          ("floor (bare relay), whole request", totals["floor"]),
                          ("ctxproxy, to the answer's start", began["ctxproxy"]),
                          ("floor, to the answer's start", began["floor"]),
                          ("ctxproxy, thread CPU of the call", cpu["ctxproxy"]),
                          ("floor, thread CPU of the call", cpu["floor"]),
                          *presend_rows):  # fmt: skip
        median, p99 = statistics.median(values), percentile(values, 0.99)
        print(
            f"| {label} | {median:.3f} | {statistics.fmean(values):.3f} | "
            f"{percentile(values, 0.9):.3f} | {p99:.3f} | {p99 / median:.2f} | | |"
        )
    diff = statistics.median(totals["ctxproxy"]) - statistics.median(totals["floor"])
    print(f"| ctxproxy − floor (medians) | {diff:.3f} | | | | |")
    diff = statistics.median(cpu["ctxproxy"]) - statistics.median(cpu["floor"])
    print(f"| ctxproxy − floor, thread CPU (medians) | {diff:.3f} | | | | |")
    diff = statistics.median(presend["ctxproxy"]) - statistics.median(presend["floor"])
    print(f"| ctxproxy − floor, thread CPU to the upstream call (medians) | {diff:.3f} | | | | |")
    for name in names:
        values = [per.get(name, 0.0) for per in stages.per_request]
        tail = statistics.fmean(per.get(name, 0.0) for per in slow) if slow else 0.0
        tail_cpu = statistics.fmean(per.get(name, 0.0) for per in slow_cpu) if slow_cpu else 0.0
        print(
            f"| {name} | {statistics.median(values):.3f} | {statistics.fmean(values):.3f} | "
            f"{percentile(values, 0.9):.3f} | {percentile(values, 0.99):.3f} | | {tail:.3f} | "
            f"{tail_cpu:.3f} |"
        )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
