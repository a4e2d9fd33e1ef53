"""A bench's conversations spread over worker processes (fork where the platform has it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

J = TypeVar("J")
R = TypeVar("R")


def map_jobs(task: Callable[[J], R], jobs: Sequence[J], workers: int) -> list[R]:
    """``task`` of every job, in one process for ``workers`` ≤ 1, else in a pool (any order)."""
    return list(iter_jobs(task, jobs, workers))


def iter_jobs(task: Callable[[J], R], jobs: Sequence[J], workers: int) -> Iterator[R]:
    """``map_jobs``, each result as it comes (a long run can keep what is done so far)."""
    if workers <= 1:
        yield from map(task, jobs)
        return
    import multiprocessing as mp

    context = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
    with context.Pool(workers) as pool:
        yield from pool.imap_unordered(task, jobs, chunksize=1)
