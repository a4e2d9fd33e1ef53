"""One corpus conversation as a bench job: every turn, direct against the defaults, one price."""

from __future__ import annotations

import pytest

from bench.cost_config import PRICES, Job, parse_variant
from tests.support.traces import CORPUS, iter_conversations


def every_turn_job(conv_id: str, price: str = "0.5", max_requests: int = 30) -> Job:
    """The job replaying ``conv_id``; the test is skipped when the corpus lacks it (or there is
    no corpus: ../shared is not beside the checkout)."""
    if not CORPUS.exists():
        pytest.skip(f"no corpus at {CORPUS}")
    conv = next((c for c in iter_conversations() if c["id"] == conv_id), None)
    if conv is None:
        pytest.skip(f"{conv_id} is not in the corpus")
    methods = (parse_variant("direct"), parse_variant("defaults"))
    return Job(conv, methods, (PRICES[price],), 0, cadence="every-turn", max_requests=max_requests)
