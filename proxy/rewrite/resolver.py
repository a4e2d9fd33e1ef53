"""The optional resolver model (off by default): when ``resolve_refs`` detected a reference but had
to abstain, a cheap model picks among the candidates. Called through litellm, answers cached for
``ttl_seconds``; any failure (timeout, bad answer, no key) leaves the abstention as it was and is
reported, never failing the request."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from proxy.settings import ResolverSettings

PROMPT = (
    "A user wrote a message to a coding agent that refers vaguely to a file or folder. Pick the "
    "one candidate path the reference means, or null if none clearly fits. Answer with JSON only: "
    '{"path": "<one candidate, verbatim>" or null, "confidence": <0..1>}.'
)


def open_questions(references: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """References detected but not resolved, that have candidates to choose from."""
    return [r for r in references if r.get("entity") is None and r.get("candidates")]


def parse_pick(text: str, candidates: Sequence[str]) -> dict[str, Any] | None:
    # From the first "{" to the last "}": what ``\{.*\}`` (re.S) matched, without its rescan
    # to the end from every "{" when no "}" follows (quadratic on "{{{{…").
    text = text or ""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        data = orjson.loads(text[start : end + 1])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("path") not in candidates:
        return None
    confidence = data.get("confidence")
    if not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        return None
    return {"path": data["path"], "confidence": float(confidence)}


class Resolver:
    def __init__(self, settings: ResolverSettings, cache_size: int = 1024) -> None:
        self.settings = settings
        self._cache: OrderedDict[str, tuple[float, dict[str, Any] | None]] = OrderedDict()
        self._cache_size = cache_size

    def _key(self, user_text: str, question: Mapping[str, Any]) -> str:
        raw = orjson.dumps(
            [self.settings.model, user_text, question.get("mention"), question.get("candidates")]
        )
        return hashlib.blake2b(raw, digest_size=16).hexdigest()

    async def picks(
        self, questions: Sequence[Mapping[str, Any]], user_text: str, now: float | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """(mention -> pick, report) for the open questions; asks the model at most once each."""
        now = time.monotonic() if now is None else now
        out: dict[str, dict[str, Any]] = {}
        info: dict[str, Any] = {"model": self.settings.model, "asked": 0, "cached": 0, "errors": []}
        for q in questions:
            key = self._key(user_text, q)
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                info["cached"] += 1
                pick = hit[1]
            else:
                info["asked"] += 1
                try:
                    pick = await self._ask(user_text, q)
                except Exception as exc:  # the model is optional: its failure never fails us
                    info["errors"].append(f"{type(exc).__name__}: {str(exc)[:200]}")
                    continue
                self._cache[key] = (now + self.settings.ttl_seconds, pick)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            if pick is not None:
                out[str(q["mention"])] = {**pick, "model": self.settings.model}
        return out, info

    async def _ask(self, user_text: str, question: Mapping[str, Any]) -> dict[str, Any] | None:
        from proxy.providers import load_litellm

        litellm = load_litellm()
        candidates = list(question.get("candidates") or [])
        content = orjson.dumps(
            {
                "message": user_text[-2000:],
                "reference": question.get("mention"),
                "candidates": candidates,
            }
        ).decode()
        key = os.environ.get(self.settings.api_key_env) if self.settings.api_key_env else None
        response = await asyncio.wait_for(
            litellm.acompletion(
                model=self.settings.model,
                messages=[
                    {"role": "system", "content": PROMPT},
                    {"role": "user", "content": content},
                ],
                api_key=key or "none",  # local models need none; litellm's client wants one
                base_url=self.settings.base_url,
                timeout=self.settings.timeout_s,
                temperature=0,
                max_tokens=100,
            ),
            timeout=self.settings.timeout_s,
        )
        text = response.choices[0].message.content or ""
        return parse_pick(text, candidates)
