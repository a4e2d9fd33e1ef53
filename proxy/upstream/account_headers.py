"""The headers of an upstream's answer that speak of the account its key bills, which a tenant
does not see when the gateway's own key was used: its organization and project, and its counters
(rate limits, Anthropic's Priority Tier, any header named for a limit, what remains, a reset or
usage), which count every tenant's requests and tokens (one tenant's one-token probes before and
after read another's activity). ``retry-after`` still goes."""

from __future__ import annotations

# What an answer says of the account a key bills: with the upstream's key, the gateway's own
# (its organization's id), not a tenant's to learn
ACCOUNT_ANSWERS = ("openai-organization", "openai-project", "anthropic-organization-id")
# the account's counters: with the server's key they count every tenant's requests and tokens, so
# one tenant read another's activity off them (rate limits; Anthropic's Priority Tier, its
# ``anthropic-priority-input-tokens-remaining``); by any name that says it counts or limits;
# ``retry-after`` still goes
ACCOUNT_COUNTERS = ("x-ratelimit-", "anthropic-ratelimit-", "anthropic-priority-")
_COUNTING = ("ratelimit", "rate-limit", "remaining", "-limit", "-reset", "-usage")


def without_account_headers(headers: dict[str, str]) -> None:
    """``headers`` (an answer's, by lower-cased name) without the account's, in place."""
    for name in [n for n in headers if _counts_the_account(n)]:
        del headers[name]
    for name in ACCOUNT_ANSWERS:
        headers.pop(name, None)


def _counts_the_account(name: str) -> bool:
    """Whether a response header (by lower-cased name) tells what the account used or has left."""
    return name.startswith(ACCOUNT_COUNTERS) or any(word in name for word in _COUNTING)
