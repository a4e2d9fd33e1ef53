"""Whose change made the forwarded prefix differ, table-driven over synthetic requests: each
message a letter (its digest), the proxy's own messages named by the decision that made them,
the report of the request as the rules filled it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from proxy.attribution.probe import Sent, decision_of, observe
from rules.report import Report


def dig(name: str) -> bytes:
    return hashlib.blake2b(name.encode(), digest_size=10).digest()


class Tokens:
    """Ten tokens a message (the three that prime a reply, as the counters add them)."""

    def count_messages(self, messages: Sequence[Any]) -> int:
        return 10 * len(messages) + 3


@dataclass
class Request:
    client: list[str]
    forwarded: list[str] | None = None  # None: the client's, unchanged
    report: dict[str, Any] = field(default_factory=dict)
    model: str = "gpt-4o"
    tools: str = "t1"

    def sent(self, at: float) -> Sent:
        forwarded = self.forwarded if self.forwarded is not None else self.client
        return Sent(
            at=at,
            model=self.model,
            client=b"".join(map(dig, self.client)),
            forwarded=b"".join(map(dig, forwarded)),
            tools=dig(self.tools),
            client_tokens=10 * len(self.client),
            tokens=10 * len(forwarded),
            decision=decision_of(self.report),  # type: ignore[arg-type]
        )

    def messages(self) -> list[dict[str, Any]]:
        return [
            {"role": "system" if n.startswith("S") else "user", "content": n} for n in self.client
        ]


COMPACTED: Report = {"prune": {"compacted": True, "schedule": {"decision": "forced"}}}
REPAIRED: Report = {"repairs": [{"kind": "unanswered_call", "index": 3, "tool_call_id": "c",
                                 "action": "synthetic result"}]}  # fmt: skip
COLLAPSED: Report = {"inject": {"collapsed": 2}}

CASES = [  # (name, previous, now, changed_by, where, decision)
    ("append only", Request(["S", "u1", "a1"]), Request(["S", "u1", "a1", "u2"]),
     None, None, None),
    ("the client edited a message", Request(["S", "u1", "a1"]),
     Request(["S", "u1*", "a1", "u2"]), "client", "messages[1] (user)", None),
    ("the client changed its system prompt", Request(["S", "u1", "a1"]),
     Request(["S*", "u1", "a1", "u2"]), "client", "system", None),
    ("the client changed its tools", Request(["S", "u1"]),
     Request(["S", "u1", "u2"], tools="t2"), "client", "tools", None),
    ("the client changed the model", Request(["S", "u1"]),
     Request(["S", "u1", "u2"], model="gpt-4.1"), "client", "model", None),
    ("a compaction put a placeholder", Request(["S", "u1", "r1", "a1"]),
     Request(["S", "u1", "r1", "a1", "u2"], ["S", "u1", "[elided r1]", "a1", "u2"], COMPACTED),
     "proxy", None, "compaction (forced)"),
    ("a repair's placeholder replaced by the result that came",
     Request(["S", "u1", "call"], ["S", "u1", "call", "[interrupted]"], REPAIRED),
     Request(["S", "u1", "call", "result", "u2"]), "proxy", None, "repair (unanswered_call)"),
    ("inject's blocks collapsed", Request(["S", "u1", "a1"], ["S", "u1", "[block]", "a1"]),
     Request(["S", "u1", "a1", "u2"], ["S", "u1", "[block2]", "a1", "u2"], COLLAPSED),
     "proxy", None, "block"),
    ("a proxy edit before the client's change is the one that counts",
     Request(["S", "u1", "r1", "a1"]),
     Request(["S", "u1", "r1", "a1*"], ["S", "u1", "[elided r1]", "a1*"], COMPACTED),
     "proxy", None, "compaction (forced)"),
    ("the client edited what the proxy had elided: nothing forwarded changed",
     Request(["S", "u1", "r1", "a1"], ["S", "u1", "[elided r1]", "a1"]),
     Request(["S", "u1", "r1*", "a1", "u2"], ["S", "u1", "[elided r1]", "a1", "u2"]),
     None, None, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "before", "now", "by", "where", "decision"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_whose_change_made_the_prefix_differ(
    name: str,
    before: Request,
    now: Request,
    by: str | None,
    where: str | None,
    decision: str | None,
) -> None:
    facts = observe(
        before.sent(0.0),
        now.sent(30.0),
        now.messages(),
        [],
        Tokens(),
        0,
        now.report,  # type: ignore[arg-type]
    )
    assert (facts.changed_by, facts.where, facts.decision) == (by, where, decision)
    assert facts.idle_s == 30.0 and facts.compared
    if by is None:  # the whole previous prefix still leads the request
        assert facts.shared_tokens == 10 * len(before.forwarded or before.client)


def test_a_first_request_has_nothing_to_compare() -> None:
    now = Request(["S", "u1"])
    facts = observe(None, now.sent(5.0), now.messages(), [], Tokens(), 0, {}, last_at=2.0)  # type: ignore[arg-type]
    assert (facts.changed_by, facts.compared, facts.idle_s) == (None, False, 3.0)
