"""prune's options (``prune.Config``): its budget's stages, the schedule's waits and bets, and
the room kept for inject."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rules.base import RuleConfig
from rules.context import inject


class Config(RuleConfig):
    max_result_tokens: int = Field(
        default=8_000, ge=100, description="a larger tool result is capped when it first appears"
    )
    max_evidence_tokens: int = Field(
        default=32_000, ge=100, description="the latest failure stays whole up to this size"
    )
    target_ratio: float = Field(
        default=0.5, gt=0, le=1,
        description="the deepest a compaction goes: not below this share of the budget, unless "
        "nothing less makes the request fit",
    )  # fmt: skip
    min_gain_ratio: float = Field(
        default=0.05, ge=0, le=1,
        description="a compaction that cannot bring the request under the budget must free this "
        "share of it (else the request goes as it is, over budget); under the budget the "
        "break-even rule decides",
    )  # fmt: skip
    min_gain_tokens: int | None = Field(
        default=None,
        ge=0,
        description="absolute minimum gain, in tokens; when set, wins over `min_gain_ratio`",
    )
    keep_last_observations: int = Field(
        default=10, ge=0, description="the mask stage keeps the last M tool results whole"
    )
    keep_last_writes: int = Field(
        default=3, ge=0, description="the last N write results are protected as evidence"
    )
    keep_last_turns: int = Field(
        default=4, ge=0, description="the shrink stage leaves the last N assistant turns whole"
    )
    shrink_lines: int = Field(
        default=3, ge=1, description="the shrink stage keeps this many first lines of old prose"
    )
    shrink_arg_chars: int = Field(
        default=400,
        ge=40,
        description="the shrink stage replaces a longer string argument of an old call by a "
        "placeholder (the JSON stays valid)",
    )
    drop_turns: bool = Field(default=True, description="last resort: drop whole oldest turns")
    restore_elided: bool = Field(
        default=False,
        description="a compaction the budget forces re-judges the results earlier ones masked "
        "or dropped that the agent's last calls point at again: one that now ranks above what "
        "is still shown comes back verbatim; off by default (docs/rules/prune.md: it raised "
        "the 32k bill on whole sessions)",
    )
    workspace_reads: int = Field(
        default=0,
        ge=0,
        description="a read of one of the last N files the workspace map shows the agent "
        "working on, unchanged since, counts as needed (kept rather than read again); 0: off "
        "(docs/rules/prune.md: its measured effect)",
    )
    loss_weights: dict[str, float] = Field(
        default={"supersede": 0.0, "mask": 1.0, "shrink": 1.0, "drop": 1.0},
        description="multiplies each stage's expected loss: the re-read a removal forces (the "
        "prompt again at the cache price, the removed tokens fresh) times the chance it is "
        "needed again (rules/packs/reuse.yaml); 0 ignores it",
    )
    bet_on_length: bool = Field(
        default=False,
        description="under the budget with a warm cache, also compact once carrying has cost "
        "half a cut's price when the session's expected remaining requests say the cut repays "
        "twice its price (at most 3x the best schedule whatever the session's length; "
        "docs/rules/prune.md: its measured effect); off: break-even alone",
    )
    bet_budget_share: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="under the budget with a warm cache, also bet on the session's expected "
        "remaining requests (as bet_on_length) when the cut's whole price fits the risk budget: "
        "what the session's cuts saved (carrying avoided less their price) plus this share of its "
        "bill (the bound is in the schedule's accounting: docs/rules/prune.md); measured, it "
        "raised online/optimal at r = 0.1 only (0.61 to 0.65 in the first 40 requests); off "
        "(unset): no such bet",
    )  # fmt: skip
    warm_risk_share: float | None = Field(
        default=0.10, ge=0.0, le=1.0,
        description="under the budget with a warm cache, every cut the budget does not force "
        "(break-even's, free ones included) waits until its whole price fits the risk budget "
        "(bet_budget_share's ledger, with this share of the bill): the schedule's accounting "
        "then bills at most this share more than never cutting, whatever the session's length "
        "(docs/rules/prune.md: the bound and its measured effect); null: break-even alone. "
        "Whole sessions, r = 0.1, chat: 0.10 bills 0.870 of direct, 17 of 186 above 1.02x, "
        "0.81 of the optimum's saving (0.05: 0.888, 10, 0.70; null: 0.869, 19, 0.82)",
    )  # fmt: skip
    warm_threshold: Literal["break_even", "randomised", "randomised_session"] = Field(
        default="break_even",
        description="under the budget with a warm cache, a cut is made once carrying has cost "
        "its price (break_even: at most 2x the best schedule), or a share of it drawn by a "
        "stable hash of the session and the cut's first message (randomised) or of the session "
        "(randomised_session): at most e/(e-1) the best in expectation with a floor of 0 "
        "((e - g e^g)/(e - e^g) with a floor g), but it saved less "
        "than break_even in the first 40 requests (docs/rules/prune.md)",
    )
    warm_threshold_floor: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="randomised: the least share drawn (g; worst case (1+g)/g the best)",
    )
    # inject runs after prune; the default is inject's own cap
    reserve_tokens: int = Field(
        default=inject.Config.model_fields["max_tokens"].default,
        ge=0,
        description="room kept free under the budget for inject's tail block: a compaction "
        "starts once less is left (never more than the budget minus the target); fewer than 5 "
        "requests after any compaction, whose block the prompt already holds, only past the budget",
    )
    reserve_ratio: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="the room kept for inject is at most this share of the budget: inject fits "
        "its block to the room left, so a small budget keeps its tokens for the conversation",
    )
