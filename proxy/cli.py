"""The ``ctxproxy`` command: ``serve``, ``rewrite``, ``logs`` and ``show``, each a ``cmd_*``
function wired to its subparser in ``build_parser``; ``logs`` and ``show`` live in ``cli_log``,
``vacuum`` and ``migrate`` in ``cli_store``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from proxy.cli_log import cmd_logs, cmd_show
from proxy.cli_store import CliError, add_store_commands
from proxy.settings import Settings, SettingsError, UpstreamSettings, load_settings
from proxy.store.pg_unavailable import StoreUnavailable

if TYPE_CHECKING:
    from proxy.server.wire import Wire
    from proxy.store.base import Store

# ``rewrite --protocol``: the names of the protocols a body may be read as (``_wire``). The
# engine, the rules and the wires are imported by the commands that use them: ``logs``,
# ``show`` and the store's commands start in a fraction of the time.
PROTOCOLS = ("anthropic", "chat", "gemini", "responses")


def _wire(protocol: str) -> Wire:
    """How the server reads a body of ``protocol`` (parse, validate) and its adapter."""
    from proxy.server.wire import CHAT_WIRE, GEMINI_WIRE, MESSAGES_WIRE, RESPONSES_WIRE

    wires = {"chat": CHAT_WIRE, "anthropic": MESSAGES_WIRE, "responses": RESPONSES_WIRE,
             "gemini": GEMINI_WIRE}  # fmt: skip
    return wires[protocol]


MAX_LISTED = 1_000_000  # rows one ``logs --limit`` asks for (a store's integer holds 2**63 - 1)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LISTED:
        raise argparse.ArgumentTypeError(
            f"must be a number from 1 to {MAX_LISTED:,}, not {text[:40]!r}"
        )
    return value


def _poll_interval(text: str) -> float:
    """``logs --follow --interval``: 0 or less polled without pause (a core busy, the store read
    as fast as it answered); nan and inf never polled again."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.01 <= value <= 3600:  # nan fails both
        raise argparse.ArgumentTypeError(f"seconds from 0.01 to 3600, not {text[:40]!r}")
    return value


MIN_BUDGET = 256  # tokens: pipeline.budget_tokens' least (the settings' Field)


def _settings(args: argparse.Namespace) -> Settings:
    budget = getattr(args, "budget", None)
    if budget is not None and budget < MIN_BUDGET:  # as pipeline.budget_tokens is held to it
        raise CliError(f"--budget {budget}: at least {MIN_BUDGET} tokens")
    from proxy.lexicon_shelf import install

    install(os.environ)  # compiled lexicons, tokenizer tables: kept between runs (user's cache)
    settings = load_settings(args.config)
    upstream = getattr(args, "upstream", None)
    if upstream:
        try:
            catch_all = UpstreamSettings(name="cli", match=["*"], kind="openai", base_url=upstream)
        except ValueError:  # pydantic's ValidationError: said in one line, not a traceback
            raise CliError(f"--upstream {upstream!r}: not an http:// or https:// URL") from None
        settings = settings.model_copy(update={"upstreams": [catch_all]})
    return settings


def cmd_serve(args: argparse.Namespace) -> int:
    from proxy.app import create_app
    from proxy.auth import access_line
    from proxy.principals import no_keys_problem
    from proxy.server.collector import install_collector
    from proxy.server.heap import settle_heap
    from proxy.server.listen import AnnouncingServer, BindError, bind, bound_port
    from proxy.server.protocol import server_config
    from proxy.startup import announce, startup_line
    from proxy.store.factory import is_postgres, store_url
    from proxy.store.pg_unavailable import check_reachable
    from proxy.store.serve_lock import ServeLockError, hold
    from proxy.telemetry.jsonlog import configure

    settings = _settings(args)
    if (problem := no_keys_problem(settings.auth)) is not None:
        raise SettingsError(problem)  # said as one line, before anything starts
    host = args.host or settings.server.host
    port = settings.server.port if args.port is None else args.port  # 0: any free port
    if not 0 <= port <= 65535:  # else the socket layer takes it modulo 65536, silently
        raise CliError(f"--port {port}: a port is 0 to 65535")
    db_path = store_url(settings.store, args.db)
    if not is_postgres(db_path) and (not db_path or Path(db_path).is_dir()):
        # said before its lock file is made beside it; else the store's open failed inside
        # uvicorn's start-up, a traceback
        raise CliError(f"store.path {db_path!r}: the log is a file, and this names a folder")
    try:  # before the store opens: another server on the file, or a taken port, said at once
        lock = hold(db_path)  # held until this process ends
    except ServeLockError as exc:
        raise CliError(str(exc)) from None
    bound = False
    try:
        if lock is not None:  # SQLite: a file that is no database said as one line, not in a
            _readable(db_path)  # traceback from inside the app's start
        elif is_postgres(db_path):  # PostgreSQL: away, a login refused, no such database
            asyncio.run(check_reachable(db_path))
        sockets, bound = bind(host, port), True
    except BindError as exc:
        raise CliError(str(exc)) from None
    finally:
        if lock is not None and not bound:  # refused: the lock goes now
            lock.close()
    port = bound_port(sockets, port)
    configure(settings.logging)  # the process's logging is taken over once it is sure to serve
    app = create_app(settings, db_path=db_path, budget_override=args.budget)
    app.state.setup_hooks.append(settle_heap)  # last: once everything startup loads is loaded
    app.state.setup_hooks.append(install_collector)  # then each collection's survivors frozen
    access = access_line(settings.auth, settings.ui.public)
    line = f"{startup_line(settings, host, port, db_path, args.config)} · {access}"
    config = server_config(app, settings.server, host, port)
    try:  # "listening" only once it is: the store open, the rules loaded, the sockets listening
        AnnouncingServer(config, lambda: announce(line)).run(sockets=sockets)
    except KeyboardInterrupt:  # Ctrl-C: uvicorn shut down, then raised the signal again
        return 130
    finally:
        for sock in sockets:
            sock.close()
        if lock is not None:
            lock.close()
    return 0


def _readable(db: str) -> None:
    """Raise SQLite's error if ``db`` exists and is no database (``main`` says it in one line)."""
    if Path(db).is_file():
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("PRAGMA schema_version").fetchone()


async def _rewrite(args: argparse.Namespace, raw: bytes) -> dict[str, Any]:
    from proxy.store.factory import create_store
    from proxy.store.serve_lock import serving

    settings = _settings(args)
    with tempfile.TemporaryDirectory(prefix="ctxproxy-") as scratch:
        db = args.db or str(Path(scratch) / "rewrite.db")
        store = create_store(settings.store, db=db)
        await store.open()
        try:
            # a log a server is using is read, never written: its state is the server's to save
            return await _rewrite_on(args, raw, settings, store, save=not serving(db))
        finally:
            await store.close()


async def _rewrite_on(
    args: argparse.Namespace, raw: bytes, settings: Settings, store: Store, save: bool
) -> dict[str, Any]:
    from proxy.errors import ModelNotFound, PayloadTooLarge
    from proxy.rewrite.engine import Engine
    from proxy.store.secrets import server_secret

    engine = Engine(settings, store, budget_override=args.budget)
    engine.session_salt = await server_secret(store)  # names a session as the server does
    if len(raw) > settings.limits.max_body_bytes:  # the server's reader checks as it reads
        raise PayloadTooLarge(
            f"Request body is {len(raw)} bytes; the limit is "
            f"{settings.limits.max_body_bytes} bytes."
        )
    wire = _wire(args.protocol)
    parse, adapter = wire.parse, wire.adapter
    body = parse(raw)
    named = None  # Gemini's model is the path's: --model
    if wire.target is not None:
        if not args.model:
            raise CliError("--protocol gemini needs --model (Gemini names it in the path)")
        named = wire.target(f"/v1beta/models/{args.model}:generateContent")[0]
    model = named if named is not None else body["model"]
    if settings.upstreams and settings.upstream_for(model) is None:
        raise ModelNotFound(
            f"The model '{model}' is not served by any configured upstream.", param="model"
        )
    now = args.now if args.now is not None else time.time()
    prepared = await engine.prepare(
        body,
        {},
        now=now,
        session_id=args.session,
        parent_session_id=args.parent_session,
        adapter=adapter,
        principal=args.principal,
        model=named,
    )
    result = await (prepared.finish() if save else prepared.let_go())
    return {"request": result.body, "report": result.report}


def cmd_rewrite(args: argparse.Namespace) -> int:
    from proxy.errors import ProxyError

    try:
        raw = sys.stdin.buffer.read() if args.file in (None, "-") else Path(args.file).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    try:
        out = asyncio.run(_rewrite(args, raw))
    except ProxyError as exc:
        sys.stderr.write(exc.body_bytes().decode() + "\n")
        return 2
    sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


DESCRIPTION = """\
A reverse proxy between AI agents and their model providers (OpenAI Chat Completions, Anthropic
Messages, the Responses API, Gemini's generateContent): it repairs each request's context on the
way through, prunes it under a token budget and logs what every request is made of.

  ctxproxy serve              run the proxy (http://127.0.0.1:8787 by default)
  ctxproxy logs               the latest requests, one line each (--follow: live)
  ctxproxy show last          one request: sections, what the rules did, usage, diff
  ctxproxy rewrite FILE       what the proxy would forward for one request body
  ctxproxy vacuum | migrate   the request log's upkeep"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxproxy",
        description=DESCRIPTION,
        epilog="Run 'ctxproxy COMMAND --help' for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, db: str | None = None) -> None:
        p.add_argument(
            "--config",
            default=os.environ.get("CTXPROXY_CONFIG") or None,
            help="YAML config (default: $CTXPROXY_CONFIG, else built-in: every rule on)",
        )
        p.add_argument(
            "--db",
            help=db
            or "SQLite path or postgresql:// URL (default: CTXPROXY_STORE_URL, store.url, "
            "store.path)",
        )

    serve = sub.add_parser("serve", help="run the proxy")
    common(serve)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--upstream", help="send every model to this OpenAI-compatible base URL")
    serve.add_argument("--budget", type=int, help="token budget (overrides the config)")
    serve.set_defaults(func=cmd_serve)

    rewrite = sub.add_parser("rewrite", help="print what would be forwarded for one request body")
    common(
        rewrite,
        db="the log whose session the body continues, and whose state it saves unless a "
        "ctxproxy serve is using it (SQLite path or postgresql:// URL; default: a new session, "
        "nothing kept)",
    )
    rewrite.add_argument("file", nargs="?", help="request body JSON (default: stdin)")
    rewrite.add_argument("--session")
    rewrite.add_argument("--parent-session")
    rewrite.add_argument(
        "--principal",
        default="anonymous",
        help="whose session (a principal's name as logs shows it; default: anonymous)",
    )
    rewrite.add_argument("--now", type=float, help="the clock the rules see (epoch seconds)")
    rewrite.add_argument("--budget", type=int, help="token budget (overrides the config)")
    rewrite.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="chat",
        help="the body's protocol: chat (Chat Completions), anthropic (Messages), responses, "
        "gemini (generateContent: the model from --model)",
    )
    rewrite.add_argument("--model", help="the model, for a protocol naming it in the path (gemini)")
    rewrite.set_defaults(func=cmd_rewrite)

    logs = sub.add_parser(
        "logs",
        help="list logged requests, newest first, one line each",
        description="The latest logged requests, newest first, one line each: time, request id "
        "(as show takes it), principal, status, model, billed input tokens sent → forwarded "
        "(system, tools schema and messages) and the proxy's own time. Piped, the lines are "
        "plain text.",
    )
    common(logs)
    logs.add_argument(
        "--session",
        help="a session id as logs --wide prints it (principal/name), or the client's own name "
        "with --principal",
    )
    logs.add_argument("--principal", help="only this principal's requests (its name as shown)")
    logs.add_argument("--limit", type=_positive_int, default=20, help="how many (default 20)")
    logs.add_argument(
        "--json",
        action="store_true",
        help="JSON Lines: each request's whole log row as one JSON object per line",
    )
    logs.add_argument(
        "--wide",
        action="store_true",
        help="also the whole session id, protocol, cache, rule counts and sections, on lines of "
        "their own under each request",
    )
    logs.add_argument(
        "--cost",
        action="store_true",
        help="one line per session: its input cost against sending direct, at the model's "
        "prices, its cache busts by cause and its compactions paid back or not",
    )
    logs.add_argument("--follow", "-f", action="store_true", help="print new requests live")
    logs.add_argument(
        "--interval", type=_poll_interval, default=0.5, help="--follow poll interval (s)"
    )
    logs.set_defaults(func=cmd_logs)

    show = sub.add_parser("show", help="one request: sections, rule decisions, usage, diff")
    common(show)
    show.add_argument("request_id", help="a request id (x-ctxproxy-request-id), or 'last'")
    show.add_argument("--json", action="store_true", help="print the raw log row")
    show.set_defaults(func=cmd_show)

    add_store_commands(sub, common)
    return parser


EXIT_PIPE_CLOSED = 141  # what a shell reports for a command its reader stopped (128 + SIGPIPE)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # no command: the help, not argparse's error
        parser.print_help()
        return 2
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (SettingsError, CliError) as exc:
        sys.stderr.write(f"ctxproxy: {exc}\n")
        return 2
    except StoreUnavailable as exc:  # PostgreSQL away, a login refused: one line, as SQLite's
        sys.stderr.write(f"ctxproxy: {exc}\n")
        return 2
    except sqlite3.DatabaseError as exc:  # not a database, a table gone: said, not a traceback
        sys.stderr.write(f"ctxproxy: the request log cannot be read: {exc}\n")
        return 2
    except BrokenPipeError:  # ``ctxproxy logs --json | head -1``: the reader has what it wanted
        _quiet_stdout()
        return EXIT_PIPE_CLOSED


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit cannot raise again (and print)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
