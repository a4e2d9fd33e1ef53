"""bench/store_growth.py works end to end on a small run: real rows from replayed traces, written
through the store, measured with and without payloads (the full day is a benchmark, not CI)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench.store_growth import DAY_ROWS, main


def test_a_small_run_measures_rows_and_bytes(
    traces_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--rows", "1000", "--payload-rows", "100", "--conversations", "2", "--max-steps", "15"]
    assert main([*args, "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert DAY_ROWS == 864_000
    assert out["sample"]["conversations"] == 2 and 0 < out["sample"]["rows"] <= 30
    log, payloads = out["log"], out["log_with_payloads"]
    assert (log["rows"], payloads["rows"]) == (1000, 100)
    assert 500 < log["bytes_per_row"] < payloads["bytes_per_row"]
    assert log["column_bytes_per_row"]["report"] > 0
    assert log["column_bytes_per_row"]["request_body"] == 0
    assert payloads["column_bytes_per_row"]["request_body"] > 0
    assert log["bytes_per_day"] == pytest.approx(log["bytes_per_row"] * DAY_ROWS)
    assert main(args) == 0
    assert "| false | 1,000 |" in capsys.readouterr().out
