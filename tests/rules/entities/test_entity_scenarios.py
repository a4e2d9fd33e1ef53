"""Entities beyond files on their scenario set (scenarios/entities.yaml: 200 scenarios in en, zh,
ko, ja over branches, commits, tags, stashes, containers, images, servers, tables, rows,
virtualenvs, packages, cluster and cloud resources, API-created objects, relations, sub-agents
and must-abstain cases), run as a live proxy would see them (tests/support/scenarios.py). The bar:
at least 95% pass, every must-abstain case abstains, and no resolution above the threshold
points anywhere but where it should (bench/entities_eval.py prints the tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.entities_eval import calibration, table
from rules.entities import resolve_refs
from tests.support.scenarios import Scenario, load, run

SET = Path(__file__).resolve().parent / "scenarios" / "entities.yaml"
SCENARIOS = load(SET)


@pytest.mark.parametrize("scenario", [pytest.param(sc, id=sc.id) for sc in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.passed, outcome.describe()


def test_the_set_covers_every_language_and_class() -> None:
    assert len(SCENARIOS) >= 150
    assert {sc.lang for sc in SCENARIOS} == {"en", "zh", "ko", "ja"}
    classes = {sc.cls for sc in SCENARIOS}
    assert {"non_file", "relation", "parent", "abstain"} <= classes
    for lang in ("en", "zh", "ko", "ja"):
        assert sum(sc.lang == lang and sc.cls == "abstain" for sc in SCENARIOS) >= 10


def test_calibration_no_confident_wrong_pointer() -> None:
    outcomes = [run(sc) for sc in SCENARIOS]
    cal = calibration(outcomes, resolve_refs.Config().threshold)
    assert cal["confident_wrong"] == 0, [
        o.describe() for o in outcomes if o.resolved and not o.passed
    ]
    assert cal["precision"] >= 0.95
    assert cal["coverage"] >= 0.95
    lines = table(outcomes)
    assert lines[0].startswith("| kind | en | zh | ko | ja |")
    assert any(line.startswith("| abstain |") for line in lines)
