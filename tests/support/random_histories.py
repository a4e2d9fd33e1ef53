"""What the random-history tests of the protocol adapters share: a seeded generator's call ids
and the roles of a history's turns (mostly alternating, sometimes one role twice in a row)."""

from __future__ import annotations

import random
from collections.abc import Iterator

SEED = 20261203
HISTORIES = 400


def histories(prefix: str) -> Iterator[tuple[int, random.Random, list[str]]]:
    """For each of ``HISTORIES`` histories: its number, the seeded generator, and its call ids."""
    rng = random.Random(SEED)
    for n in range(HISTORIES):
        yield n, rng, call_ids(rng, prefix)


def call_ids(rng: random.Random, prefix: str) -> list[str]:
    """One to three ids for a history's calls and results to share at random."""
    return [f"{prefix}{j}" for j in range(rng.randint(1, 3))]


def turn_roles(rng: random.Random, model: str, user: str) -> list[str]:
    """One to six turns after the task, the model's first, about one in four breaking the
    alternation (a client that sends each result as its own message, a user who types while a
    tool runs)."""
    return [
        model if (t % 2 == 0) != (rng.random() < 0.25) else user for t in range(rng.randint(1, 6))
    ]
