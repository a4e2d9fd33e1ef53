"""Secret redaction for anything the proxy stores or logs: captured payloads never keep keys.

Two nets: fields whose *name* says secret (``authorization``, ``openai_api_key``,
``client_secret``, ``accessToken`` …, in any case or separator style) lose their value, and
key-shaped *strings* of common providers are replaced wherever they appear. Counts such as
``max_tokens`` or ``prompt_tokens`` are names of numbers, not of secrets, and stay."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"

# Names: split into lowercase words (snake, kebab, dotted and camelCase alike).
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
# Anywhere in the name.
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
        "apikey",
        "cookie",
    }
)
# Only as the name's last word (``api_key``, ``access_token``; not ``key_points``).
_SECRET_LAST = frozenset({"key", "token"})
# ``…_key`` names that are identifiers, not secrets.
_KEY_NOT_SECRET = frozenset({"cache", "idempotency", "primary", "sort", "partition", "foreign"})

_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),  # GitHub fine-grained tokens
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),  # Slack tokens
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face tokens
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),  # JWTs
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
    # ``api_key = …``, ``"client_secret": "…"``, ``password: …``, ``access_token=…``
    re.compile(
        r"(?i)((?:api[_-]?key|secret|passw(?:or)?d|token|authorization)[\"']?\s*[:=]\s*[\"']?)"
        r"(?!\[REDACTED\])[^\s\"',;&]{8,}"
    ),
]


def is_secret_name(name: str) -> bool:
    words = [w for w in _WORD_SPLIT.split(_CAMEL.sub("_", name).lower()) if w]
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    if words[-1] in _SECRET_LAST:
        return not (words[-1] == "key" and len(words) > 1 and words[-2] in _KEY_NOT_SECRET)
    return False


def redact_text(text: str) -> str:
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def _secret_field(name: Any, value: Any, siblings: dict[Any, Any]) -> bool:
    if not isinstance(name, str) or not value or isinstance(value, (bool, int, float)):
        return False
    if name == "token" and "logprob" in siblings:  # a logprobs entry: the token is text
        return False
    return is_secret_name(name)


def redact(value: Any) -> Any:
    """A redacted deep copy of a JSON-like value: secret-named fields and key-shaped strings."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if _secret_field(k, v, value) else redact(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
