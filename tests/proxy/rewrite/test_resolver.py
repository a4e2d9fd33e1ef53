"""The resolver model's answer is read in time linear in its length, from the first "{" to the
last "}" (a regex ``\\{.*\\}`` rescanned to the end from every "{": quadratic on "{{{{…")."""

from __future__ import annotations

import json
import time

from proxy.rewrite.resolver import parse_pick


def test_resolver_answers_are_read_in_linear_time() -> None:
    started = time.perf_counter()
    assert parse_pick("{" * 200_000, ["a"]) is None
    assert time.perf_counter() - started < 0.5
    pick = {"path": "a", "confidence": 0.8}
    assert parse_pick('sure: {"path": "a", "confidence": 0.8} {', ["a"]) == pick  # as before
    assert parse_pick('{"path": "a", "confidence": 0.8} }', ["a"]) is None  # to the last "}"


def test_a_cached_answer_serves_only_the_very_same_question() -> None:
    """The answers are cached by all the model is shown: the same words and identifier from
    another session (another tenant's entity, described otherwise) are asked again, never
    answered with the description written for the first."""
    import asyncio

    from proxy.rewrite.resolver import Resolver
    from proxy.settings import ResolverSettings

    shown: list[str] = []

    class Edge(Resolver):  # the model's call, the network edge, answers from what it is shown
        async def _complete(self, prompt: str, content: str, max_tokens: int) -> str:
            shown.append(content)
            known = json.loads(content)["known"]
            return json.dumps({"description": f"the one {known}"})

    def ref(known: str) -> dict[str, object]:
        chain = [{"session": "lead", "depth": 1}]
        pointer = {"kind": "row", "id": "42", "description": known}
        return {"mention": "the customer", "pointer": pointer, "chain": chain}

    resolver = Edge(ResolverSettings(enabled=True, describe_pointers=True))
    mine, _ = asyncio.run(resolver.descriptions([ref("Ann, refund pending")], "do it"))
    theirs, info = asyncio.run(resolver.descriptions([ref("Bob, VIP")], "do it"))
    again, info_again = asyncio.run(resolver.descriptions([ref("Ann, refund pending")], "do it"))
    assert mine["the customer"]["description"] == "the one Ann, refund pending"
    assert theirs["the customer"]["description"] == "the one Bob, VIP"
    assert (info["asked"], info_again["cached"]) == (1, 1)
    assert again == mine and len(shown) == 2


def test_a_cached_answer_serves_only_the_principal_that_asked() -> None:
    """Another tenant asking the very same question is asked anew: a hit answers in
    microseconds where the model takes a round trip, which would tell it the first asked."""
    import asyncio
    import contextvars

    from proxy.rewrite.resolver import Resolver
    from proxy.settings import ResolverSettings
    from rules.memo_scope import enter_scope

    asked: list[str] = []

    class Edge(Resolver):  # the model's call, the network edge
        async def _complete(self, prompt: str, content: str, max_tokens: int) -> str:
            asked.append(content)
            return json.dumps({"path": "/w/beta", "confidence": 0.9})

    question = {"mention": "the folder", "candidates": ["/w/alpha", "/w/beta"]}
    resolver = Edge(ResolverSettings(enabled=True))

    def ask(principal: str) -> dict[str, object]:
        async def run() -> dict[str, object]:
            enter_scope(principal)
            picks, info = await resolver.picks([question], "delete the folder")
            return {"picks": picks, **info}

        return contextvars.copy_context().run(asyncio.run, run())

    first, theirs, again = ask("tenant-a"), ask("tenant-b"), ask("tenant-a")
    assert first["picks"] == theirs["picks"] == again["picks"]
    assert (first["asked"], theirs["asked"], theirs["cached"]) == (1, 1, 0)
    assert (again["asked"], again["cached"]) == (0, 1)
    assert len(asked) == 2


def test_one_tenants_many_questions_leave_anothers_answers_cached() -> None:
    """The cache is shared by every principal: past its bound, the principal holding most
    answers loses its least recently used, so a tenant asking question after question pushes out
    its own answers, never another's (whose next question would be a new paid call)."""
    import asyncio
    import contextvars

    from proxy.rewrite.resolver import Resolver
    from proxy.settings import ResolverSettings
    from rules.memo_scope import enter_scope

    asked: list[str] = []

    class Edge(Resolver):  # the model's call, the network edge
        async def _complete(self, prompt: str, content: str, max_tokens: int) -> str:
            asked.append(content)
            return json.dumps({"path": "/w/beta", "confidence": 0.9})

    resolver = Edge(ResolverSettings(enabled=True), cache_size=64)

    def ask(principal: str, questions: list[dict[str, object]]) -> dict[str, object]:
        async def run() -> dict[str, object]:
            enter_scope(principal)
            picks, info = await resolver.picks(questions, "delete the folder")
            return {"picks": picks, **info}

        return contextvars.copy_context().run(asyncio.run, run())

    theirs = {"mention": "the folder", "candidates": ["/w/alpha", "/w/beta"]}
    assert ask("tenant-b", [theirs])["asked"] == 1
    flood = [{"mention": f"folder {i}", "candidates": ["/w/alpha", "/w/beta"]} for i in range(500)]
    assert ask("tenant-a", flood)["asked"] == 500
    again = ask("tenant-b", [theirs])
    assert (again["asked"], again["cached"]) == (0, 1) and len(asked) == 501
    newest = ask("tenant-a", flood[-63:])  # a keeps its newest answers within the bound
    assert (newest["asked"], newest["cached"]) == (0, 63)
