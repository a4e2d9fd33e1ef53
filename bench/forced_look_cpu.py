"""Thread CPU of a forced look (``Run.plan(sizes, drops=True)``) on a synthetic session of greps,
reads, test logs and ``git status`` runs: the first look (nothing elided yet) and the look after
a compaction elided what it chose, each with the session's tables fresh and warm (filled by a
look of the same messages; ``digest.names``' memo, by text, is warm in both); and the whole
forced compaction that request makes (``prune.apply`` to a sixteenth of the characters: the look,
the drops, their lines' names, the render), its tables fresh. The best and median of ``reps``.

    PYTHONPATH=. python -m bench.forced_look_cpu 800 30000 9
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from rules.base import Message, SessionState
from rules.context import prune
from rules.context.prune_plan import Run
from tests.support.factories import assistant, call, ctx, result, shell, user


def session(n: int, chars: int) -> list[Message]:
    msgs: list[Message] = [user("Fix the handlers")]
    k = 0
    while len(msgs) < n:
        kind = k % 4
        if kind == 0:
            line = "src/pkg_{k}/mod_{i}.py:{i}: def func_{k}_{i}(arg): return value_{i}\n"
            body = "".join(line.format(k=k, i=i) for i in range(chars // 60))[:chars]
            msgs += [
                assistant(None, shell(f"c{k}", f"grep -rn func_{k} src")),
                result(f"c{k}", body),
            ]
        elif kind == 1:
            line = "    def method_{k}_{i}(self, x):\n        return self.value_{i} + x\n"
            body = "".join(line.format(k=k, i=i) for i in range(chars // 120))[:chars]
            read = call(f"c{k}", "Read", file_path=f"src/pkg_{k}/mod.py")
            msgs += [assistant(None, read), result(f"c{k}", body)]
        elif kind == 2:
            body = "".join(f"tests/test_{k}.py::test_case_{i} PASSED\n" for i in range(chars // 80))
            msgs += [assistant(None, shell(f"c{k}", "python -m pytest -v")), result(f"c{k}", body)]
        else:
            status = shell(f"c{k}", f"git status --short {k}")
            msgs += [assistant(None, status), result(f"c{k}", f"M f{k}.txt")]
        k += 1
    return msgs[:n]


def look(messages: list[Message], state: SessionState, tables: dict[str, Any]) -> float:
    cfg = prune.Config()
    run = Run(ctx(messages, state=state, tables=tables), cfg, prune.NAMESPACE)
    run.cap_new_results()
    sizes = run.sizes()
    started = time.thread_time()
    run.plan(sizes, drops=True)
    return time.thread_time() - started


def fresh_and_warm(messages: list[Message], state: SessionState, reps: int) -> str:
    fresh = sorted(look(messages, state, {}) for _ in range(reps))
    tables: dict[str, Any] = {}
    look(messages, state, tables)
    warm = sorted(look(messages, state, tables) for _ in range(reps))
    return " ".join(
        f"{label} {times[0] * 1000:.1f} ms (median {times[len(times) // 2] * 1000:.1f})"
        for label, times in (("fresh", fresh), ("warm", warm))
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("messages", type=int)
    parser.add_argument("chars", type=int, help="characters of a grep, read or test log")
    parser.add_argument("reps", type=int)
    args = parser.parse_args(argv)
    messages = session(args.messages, args.chars)
    first = fresh_and_warm(messages, SessionState(), args.reps)
    total = sum(len(str(m)) for m in messages)
    before = ctx(messages, state=SessionState(), budget=max(8_000, total // 16))
    out = prune.apply(before, prune.Config())  # a compaction to a sixteenth of the characters
    after = fresh_and_warm(messages, out.state or before.state, args.reps)
    compactions = sorted(compaction(messages, before.budget) for _ in range(args.reps))
    size = f"{args.messages} messages, {args.chars} chars"
    best, median = compactions[0] * 1000, compactions[args.reps // 2] * 1000
    print(f"{size}: first look {first}; after a compaction {after}; ", end="")
    print(f"the compaction {best:.1f} ms (median {median:.1f})")


def compaction(messages: list[Message], budget: int | None) -> float:
    context = ctx(messages, state=SessionState(), budget=budget)
    started = time.thread_time()
    prune.apply(context, prune.Config())
    return time.thread_time() - started


if __name__ == "__main__":
    main()
