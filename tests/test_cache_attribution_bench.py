"""The cache attribution bench (bench/cache_attribution.py) on a slice of the corpus: a live
``ctxproxy serve`` in front of the emulated provider, idle gaps past the TTL and a budget that
makes prune compact. Every fall of the reported cached tokens is attributed to a known cause, the
proxy's session cost equals the bench's for the forwarded requests, and its estimate of the
direct cost is within a few percent of the bench's emulated direct lane; the schedule's price of
each compaction is near what it was billed."""

from __future__ import annotations

import statistics

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
    # each re-billing compaction: the schedule's price of it near the billed one (they differ by
    # less than the re-bill itself, typically), both priced alike (r = 0.5)
    busts, lines = figures["busts_schedule_vs_billed"], figures["compaction_lines"]
    assert busts["compactions"] == len(lines) > 0
    assert busts["median_gap"] < statistics.mean(line["rebilled_cost"] for line in lines)
    for line in lines:
        account = line["compaction"]
        assert account["bust"] == line["rebilled_cost"] == pytest.approx(line["rebilled"] * 0.5)
        assert account["net_bust"] == pytest.approx(
            account["bust"] - 0.5 * account["freed"], abs=0.2
        )
