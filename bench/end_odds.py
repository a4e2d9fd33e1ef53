"""Can a rule tell, at a warm cut break-even makes, that the session ends before the cut repays?
On the cuts ``bench.end_points`` records (the defaults on whole sessions, every turn), the label
is "ends within the payback": fewer requests follow the cut than its price over ``r`` × the
tokens it freed. Predictors, learned on the train half only (``bench/split.py``) and measured on
the held-out half:

- ``survival``: what the rule has today, the request count: the share of the sessions in
  ``rules/packs/survival.yaml`` (train-half lengths) that got this far and end within the
  payback;
- each generic feature of ``bench/end_features.py`` alone (its sign learned on train);
- a logistic regression on the survival estimate's logit and those features (L2, standardised
  on train).

Reported: AUC (the chance a session that ends within the payback scores above one that does
not), the Brier score, calibration by quartile of the prediction, and what a guard deferring the
cuts predicted to end (p > 1/2) would have saved on held-out: the sum, over the cuts it defers,
of the price less the carrying the cut would have avoided until the session's end (positive:
the deferral saves; a deferred cut is counted as never made, the bound on both sides). Then the
features' AUC gain with a 90% interval over resampled held-out conversations, and the
conversations above 1.02 of direct per price: as replayed, with every cut that ends within its
payback left out (the oracle: what no guard can beat), and on held-out with a guard at each of
``THRESHOLDS``.

    .venv/bin/python -m bench.end_points --out points.json     # ~3 min, 1 core
    .venv/bin/python -m bench.end_odds points.json"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections import defaultdict
from typing import Any

from bench.end_features import FEATURES, features
from rules.packs import load_pack
from tests.support.traces import iter_conversations, request_prefixes


def survival_end(k: int, payback: float, table: tuple[int, ...]) -> float:
    """Of the sessions in ``table`` that made request ``k`` (0-based), the share that end
    before ``payback`` more requests follow it (smoothed: one pseudo-session each way)."""
    alive = [n for n in table if n >= k + 1]
    ending = sum(1 for n in alive if n - k - 1 < payback)
    return (ending + 0.5) / (len(alive) + 1)


def auc(scores: list[float], labels: list[int]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x > -30 else 0.0


def fit(rows: list[list[float]], labels: list[int], l2: float = 0.05, steps: int = 4000):
    """Logistic regression by gradient descent on standardised columns: (means, scales,
    weights, bias)."""
    d = len(rows[0])
    means = [sum(r[j] for r in rows) / len(rows) for j in range(d)]
    scales = [
        math.sqrt(sum((r[j] - means[j]) ** 2 for r in rows) / len(rows)) or 1.0 for j in range(d)
    ]
    z = [[(r[j] - means[j]) / scales[j] for j in range(d)] for r in rows]
    w, b = [0.0] * d, 0.0
    lr, n = 0.3, len(z)
    for _ in range(steps):
        gw, gb = [l2 * x for x in w], 0.0
        for x, y in zip(z, labels, strict=True):
            e = _sigmoid(sum(a * c for a, c in zip(w, x, strict=True)) + b) - y
            gb += e / n
            for j in range(d):
                gw[j] += e * x[j] / n
        w = [a - lr * g for a, g in zip(w, gw, strict=True)]
        b -= lr * gb
    return means, scales, w, b


def predict(model: Any, row: list[float]) -> float:
    means, scales, w, b = model
    return _sigmoid(
        b + sum(c * (x - m) / s for c, x, m, s in zip(w, row, means, scales, strict=True))
    )


def brier(p: list[float], y: list[int]) -> float:
    return sum((a - b) ** 2 for a, b in zip(p, y, strict=True)) / max(len(y), 1)


def calibration(p: list[float], y: list[int]) -> str:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out = []
    for q in range(4):
        idx = order[q * len(order) // 4 : (q + 1) * len(order) // 4]
        if idx:
            out.append(
                f"{sum(p[i] for i in idx) / len(idx):.2f}→{sum(y[i] for i in idx) / len(idx):.2f}"
            )
    return "  ".join(out)


def enrich(points: list[dict[str, Any]]) -> None:
    """Each point's label, survival estimate and features (from the corpus' request)."""
    table = tuple(sorted(int(n) for n in load_pack("survival")["lengths"]))
    by_conv: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        by_conv[p["id"]].append(p)
    for conv in iter_conversations():
        mine = by_conv.get(conv["id"])
        if not mine:
            continue
        prefixes = list(request_prefixes(conv["messages"]))
        sizes, total, seen = [], 0, 0
        for prefix in prefixes:
            total += sum(len(json.dumps(m)) for m in prefix[seen:])
            seen = len(prefix)
            sizes.append(total)
        for p in mine:
            payback = p["price"] / max(p["r"] * p["freed"], 1e-9)
            p["payback"] = payback
            p["ends"] = int(p["remaining"] < payback)
            p["value"] = p["price"] - p["r"] * p["freed"] * p["remaining"]  # saved by deferring
            p["survival"] = survival_end(p["k"], payback, table)
            p["x"] = features(prefixes[p["k"]], sizes[: p["k"] + 1])


def report(points: list[dict[str, Any]]) -> Any:
    """Print the comparison; the model of survival + features, learned on train."""
    train = [p for p in points if p["half"] == "train"]
    held = [p for p in points if p["half"] == "held-out"]
    yt, yh = [p["ends"] for p in train], [p["ends"] for p in held]
    print(f"cut points: train {len(train)} ({sum(yt)} end within payback), "
          f"held-out {len(held)} ({sum(yh)})")  # fmt: skip
    print(f"{'predictor':<24} {'AUC held-out':>12} {'AUC train':>10}")
    s_h, s_t = [p["survival"] for p in held], [p["survival"] for p in train]
    print(f"{'survival (count)':<24} {auc(s_h, yh):>12.3f} {auc(s_t, yt):>10.3f}")
    for j, name in enumerate(FEATURES):
        ft, fh = [p["x"][j] for p in train], [p["x"][j] for p in held]
        sign = 1 if auc(ft, yt) >= 0.5 else -1
        at, ah = auc([sign * v for v in ft], yt), auc([sign * v for v in fh], yh)
        print(f"{name + (' (-)' if sign < 0 else ''):<24} {ah:>12.3f} {at:>10.3f}")
    models = {
        "features alone": lambda p: p["x"],
        "survival + features": lambda p: [_logit(p["survival"]), *p["x"]],
    }
    preds = {"survival (count)": (s_h, s_t)}
    m: Any = None
    for name, row in models.items():
        m = fit([row(p) for p in train], yt)
        ph, pt = [predict(m, row(p)) for p in held], [predict(m, row(p)) for p in train]
        preds[name] = (ph, pt)
        print(f"{'logit: ' + name:<24} {auc(ph, yh):>12.3f} {auc(pt, yt):>10.3f}")
        names = ["survival"] * (len(m[2]) - len(FEATURES)) + list(FEATURES)
        weights = ", ".join(f"{n} {w:+.2f}" for n, w in zip(names, m[2], strict=True))
        print(f"   weights: {weights}")
    print("\nheld-out: Brier, calibration (mean predicted → observed, by quartile), and a guard")
    print("deferring p > 1/2: cuts deferred (of them ending), tokens saved by deferring (+)")
    oracle = sum(p["value"] for p in held if p["value"] > 0)
    for name, (ph, _) in preds.items():
        deferred = [p for p, q in zip(held, ph, strict=True) if q > 0.5]
        saved, ending = sum(p["value"] for p in deferred), sum(p["ends"] for p in deferred)
        print(f"  {name:<22} Brier {brier(ph, yh):.3f}  {calibration(ph, yh)}  "
              f"defers {len(deferred)} ({ending}): {saved:+,.0f}")  # fmt: skip
    print(f"  {'oracle':<22} defers the {sum(p['value'] > 0 for p in held)} that do not repay: "
          f"{oracle:+,.0f}")  # fmt: skip
    for r in sorted({p["r"] for p in points}):
        sub = [
            (p, q)
            for p, q in zip(held, preds["survival + features"][0], strict=True)
            if p["r"] == r
        ]
        ys = [p["ends"] for p, _ in sub]
        print(f"  r = {r}: {len(sub)} held-out cuts, {sum(ys)} end; AUC survival "
              f"{auc([p['survival'] for p, _ in sub], ys):.3f}, survival + features "
              f"{auc([q for _, q in sub], ys):.3f}")  # fmt: skip
    for source in sorted({p["source"] for p in held}):
        sub = [(p, q) for p, q in zip(held, preds["survival + features"][0], strict=True)
               if p["source"] == source]  # fmt: skip
        ys = [p["ends"] for p, _ in sub]
        if sum(ys) >= 5:  # an agent with enough cuts that end to rank them
            print(f"  {source[:40]}: {len(sub)} held-out cuts, {sum(ys)} end; AUC survival "
                  f"{auc([p['survival'] for p, _ in sub], ys):.3f}, survival + features "
                  f"{auc([q for _, q in sub], ys):.3f}")  # fmt: skip
    return m


def _bill_change(p: dict[str, Any]) -> float:
    """What leaving the cut out would change in the conversation's bill (the provider's tokens;
    negative: a saving): its bust less the carrying it avoided until the session's end, both
    scaled to the provider's count. The cut counted as never made, later cuts as they were."""
    return -p["scale"] * (p["bust"] - p["r"] * p["freed"] * p["remaining"])


def bootstrap_gain(held: list[dict[str, Any]], draws: int = 300) -> tuple[float, float]:
    """The 90% interval of the held-out AUC gain of survival + features (``q``) over survival
    alone, resampling conversations (a session's cuts are not independent), seeded."""
    convs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in held:
        convs[p["id"]].append(p)
    ids, rng, gains = sorted(convs), random.Random(0), []
    for _ in range(draws):
        sample = [p for i in (rng.choice(ids) for _ in ids) for p in convs[i]]
        y = [p["ends"] for p in sample]
        if 0 < sum(y) < len(y):
            gains.append(auc([p["q"] for p in sample], y) - auc([p["survival"] for p in sample], y))
    gains.sort()
    return gains[int(0.05 * len(gains))], gains[int(0.95 * len(gains))]


THRESHOLDS = (0.1, 0.2, 0.3, 0.5)  # the guards tried: defer when the prediction is above


def upside(points: list[dict[str, Any]], model: Any, cap: float = 1.02) -> None:
    """Conversations above ``cap`` × direct, per price: as replayed, with every cut that ends
    within its payback left out (the oracle: no guard can do better), and, on the held-out half,
    with the cuts deferred whose prediction (survival + features, ``model``) is above each of
    ``THRESHOLDS`` (a deferred cut counted as never made: the bound on both sides), with those
    conversations' bill ÷ direct."""
    for p in points:
        p["q"] = predict(model, [_logit(p["survival"]), *p["x"]])
    held = [p for p in points if p["half"] == "held-out"]
    for name, sub in (("all", held), ("r = 0.1", [p for p in held if p["r"] == 0.1])):
        low, high = bootstrap_gain(sub)
        print(f"  held-out AUC gain of the features, {name}: 90% interval {low:+.3f} .. {high:+.3f}"
              " (conversations resampled)")  # fmt: skip
    print(f"\nconversations with a warm cut, above {cap} x direct (a deferred cut counted as never")
    print("made): as replayed, and with every cut ending within its payback left out (oracle);")
    print("held-out: above, and bill / direct, as replayed and with the guard p > t")
    for r in sorted({p["r"] for p in points}):
        convs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for p in points:
            if p["r"] == r:
                convs[p["id"]].append(p)
        over = oracle = 0
        for cuts in convs.values():
            bill, direct = cuts[0]["bill"], cuts[0]["direct_bill"]
            over += bill > cap * direct
            oracle += bill + sum(min(_bill_change(p), 0.0) for p in cuts) > cap * direct
        line = f"  r = {r}: {len(convs)} conversations, {over} above, oracle {oracle}; held-out"
        held = [cuts for cuts in convs.values() if cuts[0]["half"] == "held-out"]
        direct = sum(cuts[0]["direct_bill"] for cuts in held)
        for t in (None, *THRESHOLDS):
            above, billed = 0, 0.0
            for cuts in held:
                bill = cuts[0]["bill"]
                if t is not None:
                    bill += sum(_bill_change(p) for p in cuts if p["q"] > t)
                above += bill > cap * cuts[0]["direct_bill"]
                billed += bill
            line += f" {'as is' if t is None else f'p>{t}'} {above} ({billed / direct:.3f})"
        print(line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("points", help="bench.end_points' output")
    args = parser.parse_args(argv)
    with open(args.points) as f:
        points = json.load(f)
    enrich(points)
    model = report(points)
    upside(points, model)


if __name__ == "__main__":
    main()
