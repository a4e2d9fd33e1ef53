"""A bench's conversations spread over worker processes (fork where the platform has it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

J = TypeVar("J")
R = TypeVar("R")


def map_jobs(task: Callable[[J], R], jobs: Sequence[J], workers: int) -> list[R]:
    """``task`` of every job, in one process for ``workers`` ≤ 1, else in a pool (any order)."""
    if workers <= 1:
        return [task(j) for j in jobs]
    import multiprocessing as mp

    context = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
    with context.Pool(workers) as pool:
        return list(pool.imap_unordered(task, jobs, chunksize=1))
