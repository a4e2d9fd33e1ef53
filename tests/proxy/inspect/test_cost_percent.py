"""The session cost line's percentage: a saving that rounds to zero reads "0.0%", unsigned."""

from __future__ import annotations

import pytest

from proxy.inspect.cost_view import SessionCost, cost_text, signed_share


def _cost(cost: float, direct: float) -> SessionCost:
    out = SessionCost()
    out.requests, out.cost, out.direct = 3, cost, direct
    return out


@pytest.mark.parametrize(
    ("cost", "direct"),
    [(1000.0, 1000.0), (999.9999, 1000.0), (1000.0001, 1000.0), (1000.4, 1000.0)],
)
def test_zero_saving_has_no_sign(cost: float, direct: float) -> None:
    text = cost_text(_cost(cost, direct))
    assert "(0.0%)" in text, text
    assert "-0.0%" not in text and "+0.0%" not in text


def test_nonzero_saving_keeps_its_sign() -> None:
    assert "(-25.0%)" in cost_text(_cost(750.0, 1000.0))
    assert "(+10.0%)" in cost_text(_cost(1100.0, 1000.0))


@pytest.mark.parametrize("value", [0.0, -0.0, 0.0004, -0.0004])
def test_signed_share_zero(value: float) -> None:
    assert signed_share(value) == "0.0%"
