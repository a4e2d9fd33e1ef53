"""The working set against what the trajectories show, on the corpus's mini-swe-agent runs (each
ends with the ``git diff`` it submitted, kept as ``meta.exit_message``): every run replayed
request by request through the real engine (defaults, one session each, state carried, a
simulated clock 7 s a request), its ledger read after the last request.

- **Changed files**: the files of the submitted diff missing from the ledger's changed files (a
  path there may be absolute: ``/testbed/x`` names ``x``), by run.
- **Open diagnostics** at the last request (the runs end with the fix tested: few should be).

    .venv/bin/python -m bench.working_set_eval [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
from typing import Any

from bench.golden import STEP_SECONDS, settings_for
from proxy.rewrite.engine import Engine
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters
from rules.context import working_set
from tests.support.traces import iter_conversations, request_prefixes

_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/", re.M)


async def replay(conv: dict[str, Any], engine: Engine, store: Store) -> dict[str, Any]:
    now, sid = 1_000_000.0, f"ws-{conv['id']}"
    done = None
    for prefix in request_prefixes(conv["messages"]):
        now += STEP_SECONDS
        done = await engine.rewrite(
            {"model": "gpt-4o", "messages": prefix}, {}, now=now, session_id=sid
        )
    assert done is not None
    state, _ = await store.load_state(done.session_id)
    return state.get(working_set.NAMESPACE) or {}


def _named(path: str, listed: set[str]) -> bool:
    return any(x == path or x.endswith("/" + path) for x in listed)


async def main_async(limit: int | None) -> None:
    runs = [c for c in iter_conversations() if c["id"].startswith("mswea")]
    runs = [c for c in runs if _DIFF_FILE.search(c.get("meta", {}).get("exit_message") or "")]
    runs = runs[:limit]
    store = Store(":memory:", batch_window_s=0)
    await store.open()
    engine = Engine(settings_for({}), store, TokenCounters(), strict=True)
    missing_runs = missing_files = diff_files = open_total = 0
    try:
        for conv in runs:
            ledger = await replay(conv, engine, store)
            files = set(_DIFF_FILE.findall(conv["meta"]["exit_message"]))
            listed = set(ledger.get("changed") or [])
            lost = [f for f in files if not _named(f, listed)]
            diff_files += len(files)
            missing_files += len(lost)
            missing_runs += bool(lost)
            open_total += len(working_set.open_diagnostics(ledger))
    finally:
        engine.close()
        await store.close()
    print(f"mini-swe-agent runs with a submitted diff: {len(runs)} ({diff_files} files)")
    print(
        f"runs whose changed files miss a file of the diff: {missing_runs} ({missing_files} files)"
    )
    print(f"open diagnostics at the last request: {open_total}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N runs only")
    args = parser.parse_args(argv)
    logging.getLogger("ctxproxy").setLevel(logging.ERROR)
    asyncio.run(main_async(args.limit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
