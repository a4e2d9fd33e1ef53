"""``ctxproxy logs`` and ``ctxproxy show``: the commands that read the request log."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from proxy.cli_store import CliError
from proxy.settings import load_settings
from proxy.store.base import Store


def _open_log(args: argparse.Namespace) -> Store:
    """The request log to read (SQLite or PostgreSQL, not opened yet); a read command never
    creates a SQLite file (a typo in --db would otherwise read as an empty log)."""
    from proxy.store.factory import create_store, is_postgres, store_url

    settings = load_settings(args.config, check_rules=False).store
    url = store_url(settings, args.db)
    if not is_postgres(url) and url != ":memory:" and not Path(url).is_file():
        raise CliError(f"the request log {url} does not exist (check --db or store.path)")
    return create_store(settings, db=url)


# The latest requests whose sessions a bare ``--session NAME`` is looked for among
NAME_SCAN = 20_000


async def _log_filters(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``logs``' filters: ``--session`` as logs prints it (``principal/name``), the client's own
    name with ``--principal``, or the client's own name alone: the one principal's session of
    that name among the latest requests (two principals' sessions of that name, or a whole id
    that another principal's client gave as its session's name: an error naming both)."""
    from proxy.inspect.tenancy import session_filter
    from proxy.principals import split_scoped

    principal = args.principal or None
    given: str | None = args.session
    # the name as the answer's x-ctxproxy-session-id header shows it (percent-encoded, "%"
    # itself too: decoding it gives the name back) when the name as given was never logged
    names = [given] if given is None or "%" not in given else [given, unquote(given)]
    if principal is not None and len(names) == 1:  # the whole id: nothing to look for
        return {"session": session_filter(given, principal), "principal": principal}
    seen: set[str] | None = None
    for name in names:
        session = session_filter(name, principal)
        if session is None:
            break
        if seen is None:
            seen = {s["session_id"] for s in await store.recent_sessions(NAME_SCAN, NAME_SCAN)}
        named = sorted(sid for sid in seen if split_scoped(sid)[1] == session)
        if session in seen:
            if principal is None and named:  # a client may name its session like another's id
                raise CliError(
                    f"--session {session}: both a session of that id and {len(named)} of that "
                    f"name ({', '.join([session, *named])}): give --principal"
                )
            break
        if principal is None:
            if len(named) > 1:
                raise CliError(
                    f"--session {session}: {len(named)} principals have a session of that name "
                    f"({', '.join(named)}): give the whole id, or --principal"
                )
            if named:
                session = named[0]
                break
    else:
        session = session_filter(given, principal)  # logged under neither: as given
    return {"session": session, "principal": principal}


async def _logs(args: argparse.Namespace) -> list[dict[str, Any]]:
    store = _open_log(args)
    await store.open()
    try:
        return await store.list_requests(**await _log_filters(store, args), limit=args.limit)
    finally:
        await store.close()


def _console() -> Any:
    """A rich console on stdout whose closed pipe ends the command as ``main`` ends it (rich's
    own answer is exit status 1)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return PipeConsole()


async def _follow(args: argparse.Namespace) -> int:
    from proxy.inspect.logs_view import follow

    store = _open_log(args)
    await store.open()
    console = _console()
    since = time.time()  # "new" means created after this line is printed
    console.print(
        f"following new requests in {store.describe()} (Ctrl-C to stop)", style="dim", markup=False
    )
    console.file.flush()
    try:
        return await follow(
            store,
            console,
            **await _log_filters(store, args),
            interval=args.interval,
            since=since,
            wide=args.wide,
        )
    finally:
        await store.close()


async def _costs(args: argparse.Namespace) -> list[str]:
    from proxy.inspect.cost_view import cost_record, session_cost_line, session_costs

    store = _open_log(args)
    await store.open()
    try:
        found = await session_costs(store, **await _log_filters(store, args), limit=args.limit)
    finally:
        await store.close()
    if args.json:  # one JSON object a session, as ``logs --json`` writes one a request
        from proxy.inspect.report_view import json_for_terminal

        return [json_for_terminal(cost_record(*item)) for item in found]
    return [session_cost_line(*item) for item in found] or ["no sessions logged"]


def cmd_logs(args: argparse.Namespace) -> int:
    if args.cost:
        from proxy.inspect.report_view import one_line

        if args.follow:
            raise CliError("--follow does not apply to --cost (each run adds up the sessions now)")
        lines = asyncio.run(_costs(args))
        # a line names the session's latest model, client text: a line break in it forged one
        show = (lambda line: line) if args.json else one_line
        sys.stdout.write("".join(show(line) + "\n" for line in lines))
        return 0
    if args.follow:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_follow(args))
        return 0
    rows = asyncio.run(_logs(args))
    if args.json:
        from proxy.inspect.report_view import json_for_terminal

        for row in rows:
            sys.stdout.write(json_for_terminal(row) + "\n")
        return 0
    from proxy.inspect.logs_view import print_rows

    print_rows(rows, _console(), wide=args.wide)
    return 0


async def _show(args: argparse.Namespace) -> dict[str, Any] | None:
    store = _open_log(args)
    await store.open()
    try:
        from proxy.inspect.cost_view import with_account_now

        if args.request_id in ("last", "latest"):
            rows = await store.list_requests(limit=1)
            row = rows[0] if rows else None
        else:
            row = await store.get_request(args.request_id)
        return await with_account_now(store, row) if row is not None else None
    finally:
        await store.close()


def cmd_show(args: argparse.Namespace) -> int:
    row = asyncio.run(_show(args))
    if row is None:
        sys.stderr.write(f"ctxproxy: no logged request {args.request_id!r}\n")
        return 1
    if args.json:
        from proxy.inspect.report_view import json_for_terminal

        sys.stdout.write(json_for_terminal(row, indent=True) + "\n")
        return 0
    from proxy.inspect.show import render

    render(row, _console())
    return 0
