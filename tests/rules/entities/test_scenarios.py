"""The reference resolver on blind multi-turn scenario sets (scenarios/set_a.yaml, set_b.yaml:
written by someone who had not read the lexicons; see docs/rules/resolve_refs.md). Each scenario
runs as a live proxy would see it (tests/support/scenarios.py). The bar is a pass rate of at
least 95% per set; scenarios still missed are listed below, strictly expected to fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.scenarios import Scenario, load, run

HERE = Path(__file__).resolve().parent / "scenarios"
SETS = (
    "set_a.yaml",
    "set_b.yaml",
    "set_es.yaml",
    "set_fr.yaml",
    "set_de.yaml",
    "set_pt.yaml",
    "set_ru.yaml",
    "set_it.yaml",
    "set_tr.yaml",
    "set_hi.yaml",
)
BAR = 0.95
# (set, id) -> why it still fails: kept visible, not hidden
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


def _scenarios() -> list[Scenario]:
    return [sc for name in SETS if (HERE / name).exists() for sc in load(HERE / name)]


SCENARIOS = _scenarios()


def _param(sc: Scenario) -> object:
    why = KNOWN_FAILURES.get((sc.source, sc.id))
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(sc, id=f"{sc.source.removesuffix('.yaml')}:{sc.id}", marks=marks)


@pytest.mark.parametrize("scenario", [_param(sc) for sc in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.passed, outcome.describe()


@pytest.mark.parametrize("name", SETS)
def test_pass_rate_meets_the_bar(name: str) -> None:
    if not (HERE / name).exists():
        pytest.skip(f"{name} not written yet")
    outcomes = [run(sc) for sc in load(HERE / name)]
    rate = sum(o.passed for o in outcomes) / len(outcomes)
    misses = [o.describe() for o in outcomes if not o.passed]
    assert rate >= BAR, misses
    listed = {i for s, i in KNOWN_FAILURES if s == name}
    assert {o.scenario.id for o in outcomes if not o.passed} == listed


# ----- the harness itself, on scenarios of its own -----


def _sc(
    steps: list[dict[str, object]], ask: str, expect: dict[str, object], **kw: object
) -> Scenario:
    return Scenario(
        id="t",
        lang="en",
        cls="harness",
        cwd=str(kw.get("cwd", "/home/u/proj")),
        steps=tuple(steps),
        ask=ask,
        expect=expect,
        parent=kw.get("parent"),  # type: ignore[arg-type]
    )


def test_harness_resolves_relative_to_the_starting_directory() -> None:
    steps = [{"shell": "mkdir build", "exit": 0, "output": ""}]
    sc = _sc(steps, "delete the folder I just created", {"path": "/home/u/proj/build"})
    assert run(sc).passed


def test_harness_failed_commands_and_waits() -> None:
    failed = [{"shell": "mkdir /x/y", "exit": 1, "output": "mkdir: cannot create directory"}]
    assert run(_sc(failed, "delete the folder I just created", {"abstain": True})).passed
    stale = [{"shell": "mkdir a", "exit": 0}, {"wait": 3700}]
    assert run(_sc(stale, "delete the folder I just created", {"abstain": True})).passed
    assert not run(_sc(stale[:1], "delete the folder I just created", {"abstain": True})).passed


def test_harness_file_tools_and_user_turns() -> None:
    steps = [
        {"user": "write a note"},
        {"tool": "write_file", "args": {"path": "notes.md", "content": "x"}, "ok": True},
        {"tool": "write_file", "args": {"path": "/nope/a.md", "content": "x"}, "ok": False},
    ]
    assert run(_sc(steps, "open that file", {"path": "/home/u/proj/notes.md"})).passed


def test_harness_sub_agent_sees_the_parent() -> None:
    parent = {"cwd": "/srv/app", "steps": [{"shell": "mkdir cache", "exit": 0}]}
    sc = _sc([{"user": "look around"}], "delete the folder you just created",
             {"path": "/srv/app/cache"}, parent=parent)  # fmt: skip
    outcome = run(sc)
    assert outcome.passed
    assert [c["session"] for c in outcome.references[0]["chain"]] == ["agent", "lead"]
    # "I" in a sub-agent's message is its lead: the lead's entities are searched first
    mine = run(_sc([{"shell": "mkdir own", "exit": 0}], "delete the folder I just created",
                   {"path": "/srv/app/cache"}, parent=parent))  # fmt: skip
    assert mine.passed
    assert [c["session"] for c in mine.references[0]["chain"]] == ["lead"]
