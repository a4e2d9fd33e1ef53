"""The cache attribution bench (bench/cache_attribution.py) on a slice of the corpus: a live
``ctxproxy serve`` in front of the emulated provider, idle gaps past the TTL and a budget that
makes prune compact. Every fall of the reported cached tokens is attributed to a known cause, the
proxy's session cost equals the bench's for the forwarded requests, and its estimate of the
direct cost is within a few percent of the bench's emulated direct lane."""

from __future__ import annotations

import orjson
import pytest

from bench import cache_attribution as bench


@pytest.mark.slow
@pytest.mark.needs_shared
def test_every_fall_is_attributed_and_the_cost_line_matches(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "figures.json"
    argv = ["--limit", "4", "--max-requests", "16", "--budget", "6000", "--idle-share", "0.15"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    figures = orjson.loads(out.read_bytes())
    assert figures["fell"] > 0
    assert figures["attributed_share"] >= 0.99
    assert set(figures["causes_of_falls"]) <= {"expiry", "client", "proxy"}
    assert figures["cost_matches_exactly"]
    assert figures["direct_error_max"] < 0.05
    for session in figures["sessions"]:
        assert abs(session["saving"] - session["bench_saving"]) < 0.03
