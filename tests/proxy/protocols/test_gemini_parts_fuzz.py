"""Random Gemini histories of the parts a client sends (text, empty text, thoughts with
signatures, function calls with and without ids, function responses naming their call, another
tool or none, executable code and its result), in contents of either role, some without parts:
what is forwarded has a ``user`` turn answering each ``model`` turn's calls, one response a call
in order with the call's name (and id, where both have one), no response answering nothing, no
content without parts. The check is written here, apart from the adapter's own
(``proxy/protocols/gemini_checks.py``), so a blind spot in one is not in both."""

from __future__ import annotations

import copy
import random
from typing import Any

from proxy.protocols.gemini import GEMINI
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_responses_adapter import engine  # noqa: F401
from tests.support.random_histories import histories, turn_roles

TOOLS = ("read_file", "run_shell_command")


def _model_part(rng: random.Random, cid: str) -> dict[str, Any]:
    name = rng.choice(TOOLS)
    return rng.choice([
        {"text": "ok"},
        {"text": ""},
        {"text": "thinking", "thought": True, "thoughtSignature": "c2ln"},
        {"functionCall": {"name": name, "args": {"path": "a.py"}}},
        {"functionCall": {"id": cid, "name": name, "args": {"command": "ls"}}},
        {"functionCall": {"name": name, "args": {}}, "thoughtSignature": "c2ln"},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
    ])  # fmt: skip


def _user_part(rng: random.Random, cid: str) -> dict[str, Any]:
    name = rng.choice(TOOLS)
    return rng.choice([
        {"text": "go on"},
        {"functionResponse": {"name": name, "response": {"output": "a.txt"}}},
        {"functionResponse": {"id": cid, "name": name, "response": {"output": "x"}}},
        {"functionResponse": {"name": name, "response": {"error": "boom"}}},
    ])  # fmt: skip


def _broken(contents: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    pending: list[dict[str, Any]] = []
    for i, c in enumerate(contents):
        parts = c.get("parts")
        if not parts:
            found.append(f"contents[{i}]: no parts")
            parts = []
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        if c.get("role") == "model":
            if pending:
                found.append(f"contents[{i}]: the calls before it are not answered")
            if responses:
                found.append(f"contents[{i}]: responses in a model turn")
            pending = calls
            continue
        if len(responses) != len(pending):
            found.append(f"contents[{i}]: {len(responses)} responses for {len(pending)} calls")
        for call, response in zip(pending, responses, strict=False):
            if call.get("name") != response.get("name"):
                found.append(f"contents[{i}]: a response names another tool than its call")
            if call.get("id") and response.get("id") and call["id"] != response["id"]:
                found.append(f"contents[{i}]: a response has another id than its call")
        pending = []
    if pending:
        found.append("the last model turn's calls are not answered")
    return found


async def test_random_histories_are_forwarded_paired(engine: Engine) -> None:  # noqa: F811
    for n, rng, ids in histories("call-"):
        contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "the task"}]}]
        for role in turn_roles(rng, "model", "user"):
            make = _model_part if role == "model" else _user_part
            parts = [make(rng, rng.choice(ids)) for _ in range(rng.randint(0, 3))]
            contents.append({"role": role, "parts": parts})
        if contents[-1]["role"] == "model":
            contents.append({"role": "user", "parts": [{"text": "continue"}]})
        body = {"contents": contents}
        sent = copy.deepcopy(body)
        out = await engine.rewrite(body, {}, now=1000.0 + n, adapter=GEMINI,
                                   model="gemini-2.5-pro", session_id=f"s{n % 5}")  # fmt: skip
        assert body == sent, "the client's body was mutated"
        assert _broken(out.body["contents"]) == [], (sent["contents"], out.body["contents"])
