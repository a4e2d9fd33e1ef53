"""The golden replay (bench/golden.py) on the first conversations of the corpus: forwarded bodies,
reports and session state are byte-identical to the digests committed in bench/golden.json. The
whole corpus runs with ``python -m bench.golden`` (about 6 minutes); CI runs a prefix of it."""

from __future__ import annotations

import asyncio
import itertools

import orjson
import pytest

from bench.golden import GOLDEN, VARIANTS, differences, replay_variant
from tests.support.traces import iter_conversations

FIRST = 12  # conversations per variant: every variant, a few seconds each


@pytest.mark.slow
@pytest.mark.needs_shared
@pytest.mark.parametrize(("name", "model", "overrides"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_replay_matches_the_committed_digests(
    name: str, model: str, overrides: dict[str, object]
) -> None:
    conversations = list(itertools.islice(iter_conversations(), FIRST))
    got = asyncio.run(replay_variant(model, overrides, conversations))
    assert len(got) == FIRST
    assert differences(orjson.loads(GOLDEN.read_bytes()), {name: got}) == []
