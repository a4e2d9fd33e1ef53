"""``bench.optimal_real``'s runs by forking the never-compacting replay, so whole sessions fit in
under an hour at one price: ``python -m bench.optimal_real --max-requests 0 --fork --prices 0.1``.

``bench.optimal_real`` replays each run from the conversation's first request, though every run
is the never-compacting one until its compaction at ``k``; and it replays each to the end. Here:

- **Forks.** The never-compacting replay is driven request by request, and at each request
  ``k`` a child process (``os.fork``) takes its state as it stands, compacts at ``k`` (the same
  oracle, ``bench.optimal_replay.oracle``) and replays from there. A child shares the parent's
  memory until it writes to it, and sends back numbers only (pickled through a pipe).
- **Two passes.** A transition into the compaction at ``j`` (coming from one at ``k``) reads the
  cache against run ``j``'s request ``j``, which run ``k``'s child does not have. So the first
  pass forks a child per request that sends back its request ``k`` compacted (its segments), and
  the second forks one per request that compacted there, which prices its own requests and its
  transitions into every later compaction the first pass found.
- **Horizon.** With ``horizon`` ``H``, a child replays at most ``H`` requests: the programme then
  chooses among the schedules whose compactions are at most ``H`` requests apart, the last of
  them at most ``H`` before the end (or no compaction). That bounds the optimal's saving from
  below: online ÷ that optimal is at least online ÷ the optimal. ``None``: every child replays to
  the end, the figures those of ``bench.optimal_real``'s runs.
- **Looks.** The never-compacting replay looks for a warm cut at every request (the oracle
  answers), and a child after its compaction not at all: a look changes the schedule's memory
  only, which the oracle does not read, so the forwarded bytes are those of a run that looks at
  multiples of ``k`` (``bench.optimal_real``'s).
- **Prices.** The runs are replayed at the job's first price and priced at every price. When the
  oracle handed a choice to prune's own schedule (over the budget's trigger, or cold) anywhere
  in them, their bytes may depend on the price, and the whole procedure is run again at each of
  the other prices (as ``bench.optimal_real.oracle_tracks``).

POSIX only (``os.fork``); the replay holds no threads while it forks."""

from __future__ import annotations

import dataclasses
import gc
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from bench.cache_emulator import CacheUse, Pricing, Segments
from bench.cost_config import Job
from bench.optimal_replay import HANDED_ON, oracle
from rules.context import prune

if TYPE_CHECKING:
    from bench.optimal_real import Track

T = TypeVar("T")
NEVER_AGAIN = 1 << 30  # a look period no request reaches: the child does not look again


@dataclass
class Runs:
    """One price's runs, as the programme reads them (see the module docstring)."""

    never: list[CacheUse]  # the never-compacting run's requests
    first: dict[int, CacheUse] = field(default_factory=dict)  # run k's request k, where it cut
    after: dict[int, list[CacheUse]] = field(default_factory=dict)  # run k's k+1, k+2, …
    into: dict[int, dict[int, CacheUse]] = field(default_factory=dict)  # k -> j -> transition
    ends: set[int] = field(default_factory=set)  # runs k replayed to the end
    handed_on: int = 0  # choices the oracle handed to prune's own schedule in them


def _die_with_parent() -> None:
    """On Linux, the child is killed when its parent dies (a pool terminated, a bench stopped):
    no orphan goes on replaying a whole session."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def in_child(work: Callable[[], T]) -> T:
    """``work()`` run in a forked child of this process; its result, pickled back. An exception
    in the child is raised here with the child's traceback."""
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        raise
    if pid == 0:  # the child: never returns
        status = 0
        try:
            os.close(read)
            _die_with_parent()
            gc.freeze()  # what it inherited is not scanned, so its pages stay shared
            try:
                data = pickle.dumps(("ok", work()), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException:
                data = pickle.dumps(("error", traceback.format_exc()))
            with os.fdopen(write, "wb") as out:
                out.write(data)
        except BaseException:
            status = 1
        os._exit(status)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as source:
            data = source.read()
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        raise RuntimeError(f"a forked replay died (wait status {status})")
    kind, value = pickle.loads(data)
    if kind == "error":
        raise RuntimeError(f"a forked replay failed:\n{value}")
    return value  # type: ignore[no-any-return]


class _Driven:
    """The never-compacting replay of a one-price job, request by request (``bench.optimal_real``'s
    recording replay: each request's segments, cache use, compaction and offer)."""

    def __init__(self, job: Job) -> None:
        from bench.optimal_real import _Recorded

        self.replay = _Recorded(job)
        self.track = self.replay.tracks[job.pricings[0].name]
        self.prefixes, self.times = self.replay.requests()

    def __len__(self) -> int:
        return len(self.prefixes)

    def step(self, k: int) -> None:
        last = k == len(self.prefixes) - 1
        self.replay.step(self.prefixes[k], self.times[k], last=last)


@contextmanager
def _looking_every_request(at: set[int]) -> Iterator[None]:
    """The oracle compacting at the requests of ``at`` (read at each choice: a child sets its
    own), prune looking at every request."""
    with oracle(at, 1):
        yield


def _first_pass(job: Job, seg: Segments) -> tuple[Track, dict[int, list[bytes]], int]:
    """The never-compacting run (its track) and, per request where the oracle's compaction
    edited something, that request compacted: its segments (counted in ``seg`` here, so the
    second pass's children inherit the counts). A child is forked at every request: whether
    the never-compacting run's look there finds something is known only once it is made."""
    at: set[int] = set()
    firsts: dict[int, list[bytes]] = {}
    interned: dict[bytes, bytes] = {}
    handed = HANDED_ON[0]
    with _looking_every_request(at):
        driven = _Driven(job)
        for k in range(len(driven)):
            if k:

                def compacted_here(k: int = k) -> tuple[bool, list[bytes], int]:
                    at.add(k)
                    before = HANDED_ON[0]
                    driven.step(k)
                    cut = driven.track.compacted[k]
                    return cut, driven.track.segments[k] if cut else [], HANDED_ON[0] - before

                cut, segments, child_handed = in_child(compacted_here)
                HANDED_ON[0] += child_handed
                if cut:
                    kept = [interned.setdefault(s, s) for s in segments]
                    for s in kept:
                        seg.count(s)
                    firsts[k] = kept
            driven.step(k)
            for s in driven.track.segments[k]:
                seg.count(interned.setdefault(s, s))
    return driven.track, firsts, HANDED_ON[0] - handed


def collect(job: Job, horizon: int | None, seg: Segments) -> tuple[Track, Runs]:
    """The runs of a one-price ``job`` (the ctxproxy lane alone): the never-compacting track and
    the programme's figures (see the module docstring)."""
    from bench.optimal_real import transition

    never, firsts, handed = _first_pass(job, seg)
    n = len(never.uses)
    usable = sorted(k for k in firsts if never.offered[k])
    runs = Runs(list(never.uses), handed_on=handed)
    at: set[int] = set()
    with _looking_every_request(at):
        driven = _Driven(job)
        for k in range(n):
            if k in firsts and never.offered[k]:
                end = n if horizon is None else min(n, k + horizon)
                later = [j for j in usable if k < j <= min(end, n - 1)]

                def run_k(
                    k: int = k, end: int = end, later: list[int] = later
                ) -> tuple[list[CacheUse], dict[int, CacheUse], int]:
                    at.add(k)
                    before_handed = HANDED_ON[0]
                    mine = driven.track
                    before = never.segments[k - 1] if k else None
                    into: dict[int, CacheUse] = {}
                    wanted = set(later)
                    for i in range(k, end):
                        driven.step(i)
                        if i == k:
                            prune.WARM_LOOK_EVERY = NEVER_AGAIN
                        if i + 1 in wanted:
                            into[i + 1] = transition(seg, before, mine.segments[i],
                                                     firsts[i + 1])  # fmt: skip
                    return list(mine.uses[k:end]), into, HANDED_ON[0] - before_handed

                uses, into, child_handed = in_child(run_k)
                runs.handed_on += child_handed
                if uses:
                    runs.first[k] = uses[0]
                    runs.after[k] = uses[1:]
                    runs.into[k] = into
                    if k + len(uses) == n:
                        runs.ends.add(k)
            driven.step(k)
    return never, runs


def programme(runs: Runs, p: Pricing) -> tuple[float, tuple[int, ...]]:
    """The least-cost schedule over ``runs`` at price ``p``: ``bench.optimal_real.programme``'s,
    its transitions precomputed, and within the runs' horizon (a transition or an end a run did
    not reach is not a choice)."""
    n = len(runs.never)
    head = [0.0]
    for u in runs.never:
        head.append(head[-1] + p.cost(u))
    sums: dict[int, list[float]] = {}  # run k: the sum of its requests k+1 … k+m
    for k, uses in runs.after.items():
        acc = [0.0]
        for u in uses:
            acc.append(acc[-1] + p.cost(u))
        sums[k] = acc
    usable = sorted(runs.first)
    best: dict[int, tuple[float, int]] = {}
    for j in usable:
        top = (head[j] + p.cost(runs.first[j]), -1)
        for k in usable:
            if k >= j:
                break
            use = runs.into[k].get(j)
            if use is None:  # beyond run k's horizon
                continue
            total = best[k][0] + sums[k][j - k - 1] + p.cost(use)
            if total < top[0]:
                top = (total, k)
        best[j] = top
    final, last = head[n], -1
    for k in usable:
        if k in runs.ends:
            total = best[k][0] + sums[k][n - k - 1]
            if total < final:
                final, last = total, k
    chosen: list[int] = []
    while last != -1:
        chosen.append(last)
        last = best[last][1]
    return final, tuple(reversed(chosen))


def runs_at_prices(
    job: Job, horizon: int | None, seg_of: Callable[[Job], Segments]
) -> dict[str, Runs]:
    """Per price of ``job`` (its ctxproxy lanes alone), the runs: shared by the prices unless the
    oracle handed a choice on in them."""
    first = dataclasses.replace(job, pricings=job.pricings[:1])
    _, runs = collect(first, horizon, seg_of(first))
    out = {p.name: runs for p in job.pricings}
    if runs.handed_on:
        for p in job.pricings[1:]:
            alone = dataclasses.replace(job, pricings=(p,))
            out[p.name] = collect(alone, horizon, seg_of(alone))[1]
    return out


def schedules(
    job: Job, horizon: int | None, seg_of: Callable[[Job], Segments]
) -> dict[str, tuple[float, tuple[int, ...], list[CacheUse]]]:
    """Per price: the programme's cost, its schedule, and the never-compacting run's uses."""
    out = {}
    for name, runs in runs_at_prices(job, horizon, seg_of).items():
        p = next(q for q in job.pricings if q.name == name)
        cost, chosen = programme(runs, p)
        out[name] = (cost, chosen, runs.never)
    return out
