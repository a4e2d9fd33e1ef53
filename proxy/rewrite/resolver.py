"""The optional resolver model (off by default): when ``resolve_refs`` detected a reference but had
to abstain, a cheap model picks among the candidates; with ``describe_pointers``, it also writes
the one-line description of a pointer resolved through a parent session (the rule's own stands
when it writes none). Called through litellm, answers cached for ``ttl_seconds`` (at most 1,024;
past that, the principal holding most answers loses its least recently used, so one tenant's many
questions do not make another's next one a new paid call); any failure (timeout, bad answer, no
key) leaves the rule's answer as it was and is reported, never failing the request."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from proxy.fair_lru import FairLRU
from proxy.settings import ResolverSettings
from rules.entities.ruled_out import USERS_WORD
from rules.memo_scope import memo_scope
from rules.redact import redact_text

PROMPT = (
    "A user wrote a message to a coding agent that refers vaguely to a file or folder. Pick the "
    "one candidate path the reference means, or null if none clearly fits. Answer with JSON only: "
    '{"path": "<one candidate, verbatim>" or null, "confidence": <0..1>}.'
)


DESCRIBE_PROMPT = (
    "A sub-agent's message refers to something its lead agent made or found; the proxy resolved "
    "which one. Describe that entity for the sub-agent in one self-contained line (what it is, "
    "what it belongs to, why it was picked out), without inventing facts. Answer with JSON only: "
    '{"description": "<one line>"}.'
)
MAX_DESCRIPTION = 200  # characters kept of a description the model wrote


def open_questions(references: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """References detected but not resolved, that have candidates to choose from."""
    return [
        r
        for r in references
        if r.get("entity") is None and r.get("candidates") and r.get("abstained") not in USERS_WORD
    ]


def to_describe(references: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Resolved references whose pointer came from a parent session (what a sub-agent is
    handed), not already described by the model."""
    out = []
    for r in references:
        pointer = r.get("pointer")
        chain = r.get("chain") or []
        last = chain[-1] if chain and isinstance(chain[-1], Mapping) else {}
        deep = (last.get("depth") or 0) > 0
        if isinstance(pointer, Mapping) and deep and not pointer.get("described_by"):
            out.append(r)
    return out


def _json_object(text: str) -> Any:
    # From the first "{" to the last "}": what ``\{.*\}`` (re.S) matched, without its rescan
    # to the end from every "{" when no "}" follows (quadratic on "{{{{…").
    text = text or ""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        return orjson.loads(text[start : end + 1])
    except orjson.JSONDecodeError:
        return None


def parse_description(text: str) -> str | None:
    """The model's description: one line (blanks folded), redacted, at most MAX_DESCRIPTION
    characters; None when it wrote none."""
    data = _json_object(text)
    said = data.get("description") if isinstance(data, dict) else None
    if not isinstance(said, str):
        return None
    line = " ".join(redact_text(said).split())
    if len(line) > MAX_DESCRIPTION:
        line = line[: MAX_DESCRIPTION - 1].rstrip() + "…"
    return line or None


def parse_pick(text: str, candidates: Sequence[str]) -> dict[str, Any] | None:
    data = _json_object(text)
    if not isinstance(data, dict) or data.get("path") not in candidates:
        return None
    confidence = data.get("confidence")
    if not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        return None
    return {"path": data["path"], "confidence": float(confidence)}


class Resolver:
    def __init__(self, settings: ResolverSettings, cache_size: int = 1024) -> None:
        self.settings = settings
        # answers by question, each the principal's that asked it: past ``cache_size``, the
        # principal holding most loses its least recently used (a push-out is a new paid call)
        self._cache: FairLRU[str, tuple[float, dict[str, Any] | None]] = FairLRU(cache_size)

    def _key(self, task: str, content: str) -> str:
        """Keyed by all the model is shown, so an answer is reused only for the very same
        question (never another session's entity behind the same words), and by whose request
        asks (``memo_scope``): a hit answers in microseconds where the model takes a round trip,
        so a shared entry would tell a tenant that another asked its guessed question."""
        raw = orjson.dumps([memo_scope(), self.settings.model, task, content])
        return hashlib.blake2b(raw, digest_size=16).hexdigest()

    async def consult(
        self, refs: Sequence[Mapping[str, Any]], user_text: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(hints for the pipeline's second run, report; None: nothing to ask): picks for the
        abstentions, descriptions for pointers from a parent session (``describe_pointers``)."""
        questions = open_questions(refs)
        described = to_describe(refs) if self.settings.describe_pointers else []
        if not questions and not described:
            return {}, None
        picks, info = await self.picks(questions, user_text)
        said, told = await self.descriptions(described, user_text)
        for field in ("asked", "cached", "errors"):
            info[field] += told[field]
        hints = {"resolver": picks} if picks else {}
        return ({**hints, "resolver_descriptions": said} if said else hints), info

    async def picks(
        self, questions: Sequence[Mapping[str, Any]], user_text: str, now: float | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """(mention -> pick, report) for the open questions; asks the model at most once each."""
        return await self._answers("pick", questions, user_text, now)

    async def descriptions(
        self, refs: Sequence[Mapping[str, Any]], user_text: str, now: float | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """(mention -> {description, model}, report) for resolved pointers (``to_describe``)."""
        return await self._answers("describe", refs, user_text, now)

    async def _answers(
        self, task: str, items: Sequence[Mapping[str, Any]], user_text: str, now: float | None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        now = time.monotonic() if now is None else now
        out: dict[str, dict[str, Any]] = {}
        info: dict[str, Any] = {"model": self.settings.model, "asked": 0, "cached": 0, "errors": []}
        for q in items:
            content = _pick_content(user_text, q) if task == "pick" else _describe_content(q)
            key = self._key(task, content)
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                info["cached"] += 1
                answer = hit[1]
            else:
                info["asked"] += 1
                try:
                    answer = await (
                        self._ask(content, q) if task == "pick" else self._describe(content)
                    )
                except Exception as exc:  # the model is optional: its failure never fails us
                    info["errors"].append(f"{type(exc).__name__}: {str(exc)[:200]}")
                    continue
                self._cache.put(key, (now + self.settings.ttl_seconds, answer), memo_scope())
            if answer is not None:
                out[str(q["mention"])] = {**answer, "model": self.settings.model}
        return out, info

    async def _complete(self, prompt: str, content: str, max_tokens: int) -> str:
        from proxy.providers import litellm_ready, load_litellm

        await litellm_ready()  # its first import off the event loop
        litellm = load_litellm()
        key = os.environ.get(self.settings.api_key_env) if self.settings.api_key_env else None
        response = await asyncio.wait_for(
            litellm.acompletion(
                model=self.settings.model,
                messages=[
                    {"role": "system", "content": prompt},
                    {"role": "user", "content": content},
                ],
                api_key=key or "none",  # local models need none; litellm's client wants one
                base_url=self.settings.base_url,
                timeout=self.settings.timeout_s,
                temperature=0,
                max_tokens=max_tokens,
            ),
            timeout=self.settings.timeout_s,
        )
        return str(response.choices[0].message.content or "")

    async def _describe(self, content: str) -> dict[str, Any] | None:
        said = parse_description(await self._complete(DESCRIBE_PROMPT, content, 120))
        return {"description": said} if said else None

    async def _ask(self, content: str, question: Mapping[str, Any]) -> dict[str, Any] | None:
        candidates = list(question.get("candidates") or [])
        return parse_pick(await self._complete(PROMPT, content, 100), candidates)


def _pick_content(user_text: str, question: Mapping[str, Any]) -> str:
    """What the model is shown to pick among the candidates."""
    return orjson.dumps(
        {
            "message": user_text[-2000:],
            "reference": question.get("mention"),
            "candidates": list(question.get("candidates") or []),
        }
    ).decode()


def _describe_content(ref: Mapping[str, Any]) -> str:
    """What the model is shown to describe a pointer: the reference and what the rule knows."""
    pointer = ref.get("pointer") or {}
    return orjson.dumps(
        {
            "reference": ref.get("mention"),
            "kind": pointer.get("kind"),
            "id": pointer.get("id"),
            "known": pointer.get("description"),
        }
    ).decode()
