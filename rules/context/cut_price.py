"""What a cut costs, for ``schedule`` and ``warm_cut``: the planned steps (``Step``), the
tokens still read from the cache once the prompt changes from some message on, the provider's
tokens per counted one, and the expected loss of what a step removes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules.base import CacheFacts
from rules.context.session_memory import Memory


@dataclass(frozen=True)
class Step:
    """One planned edit, in stage order: its stage, tokens freed, the earliest message index it
    changes, and the probability that what it removes is needed again."""

    stage: str
    freed: int
    first: int
    messages: tuple[int, ...] = ()  # what it edits (a dropped turn: all its messages)
    reason: str = ""
    reuse: float = 0.0
    # a forced compaction's order: the chance by the feature model (``copy_odds``); None: reuse
    rank: float | None = None
    # what carrying it has cost since it was first offered (``carrying``); None: unknown (it
    # gets a share of the session's ``carried`` by the tokens it frees)
    carried: float | None = None

    def loss_per_token(self) -> float:
        """The chance that what it removes is copied from again, per token it frees: a forced
        compaction frees its tokens where the fewest later copies are lost (a large result
        unlikely to be needed goes before a small one the agent may copy from)."""
        return (self.reuse if self.rank is None else self.rank) / max(self.freed, 1)


@dataclass(frozen=True)
class Choice:
    steps: int  # how many planned steps to take (0: none)
    tokens_after: int
    figures: dict[str, Any]
    chosen: tuple[int, ...] | None = None  # which steps, when not the first ``steps``


def cached_after(first: int, prefix_tokens: Sequence[int], cached0: int, facts: CacheFacts) -> int:
    """Tokens still read from the cache when the prompt changes from message ``first`` on: the
    tokens before it, or, on a breakpoint cache (``lookback_messages``) with the edit further
    back than the lookback, only the first message's (where the system prompt's breakpoint is);
    none when that is shorter than the provider's minimum cacheable prefix."""
    n = len(prefix_tokens) - 1  # prefix_tokens[i]: tokens before message i; one more entry
    if first >= n:
        return cached0
    lookback = facts.lookback_messages
    if lookback is not None and n - first > lookback:
        first = min(first, 1)  # the first message: the system prompt's breakpoint, about
    kept = min(cached0, prefix_tokens[first])
    # a prefix shorter than the provider's minimum is never cached: all of it is re-billed
    return kept if kept >= facts.min_prefix_tokens else 0


def provider_scale(facts: CacheFacts, memory: Memory) -> float:
    """The provider's tokens per counted token of the prompt, from the previous request: the
    provider's count of its prompt over ours (at least 1). What a compaction frees is text this
    rule counts exactly; the prompt it re-bills also holds what the count leaves out (reasoning
    fields, call metadata, the wire's serialisation), which the provider bills all the same.
    1 when the provider's count is of another request than the one the rule last saw (its answer
    failed, or the rule was skipped), which would scale this one by a prompt of another size."""
    prompt, at = facts.last_prompt_tokens, facts.last_at
    if prompt is None or memory.last_tokens <= 0:
        return 1.0
    if at is not None and memory.last_at is not None and at != memory.last_at:
        return 1.0
    return max(prompt / memory.last_tokens, 1.0)


def step_loss(step: Step, total: int, read_ratio: float, weights: Mapping[str, float]) -> float:
    """The expected cost of what ``step`` removes: the re-read it forces when needed again (the
    prompt again at ``r``, the removed tokens fresh) times the probability of that."""
    if step.reuse <= 0:
        return 0.0
    return weights.get(step.stage, 1.0) * step.reuse * (read_ratio * total + step.freed)
