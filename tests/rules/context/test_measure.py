"""measure: sizes per section, before and after; it never changes the conversation."""

from __future__ import annotations

import pytest

from rules.context import measure
from rules.messages import INJECT_CLOSE, INJECT_OPEN, PLACEHOLDER_PREFIX
from tests.support.factories import TOKENS, assistant, call, ctx, result, system, user

BLOCK = f"{INJECT_OPEN}\nRecent context:\n- folder ~/a (created)\n{INJECT_CLOSE}"


def sizes(messages, tools=None):
    return measure.measure_sections(messages, tools, TOKENS)


@pytest.mark.parametrize(
    ("message", "section"),
    [
        (system("be brief"), "system"),
        ({"role": "developer", "content": "rules"}, "system"),
        (user("hello there"), "user"),
        (assistant("I will look"), "assistant"),
        (result("c1", "file contents here"), "tool_results"),
        (result("c1", f"{PLACEHOLDER_PREFIX} elided bash result]"), "placeholders"),
        ({"role": "user", "content": [{"type": "text", "text": "part one"}]}, "user"),
    ],
)
def test_each_role_lands_in_its_section(message, section) -> None:
    got = sizes([message])
    assert got[section] > 0
    assert sum(v for k, v in got.items() if k != section) == 0


def test_tool_calls_and_injected_blocks_are_their_own_sections() -> None:
    got = sizes(
        [assistant("ok", call("c1", "bash", command="ls -la")), user("delete it\n\n" + BLOCK)]
    )
    assert got["tool_calls"] == TOKENS.count_text("bash") + TOKENS.count_text(
        '{"command":"ls -la"}'
    )
    assert got["injected"] == TOKENS.count_text(BLOCK)
    assert got["user"] == TOKENS.count_text("delete it\n\n")


def test_tools_schema_counted() -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    assert sizes([user("x")], tools)["tools"] > 0


def test_apply_reports_before_and_after_and_changes_nothing() -> None:
    original = [user("hi"), assistant("hello")]
    forwarded = [user("hi\n\n" + BLOCK), assistant("hello")]
    context = ctx(forwarded, original=original)
    out = measure.apply(context, measure.Config())
    assert out.messages is forwarded and out.state is context.state
    sections = out.report["sections"]
    assert sections["injected"] == {"before": 0, "after": TOKENS.count_text(BLOCK)}
    assert sections["user"] == {
        "before": TOKENS.count_text("hi"),
        "after": TOKENS.count_text("hi\n\n"),
    }
    assert set(sections) == set(measure.SECTIONS)


@pytest.mark.parametrize(
    ("message", "injected"),
    [
        (user("delete it\n\n" + BLOCK), True),  # appended to the user's message
        (user(BLOCK), True),  # a message of its own
        (result("c1", "ok\n\n" + BLOCK), True),  # appended to a tool result
        ({"role": "user", "content": [{"type": "text", "text": "hi"}, {"text": BLOCK}]}, True),
        (result("c1", f"log: {BLOCK}\nmore log"), False),  # inside a tool's output
        (user(f"see {BLOCK} above?"), False),  # quoted by the user
        (assistant(f"I saw {BLOCK}"), False),  # the proxy never writes into replies
    ],
)
def test_only_blocks_the_proxy_appended_count_as_injected(message, injected) -> None:
    got = sizes([message])
    assert got["injected"] == (TOKENS.count_text(BLOCK) if injected else 0)


def test_output_full_of_blocks_is_measured_without_recursion() -> None:
    log = "\n".join(f"req {i}: {INJECT_OPEN}x{INJECT_CLOSE}" for i in range(3000))
    got = sizes([result("c1", log)])
    assert got["tool_results"] == TOKENS.count_text(log)
    assert got["injected"] == 0


@pytest.mark.parametrize("shape", ["in_place", "dropped", "added"])
def test_after_is_the_forwarded_list_measured_whole(shape) -> None:
    """The forwarded list shares most objects with the original: measured as what differs (in
    place), or past the shared run (a dropped turn, an added message), it sizes as a whole."""
    shared = user("run the tests")
    original = [system("be brief"), shared, assistant("ok", call("c1", cmd="x"))]
    original += [result("c1", "lots of output " * 40), shared, user("and again")]
    elided = result("c1", f"{PLACEHOLDER_PREFIX} elided bash result]")
    forwarded = {
        "in_place": [*original[:3], elided, *original[4:-1], user("and again\n\n" + BLOCK)],
        "dropped": [
            original[0],
            user(f"{PLACEHOLDER_PREFIX} dropped 3 earlier messages]"),
            *original[4:],
        ],
        "added": [*original, user(BLOCK)],
    }[shape]
    out = measure.apply(ctx(forwarded, original=original), measure.Config())
    sections = out.report["sections"]
    assert {k: v["before"] for k, v in sections.items()} == sizes(original)
    assert {k: v["after"] for k, v in sections.items()} == sizes(forwarded)


def test_a_sessions_requests_are_summed_from_the_last_one_to_the_same_sizes() -> None:
    """The sums are carried from the session's last request (its messages resent as the same
    objects), less what changed: every request's sections are what measuring it whole gives."""
    convo = [system("be brief"), user("fix the parser")]
    for k in range(30):
        convo += [assistant(f"step {k}", call(f"c{k}", "bash", cmd=f"ls {k}")),
                  result(f"c{k}", f"file{k}.py\n" * (k + 1))]  # fmt: skip
    kept: dict = {}
    requests = [convo[:end] for end in range(6, len(convo), 4)]
    edited = list(requests[-1])
    edited[9] = result("c3", f"{PLACEHOLDER_PREFIX} elided bash result]")  # pruned in place
    requests += [edited, convo[:20], [m for i, m in enumerate(convo) if i not in (4, 5)]]
    for sent in requests:
        forwarded = [*sent[:-1], user(BLOCK), sent[-1]]  # inject's block before the tail
        got = measure.apply(ctx(forwarded, original=sent, memo=kept), measure.Config())
        sections = got.report["sections"]
        assert {n: s["before"] for n, s in sections.items()} == sizes(sent)
        assert {n: s["after"] for n, s in sections.items()} == sizes(forwarded)
    assert sections["injected"]["after"] > 0
