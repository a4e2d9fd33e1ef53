"""repair_tool_chain: the forwarded copy of the conversation always satisfies the tool-chain rules
providers enforce (see ``rules.chain.validator``), whatever the agent's history looks like.

Runs first. Repairs, each reported under ``repairs`` as ``{kind, index, tool_call_id, action}``
(``index`` is the message's index in the rule's input): orphan results kept as readable user text,
unanswered calls given one short synthetic result, runaway turns collapsed into one bounded note,
drifted ids matched with ``rules.matching`` and unified, duplicate results merged, misplaced results
moved next to their call, reused or invalid ids renamed on both sides, invalid arguments wrapped in
a JSON object that keeps the raw text, empty ``tool_calls`` removed, empty assistant turns and null
tool contents given a short placeholder. A valid chain comes out as the very same list.

The pure core is ``repair_messages`` (also used by the pipeline's final integrity check).
"""

from __future__ import annotations

from pydantic import Field

from rules.base import Context, RuleConfig, RuleResult
from rules.chain import validator as chain_validator
from rules.chain.call_ids import rule_named
from rules.chain.repairs import repair_messages

__all__ = ["Config", "apply", "repair_messages"]


class Config(RuleConfig):
    max_synthetic_results: int = Field(
        default=16,
        ge=1,
        description="more unanswered calls in one turn = a runaway: one bounded note instead "
        "of a result each",
    )
    match_drifted_ids: bool = Field(
        default=True,
        description="match results whose id drifted (case, whitespace, fullwidth forms) to "
        "their call",
    )


def apply(ctx: Context, cfg: Config) -> RuleResult:
    if not chain_validator.violations_of(ctx):  # a valid chain (the usual case)
        return RuleResult.unchanged(ctx, {"repairs": []})
    messages, repairs = repair_messages(
        ctx.messages,
        max_synthetic_results=cfg.max_synthetic_results,
        match_drifted_ids=cfg.match_drifted_ids,
        memo=ctx.table(chain_validator.MEMO),
        rule=rule_named(ctx.call_ids),
    )
    if messages is ctx.messages:
        return RuleResult.unchanged(ctx, {"repairs": []})
    return RuleResult(messages, ctx.state, {"repairs": repairs})
