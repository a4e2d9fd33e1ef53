"""inject: placeholder until its issue lands; passes messages through."""

from __future__ import annotations

from rules.base import Context, RuleConfig, RuleResult


class Config(RuleConfig):
    pass


def apply(ctx: Context, cfg: Config) -> RuleResult:
    return RuleResult.unchanged(ctx)
