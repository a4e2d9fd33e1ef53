"""References beyond files resolve on a session's stored state: the entity summary the state
keeps held its sorts under a field named ``key``, which the state's redaction blanked as a
secret, so on the next request (a question after the tool loop, no new tool result) every pattern
needing an entity beyond files ("stop the dev server", "push it", "the second customer") found
nothing, and "the table the migration created" pointed at the migration's file."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.rewrite.engine import Engine
from rules.entities import cache as entity_cache
from rules.redact import is_secret_name
from tests.proxy.tenancy.test_forks import engine  # noqa: F401  (the fixture)
from tests.support.factories import assistant, call, result, system, user

OK = "[Command finished with exit code 0]"
CUSTOMERS = orjson.dumps(
    {"data": [{"id": f"cus_{i}", "object": "customer", "name": n}
              for i, n in enumerate(["Acme", "Globex", "Initech"], 1)]}
).decode()  # fmt: skip
CASES = [
    ("bash", {"command": "python3 -m http.server 8000 &"}, "[1] 4242\n" + OK,
     "stop the dev server", "4242"),
    ("bash", {"command": "git checkout -b feat/x"}, "Switched to a new branch 'feat/x'\n" + OK,
     "push it", "feat/x"),
    ("list_customers", {"status": "flagged"}, CUSTOMERS, "refund the second customer", "cus_2"),
    ("bash", {"command": "docker run -d --name web nginx"}, "abc123def456\n" + OK,
     "stop the container", "web"),
]  # fmt: skip


def test_no_field_of_the_summary_is_named_like_a_secret() -> None:
    events = [{"id": "process:1", "type": "process", "rel": [["listed_in", "x"]]}]
    assert not [k for k in entity_cache.summary(events) if is_secret_name(k)]


@pytest.mark.parametrize(("tool", "args", "output", "question", "target"), CASES)
async def test_a_question_after_the_tool_loop_resolves_on_the_stored_state(
    engine: Engine,  # noqa: F811
    tool: str,
    args: dict[str, Any],
    output: str,
    question: str,
    target: str,
) -> None:
    loop = [
        system(),
        user("go"),
        assistant(None, call("c1", tool, **args)),
        result("c1", output),
    ]
    session = f"s-{target}"
    await engine.rewrite({"model": "gpt-4o", "messages": loop}, {}, 1000.0, session_id=session)
    asked = [*loop, assistant("ok"), user(question)]
    out = await engine.rewrite({"model": "gpt-4o", "messages": asked}, {}, 1005.0,
                               session_id=session)  # fmt: skip
    found = [str(r.get("entity")) for r in out.report.get("references") or []]
    assert any(target in f for f in found), out.report.get("references")
