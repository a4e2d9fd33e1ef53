"""What an upstream accepts as a tool call's id, and the id a refused one becomes.

Providers differ, and each refuses a history holding an id it does not accept with a 400 on
every retry (a conversation carried from one provider to another holds the first one's ids):

- ``anthropic``: ``^[a-zA-Z0-9_-]+$`` (Anthropic's API; Bedrock's and Vertex's Claude), or
  litellm's id of a Gemini call, which carries the model's thought signature after
  ``__thought__`` (base64: litellm strips it itself before Anthropic's API sees it). The rule
  for any upstream whose rule is not known: the strictest common one.
- ``openai``: OpenAI's own API: any string of at most 40 characters in chat completions
  (``openai_responses``: 64, a Responses ``call_id``).
- ``mistral``: exactly nine letters and digits.
- ``any``: an OpenAI-compatible server (vLLM, SGLang, Kimi's ``functions.Bash:0``, which its
  models are trained to read) or Gemini: any string without control characters. An id such a
  server made is sent back as it made it.

A refused id becomes the nearest one the rule accepts: its characters sanitised, a long one
cut and given a digest of the whole (so two long ids sharing a start stay apart), and a nine
character digest for Mistral. The same id always becomes the same one, so a conversation's
prefix, renamed alike on every request, stays cached.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

_STRICT = re.compile(r"[a-zA-Z0-9_-]+")  # whole: fullmatch (a "$" lets a final newline in)
_NOT_STRICT = re.compile(r"[^a-zA-Z0-9_-]+")
_SIGNATURE = re.compile(r"[A-Za-z0-9+/=_-]+")
_SIGNED = "__thought__"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ALNUM9 = re.compile(r"[a-zA-Z0-9]{9}")
_DIGEST = 12  # hex characters of the digest a cut id ends with


def _digest(text: str, size: int) -> str:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16)
    return digest.hexdigest()[:size]


def sanitize_id(raw: str) -> str:
    """Fullwidth forms to halfwidth, whitespace dropped, anything else invalid to ``_``."""
    text = "".join(ch for ch in unicodedata.normalize("NFKC", raw) if not ch.isspace())
    return _NOT_STRICT.sub("_", text).strip("_") or "call"


@dataclass(frozen=True, slots=True)
class CallIdRule:
    name: str
    max_length: int | None = None

    def accepts(self, value: Any) -> bool:
        if value.__class__ is not str or not value:
            return False
        if self.max_length is not None and len(value) > self.max_length:
            return False
        name = self.name
        if name == "anthropic":
            if _STRICT.fullmatch(value) is not None:
                return True
            call, signed, signature = value.partition(_SIGNED)
            return bool(
                signed and _STRICT.fullmatch(call) and _SIGNATURE.fullmatch(signature) is not None
            )
        if name == "mistral":
            return _ALNUM9.fullmatch(value) is not None
        return _CONTROL.search(value) is None

    def fit(self, raw: str) -> str:
        """The id ``raw`` becomes (``raw`` itself when accepted)."""
        if self.accepts(raw):
            return raw
        if self.name == "mistral":
            return _digest(raw, 9)
        text = sanitize_id(raw)
        limit = self.max_length
        if limit is not None and len(text) > limit:
            text = f"{text[: limit - _DIGEST - 1]}_{_digest(raw, _DIGEST)}"
        return text

    def numbered(self, base: str, k: int) -> str:
        """The ``k``-th alternative to ``base``, an id already taken."""
        if self.name == "mistral":
            return _digest(f"{base}#{k}", 9)
        suffix = f"_{k}"
        limit = self.max_length
        if limit is not None and len(base) + len(suffix) > limit:
            return f"{base[: limit - len(suffix)]}{suffix}"
        return f"{base}{suffix}"


RULES: dict[str, CallIdRule] = {
    rule.name: rule
    for rule in (
        CallIdRule("anthropic"),
        CallIdRule("openai", 40),
        CallIdRule("openai_responses", 64),
        CallIdRule("mistral"),
        CallIdRule("any"),
    )
}
STRICTEST = RULES["anthropic"]


def rule_named(name: str) -> CallIdRule:
    return RULES.get(name, STRICTEST)
