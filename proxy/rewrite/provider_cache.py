"""The providers' documented prompt-cache rules: how long an unused prefix lives, the shortest
prompt cached, what a cache write costs. Used where config and litellm's table say nothing (the
table has prices, never these rules). Values as the providers' docs state them:

- OpenAI (platform.openai.com/docs/guides/prompt-caching): prompts of 1,024 tokens and more;
  prefixes stay "typically 5 to 10 minutes of inactivity" (up to an hour off-peak): 300 s, the
  short end. Writes cost a fresh token.
- Anthropic (docs.anthropic.com/en/docs/build-with-claude/prompt-caching): 1,024 tokens minimum
  (Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4, Sonnet 3.7), 2,048 (Sonnet 4.6, Haiku 3.5, Haiku 3),
  4,096 (Opus 4.5, Opus 4.6, Haiku 4.5); the default cache lives 5 minutes from its last use;
  a 5-minute write costs 1.25× a fresh token, a read 0.1×.
- Gemini implicit caching (Google's "Gemini 2.5 models now support implicit caching", May 2025):
  1,024 tokens minimum for 2.5 Flash, 2,048 for 2.5 Pro; no stated lifetime ("a few minutes"):
  300 s. Later models' minimums (4,096 for the 3.x Flash and Pro models) are in litellm's table
  (``prompt_cache_min_tokens``), which the cost model reads first for this family
  (``TABLE_MINIMUMS``); for the others the values here stand.
- DeepSeek (api-docs.deepseek.com/guides/kv_cache): 64-token storage units, shorter content is not
  cached; unused entries are cleared "usually within a few hours to a few days": 3,600 s.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheRules:
    ttl_s: float
    min_prefix_tokens: int
    write_ratio: float = 1.0
    lookback_messages: int | None = None  # Anthropic: its breakpoints' 20-block lookback


OPENAI = CacheRules(ttl_s=300.0, min_prefix_tokens=1024)
# The families whose shortest cached prompt is read from litellm's table before the values here:
# Google's minimums changed with each model generation, and the table follows them per model
TABLE_MINIMUMS = frozenset({"gemini"})
# Anthropic looks back 20 content blocks from a breakpoint for an earlier entry; an agent's
# message is about two blocks (text and a call, or a result), so 10 messages
ANTHROPIC_LOOKBACK_MESSAGES = 10
# Anthropic's minimum by model family (globs on the bare name, most specific first).
_ANTHROPIC_MINIMUMS = (
    ("*opus-4-5*", 4096),
    ("*opus-4-6*", 4096),
    ("*haiku-4*", 4096),
    ("*sonnet-4-6*", 2048),
    ("*haiku*", 2048),  # Haiku 3 and 3.5 (claude-3-haiku, claude-3-5-haiku)
)
DEEPSEEK = CacheRules(ttl_s=3600.0, min_prefix_tokens=64)

# Per family: the word its model names hold, and litellm's provider names for it (a prefix).
# Anything else is taken for OpenAI-like.
_FAMILIES = {
    "anthropic": ("claude", ("anthropic",)),
    "gemini": ("gemini", ("gemini", "vertex_ai")),
    "deepseek": ("deepseek", ("deepseek",)),
}


def family(model: str, provider: str | None) -> str:
    """anthropic, gemini, deepseek or openai: by the model's name first (a Claude model is one on
    Bedrock or Vertex too), then by the provider litellm or the upstream names."""
    bare = model.lower().rsplit("/", 1)[-1]
    for fam, (word, _) in _FAMILIES.items():
        if word in bare:
            return fam
    named = (provider or "").lower()
    for fam, (_, providers) in _FAMILIES.items():
        if named.startswith(providers):
            return fam
    return "openai"


def rules_for(model: str, provider: str | None) -> tuple[CacheRules, str]:
    """The documented cache rules for ``model`` and the provider family they belong to."""
    fam = family(model, provider)
    bare = model.lower().rsplit("/", 1)[-1]
    if fam == "anthropic":
        found = (n for pattern, n in _ANTHROPIC_MINIMUMS if fnmatch.fnmatchcase(bare, pattern))
        minimum = next(found, 1024)
        rules = CacheRules(
            ttl_s=300.0,
            min_prefix_tokens=minimum,
            write_ratio=1.25,
            lookback_messages=ANTHROPIC_LOOKBACK_MESSAGES,
        )
        return rules, fam
    if fam == "gemini":
        minimum = 2048 if "pro" in bare else 1024
        return CacheRules(ttl_s=300.0, min_prefix_tokens=minimum), fam
    if fam == "deepseek":
        return DEEPSEEK, fam
    return OPENAI, fam
