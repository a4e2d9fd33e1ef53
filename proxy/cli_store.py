"""``ctxproxy vacuum`` and ``ctxproxy migrate``: the store's own commands, for operators (the data
lifecycle, and migrations as a release step)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from proxy.settings import load_settings


class CliError(Exception):
    """A usage problem reported as ``ctxproxy: …`` with exit status 2, without a traceback."""


async def _vacuum(args: argparse.Namespace) -> dict[str, Any]:
    from proxy.store.factory import is_postgres, store_url, vacuum
    from proxy.store.serve_lock import serving

    settings = load_settings(args.config, check_rules=False).store
    url = store_url(settings, args.db)
    if not is_postgres(url) and url != ":memory:" and not Path(url).is_file():
        raise CliError(f"the request log {url} does not exist (check --db or store.path)")
    live = serving(url)
    if args.full and live:  # VACUUM holds the write lock for as long as it rewrites
        raise CliError(
            f"a ctxproxy serve is using {url}: --full would hold its write lock while it rewrites "
            "the file, and the server's writes would be lost; stop the server, or vacuum without "
            "--full"
        )
    for flag, value in (("--retention-days", args.retention_days),
                        ("--session-ttl-days", args.session_ttl_days)):  # fmt: skip
        if value is not None and not 0 <= value <= 36_500:
            raise CliError(f"{flag} must be between 0 and 36500 (got {value:g})")
    days = settings.retention_days if args.retention_days is None else args.retention_days
    ttl = settings.session_ttl_days if args.session_ttl_days is None else args.session_ttl_days
    return await vacuum(settings, url, days, ttl, full=args.full, live=live)


def cmd_vacuum(args: argparse.Namespace) -> int:
    out = asyncio.run(_vacuum(args))
    if args.json:
        sys.stdout.write(orjson.dumps(out).decode() + "\n")
        return 0
    d = out["deleted"]
    sys.stdout.write(
        f"deleted {d['requests']} request rows (older than {out['retention_days']:g} days; "
        f"0 = kept), {d['sessions']} sessions and {d['session_cache']} cache reports (idle "
        f"{out['session_ttl_days']:g} days; 0 = kept)\n"
    )
    if out["compaction"] == "none":
        sys.stdout.write(
            "not compacted: the file predates incremental vacuum, and its one full VACUUM (which "
            "converts it) waits until no ctxproxy serve uses it\n"
        )
    elif "bytes_before" in out:
        sys.stdout.write(
            f"{out['compaction']}: {out['bytes_before']:,} -> {out['bytes_after']:,} bytes\n"
        )
    else:
        sys.stdout.write(f"{out['compaction']}: the database reclaims the space itself\n")
    return 0


async def _migrate(args: argparse.Namespace) -> tuple[str, list[str]]:
    from proxy.store.factory import create_store

    store = create_store(load_settings(args.config, check_rules=False).store, db=args.db)
    await store.open()  # applies what is missing (PostgreSQL: under an advisory lock)
    try:
        return store.describe(), store.applied
    finally:
        await store.close()


def cmd_migrate(args: argparse.Namespace) -> int:
    where, applied = asyncio.run(_migrate(args))
    if applied:
        sys.stdout.write(f"{where}: applied {', '.join(applied)}\n")
    else:
        sys.stdout.write(f"{where}: up to date\n")
    return 0


def add_store_commands(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    vacuum = sub.add_parser("vacuum", help="apply the retention now, then compact the database")
    common(vacuum)
    vacuum.add_argument("--retention-days", type=float, help="overrides store.retention_days")
    vacuum.add_argument("--session-ttl-days", type=float, help="overrides store.session_ttl_days")
    vacuum.add_argument(
        "--full", action="store_true", help="SQLite: rewrite the whole file (VACUUM; locks it)"
    )
    vacuum.add_argument("--json", action="store_true", help="print the counts as JSON")
    vacuum.set_defaults(func=cmd_vacuum)

    migrate = sub.add_parser(
        "migrate", help="apply the store's migrations (serve applies them too, at start)"
    )
    common(migrate)
    migrate.set_defaults(func=cmd_migrate)
