"""bench.end_odds and bench.end_features: the ranking and survival figures, the learner, the
upside's bill change, and the generic features of a request."""

from __future__ import annotations

import math
from typing import Any

from bench.end_features import FEATURES, features
from bench.end_odds import _bill_change, auc, fit, predict, survival_end


def test_auc_ranks_the_positives_above_the_negatives() -> None:
    assert auc([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert auc([0.1, 0.2, 0.9, 0.8], [1, 1, 0, 0]) == 0.0
    assert auc([0.5, 0.5], [1, 0]) == 0.5  # a tie counts half
    assert math.isnan(auc([0.3], [1]))


def test_survival_end_is_the_share_of_sessions_this_far_that_end_within_the_payback() -> None:
    table = (3, 10, 20, 100)
    # request index 5 (6 requests made): 10, 20 and 100 got this far; 10 ends within 10 more
    assert survival_end(5, 10.0, table) == (1 + 0.5) / (3 + 1)
    assert survival_end(5, 100.0, table) == (3 + 0.5) / (3 + 1)


def test_the_learner_separates_a_feature_that_predicts() -> None:
    rows = [[float(i % 2), float(i % 3)] for i in range(60)]
    labels = [i % 2 for i in range(60)]
    model = fit(rows, labels, steps=500)
    assert predict(model, [1.0, 0.0]) > 0.8 > 0.2 > predict(model, [0.0, 0.0])


def test_leaving_a_cut_out_saves_its_bust_less_the_carrying_it_avoided() -> None:
    point: dict[str, Any] = {"scale": 2.0, "bust": 1000.0, "r": 0.1, "freed": 500, "remaining": 4}
    assert _bill_change(point) == -2.0 * (1000 - 0.1 * 500 * 4)
    point["remaining"] = 40  # a cut that repaid: leaving it out costs
    assert _bill_change(point) > 0


def _call(n: int, command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "Tests pass; now a final check of the diff." if n == 9 else "Looking.",
        "tool_calls": [
            {"id": f"c{n}", "type": "function",
             "function": {"name": "bash", "arguments": f'{{"command": "{command}"}}'}}
        ],
    }  # fmt: skip


def test_features_read_test_output_diffs_prose_edits_and_repeats() -> None:
    commands = ["ls", "cat src/app.py", "sed -i s/a/b/ src/app.py", "pytest", "ls", "ls", "ls",
                "ls", "pytest", "git diff"]  # fmt: skip
    outputs = ["a", "x", "", "1 failed", "a", "a", "a", "a", "3 passed", "diff --git a/x b/x"]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for n, (command, out) in enumerate(zip(commands, outputs, strict=True)):
        messages += [_call(n, command), {"role": "tool", "tool_call_id": f"c{n}", "content": out}]
    sizes = [100 * (k + 1) for k in range(len(commands))]
    x = dict(zip(FEATURES, features(messages, sizes), strict=True))
    assert x["pass_last"] == 1.0 and x["fail_last"] == 0.0  # the last two results: passed, diff
    assert x["diff_last"] == 1.0 and x["done_prose"] == 0.0 and x["final_prose"] == 1.0
    assert x["repeat"] == 5 / 6  # of the last 6 calls, all but the first `git diff` ran before
    assert x["since_edit"] == math.log1p(7)  # the edit was the third of ten turns
    assert x["edits"] == 1 / 10
    assert x["growth"] == (1000 - 500) / (5 * 100)
    early = dict(zip(FEATURES, features(messages[:9], sizes[:4]), strict=True))
    assert early["fail_last"] == 1.0 and early["pass_last"] == 0.0 and early["diff_last"] == 0.0
