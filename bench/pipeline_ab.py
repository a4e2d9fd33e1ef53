"""Pipeline time of two source trees, interleaved request by request, for a noisy machine.

    .venv/bin/python -m bench.pipeline_ab --before /tmp/base [--after .] [--prices 0.1]

Each tree runs ``bench.cost``'s replay (its default 40 conversations, the ``defaults`` and
``budget32k`` methods, ``--prices`` variants) in a worker process of its own (``PYTHONPATH`` on
the tree, which needs ``bench.cost``'s replay: ``bench/cost*.py``, ``bench/replay.py``, the caches
and ``bench/optimal*.py``). The driver makes them
take turns, one agent request each, the one going first alternating, so both see the same load
at the same time; each times its pipeline runs in CPU time (``time.thread_time``). Per method:
mean and p50 ms per pipeline run, before and after, their ratios, and each rule's wall time
(the report's ``timings_ms``)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

METHODS = ("direct", "defaults", "budget32k")


def worker(prices: list[str]) -> None:
    """One tree's replay, a request per ``step`` line on stdin; ``report`` prints the figures."""
    from bench import cost

    times: dict[str, list[float]] = defaultdict(list)

    def run(self: Any, pipeline: Any, prefix: Any, now: float, budget: int, state: Any,
            facts: Any) -> Any:  # fmt: skip
        ctx = cost.Context(
            messages=prefix,
            original_messages=prefix,
            model=self.model,
            tokens=cost.RequestTokens(self.counter),
            now=now,
            session_id=f"cost-{self.conv['id']}",
            state=state,
            request={"model": self.model, "messages": prefix},
            budget=budget,
            cache=facts,
        )
        started = time.thread_time()
        outcome = pipeline.run(ctx)
        name = "defaults" if budget > 40_000 else "budget32k"
        times[name].append((time.thread_time() - started) * 1000)
        for rule, ms in outcome.report["timings_ms"].items():
            times[f"{name}:{rule}"].append(ms)
        report = dict(outcome.report)
        return outcome.messages, report, 0.0, cost.redact_state(outcome.state, state)

    cost.Replay._run = run  # type: ignore[method-assign]
    methods = tuple(cost.parse_variant(n) for n in METHODS)
    pricings = tuple(cost.PRICES[p] for p in prices)
    chosen = cost.spread(list(cost.iter_conversations()), cost.DEFAULT_LIMIT)

    def steps() -> Any:
        for conv in chosen:
            replay = cost.Replay(cost.Job(conv, methods, pricings, 0))
            prefixes = list(cost.request_prefixes(conv["messages"]))
            clock = cost.timeline(conv["id"], prefixes, 0)
            for k, (prefix, now) in enumerate(zip(prefixes, clock, strict=True)):
                yield replay, prefix, now, k == len(prefixes) - 1

    todo = steps()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.startswith("step"):
            item = next(todo, None)
            if item is not None:
                replay, prefix, now, last = item
                replay.step(prefix, now, last)
            print("ok" if item is not None else "done", flush=True)
        else:
            figures = {k: [statistics.mean(v), statistics.median(v)] for k, v in times.items()}
            print(json.dumps(figures), flush=True)
            return


def _start(tree: Path, prices: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(tree), LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.pipeline_ab", "--worker", "--prices", prices],
        cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _ask(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--before", type=Path, help="the tree to compare against")
    parser.add_argument("--after", type=Path, default=Path.cwd())
    parser.add_argument("--prices", default="0.1", help="bench.cost's price variants")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.prices.split(","))
        return 0
    if args.before is None:
        parser.error("--before: the tree to compare against")
    procs = {"before": _start(args.before.resolve(), args.prices),
             "after": _start(args.after.resolve(), args.prices)}  # fmt: skip
    order = ["before", "after"]
    while True:
        answers = {_ask(procs[name], "step") for name in order}
        order.reverse()
        if "done" in answers:
            break
    figures = {name: json.loads(_ask(proc, "report")) for name, proc in procs.items()}
    print("| method | before mean / p50 | after mean / p50 | after ÷ before, mean / p50 |")
    print("|---|---:|---:|---:|")
    for key in sorted(figures["before"], key=lambda k: (":" in k, k)):
        b, a = figures["before"][key], figures["after"].get(key)
        if a is None:
            continue
        print(f"| {key} | {b[0]:.3f} / {b[1]:.3f} | {a[0]:.3f} / {a[1]:.3f} "
              f"| {a[0] / b[0]:.3f} / {a[1] / b[1]:.3f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
