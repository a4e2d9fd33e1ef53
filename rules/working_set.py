"""working_set: placeholder until its issue lands; passes messages through."""

from __future__ import annotations

from rules.base import Context, RuleConfig, RuleResult, SessionState


class Config(RuleConfig):
    pass


def render_section(state: SessionState, max_tokens_hint: int = 400) -> str | None:
    """The "Working set" section of the injected block, or None when there is nothing to say."""
    return None


def apply(ctx: Context, cfg: Config) -> RuleResult:
    return RuleResult.unchanged(ctx)
