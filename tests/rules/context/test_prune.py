"""prune, stage by stage: cap, supersede, mask, drop turns; protected evidence; the over-budget
floor; provider-owned state; the rule's contract (no-op is the same list, idempotent); the budget
with the tools' schema, room reserved for the tail block. (The budget from the model's window and
``on_over_budget`` are the engine's: tests/proxy/rewrite/test_engine_budget.py.)"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rules.activity import observations as observations_mod
from rules.base import RuleResult, SessionState
from rules.chain import validator as chain_validator
from rules.context import prune, prune_stages
from rules.messages import PLACEHOLDER_PREFIX, text_of
from tests.support.factories import TOKENS, assistant, call, ctx, result, shell, system, user

TASK = user("Fix the failing test in calc.py")


def blob(tag: str, n: int) -> str:
    """About ``n`` tokens over ``n // 10`` lines, distinct per tag."""
    return "\n".join(f"{tag} line {i} " + "word " * 8 for i in range(n // 10))


PYTEST_FAIL = (
    "<returncode>1</returncode>\n<output>\n"
    + blob("collect", 300)
    + "\nFAILED tests/test_calc.py::test_div - assert 2.0 == 3\n"
    "========================= 1 failed, 2 passed in 0.05s ==========================\n</output>"
)


def read(cid: str, path: str, n: int = 400) -> list[dict[str, Any]]:
    return [assistant(None, call(cid, "Read", file_path=path)), result(cid, blob(path + cid, n))]


def run_cmd(cid: str, command: str, output: str) -> list[dict[str, Any]]:
    return [assistant(None, shell(cid, command)), result(cid, output)]


def apply(
    messages: list[dict[str, Any]],
    budget: int | None,
    state: SessionState | None = None,
    request: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    **options: Any,
) -> RuleResult:
    context = ctx(messages, state=state, budget=budget, request=request or {}, tools=tools)
    return prune.apply(context, prune.Config(**options))


def elided(out: RuleResult) -> dict[int, str]:
    return {
        i: text_of(m["content"])
        for i, m in enumerate(out.messages)
        if m.get("role") == "tool" and text_of(m["content"]).startswith(PLACEHOLDER_PREFIX)
    }


def assert_envelopes_kept(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    ids = [c["id"] for m in before for c in m.get("tool_calls") or []]
    assert [c["id"] for m in after for c in m.get("tool_calls") or []] == ids
    assert [m["tool_call_id"] for m in after if m["role"] == "tool"] == [
        m["tool_call_id"] for m in before if m["role"] == "tool"
    ]
    assert chain_validator.find_violations(after) == []


def test_cap_keeps_head_and_tail_with_counts() -> None:
    big = "\n".join(f"line {i}: " + "data " * 10 for i in range(400))
    messages = [TASK, *run_cmd("c1", "python dump.py", big)]
    out = apply(messages, None, max_result_tokens=500)
    text = text_of(out.messages[2]["content"])
    assert text.startswith("line 0: ") and text.endswith("line 399: " + "data " * 10)
    assert f"{PLACEHOLDER_PREFIX} capped: kept the first" in text and "of 400 lines" in text
    assert TOKENS.count_text(text) <= 500
    assert out.report["pruning"][0]["action"] == "cap"
    assert out.report["pruning"][0]["tokens_freed"] > 0
    assert_envelopes_kept(messages, out.messages)


def test_a_giant_line_is_cut_by_characters_and_says_so() -> None:
    """A minified bundle or a base64 blob on one line: the marker said "0 lines elided" of
    "1 lines", as if the model had it whole, with 97% of it cut."""
    blob = '{"data": "' + "QUJD" * 20_000 + '"}'
    messages = [TASK, *run_cmd("c1", "cat bundle.min.json | jq -c .", blob)]
    text = text_of(apply(messages, None, max_result_tokens=500).messages[2]["content"])
    marker = next(line for line in text.split("\n") if line.startswith(PLACEHOLDER_PREFIX))
    assert f"of {len(blob):,} characters (1 line, cut within a line)" in marker
    assert "0 lines" not in marker and text.startswith('{"data": "QUJD')
    assert TOKENS.count_text(text) <= 500


def test_a_files_page_the_agent_read_is_not_capped_at_first_sight() -> None:
    """Claude Code's Read page of 881 lines (26k tokens, within its own 25k-token cap) reached
    the model as its first 89 and last 135 lines: the line asked about was in the middle."""
    messages = [TASK, *read("r1", "big.py", 400)]
    out = apply(messages, None, max_result_tokens=100, max_evidence_tokens=100_000)
    assert out.messages is messages and out.report["pruning"] == []
    # past the evidence bound it is capped; what a program printed is capped as before
    capped = apply(messages, None, max_result_tokens=100, max_evidence_tokens=200)
    assert capped.report["pruning"][0]["action"] == "cap"
    printed = "\n".join(f"line {i} " * 9 for i in range(400))
    log = [TASK, *run_cmd("c1", "python dump.py", printed)]
    assert apply(log, None, max_result_tokens=100).report["pruning"][0]["action"] == "cap"


def test_failing_test_output_is_not_capped() -> None:
    messages = [TASK, *run_cmd("c1", "pytest", PYTEST_FAIL)]
    out = apply(messages, None, max_result_tokens=100)
    assert out.messages is messages


@pytest.mark.parametrize("budget", [None, 100_000])
def test_under_budget_is_the_same_list(budget: int | None) -> None:
    messages = [system(), TASK, *read("r1", "a.py"), *read("r2", "a.py")]
    out = apply(messages, budget)
    assert out.messages is messages
    assert out.report["pruning"] == []


# (messages, elided indices → reason fragment); the budget forces pruning to the 60% target.
SUPERSEDE_CASES = [
    pytest.param(
        [TASK, *read("r1", "a.py"), *read("r2", "b.py"), *read("r3", "a.py")],
        {2: "superseded by a later read of a.py"},
        id="reread",
    ),
    pytest.param(
        [TASK, *read("r1", "a.py"), *read("r2", "b.py"),
         assistant(None, call("w1", "Write", file_path="a.py", content="x")), result("w1", "ok")],
        {2: "superseded by a later write to a.py"},
        id="rewritten",
    ),
    pytest.param(
        [TASK, *run_cmd("c1", "make check", blob("run1", 400)), *read("r2", "b.py"),
         *run_cmd("c2", "make  check", blob("run2", 400))],
        {2: "superseded by a later run of the same command"},
        id="same-command",
    ),
    pytest.param(
        [TASK, *run_cmd("l1", "ls -la src", blob("ls1", 400)), *read("r2", "b.py"),
         *run_cmd("l2", "ls -la src", blob("ls2", 400))],
        {2: "superseded by a later listing"},
        id="listing",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("messages", "expected"), SUPERSEDE_CASES)
def test_supersede(messages: list[dict[str, Any]], expected: dict[int, str]) -> None:
    size = TOKENS.count_messages(messages)
    out = apply(messages, int(size * 0.9), target_ratio=0.9, keep_last_observations=10)
    got = elided(out)
    assert set(got) == set(expected)
    for i, reason in expected.items():
        assert reason in got[i]
    assert out.report["prune"]["stages"].keys() == {"supersede"}
    assert_envelopes_kept(messages, out.messages)


def test_mask_keeps_tool_arguments_exit_and_size() -> None:
    grep = run_cmd("c1", "grep -rn foo .", "<returncode>1</returncode>" + blob("g", 600))
    messages = [TASK, *grep, *read("r2", "b.py"), *read("r3", "c.py"), *read("r4", "d.py")]
    size = TOKENS.count_messages(messages)
    # turns kept (a forced compaction may drop spent turns before masking): the masks alone
    out = apply(messages, size - 10, keep_last_observations=2, target_ratio=0.6, drop_turns=False)
    got = elided(out)
    assert sorted(got) == [2, 4]
    assert got[2].startswith(
        f"{PLACEHOLDER_PREFIX} elided bash result (cmd: grep -rn foo ., exit 1,"
    )
    assert "older than the last 2 tool results" in got[2]
    assert "(path: b.py," in got[4]
    assert out.report["prune"]["stages"].keys() == {"mask"}
    assert out.report["prune"]["compacted"] is True
    assert_envelopes_kept(messages, out.messages)


@pytest.mark.parametrize(
    ("protected_part", "why"),
    [
        (run_cmd("t1", "pytest tests", PYTEST_FAIL), "latest failing test output"),
        (run_cmd("l1", "ls src", blob("tree", 400)), "latest folder tree"),
        ([assistant(None, call("p1", "TodoWrite", todos=[{"content": "fix", "status": "pending"}])),
          result("p1", blob("todos", 400))], "plan"),
        ([assistant(None, call("w1", "Edit", file_path="x.py", old="a", new="b")),
          result("w1", blob("diff", 400))], "recent write"),
    ],
)  # fmt: skip
def test_protected_evidence_is_never_elided(protected_part: list[dict[str, Any]], why: str) -> None:
    tail = [m for k in range(6) for m in read(f"r{k}", f"f{k}.py")]
    messages = [TASK, *protected_part, *tail]
    size = TOKENS.count_messages(messages)
    out = apply(messages, size // 3, keep_last_observations=1, drop_turns=False)
    assert out.messages[2] == protected_part[1]  # verbatim
    assert 2 not in elided(out)
    assert len(elided(out)) >= 4


def test_dropped_turns_leave_a_line_and_never_the_task() -> None:
    chatty = [assistant("thinking " * 300), user("continue " * 5)]
    messages = [system(), TASK, *chatty, *read("r1", "a.py", 100), *chatty,
                *read("r2", "b.py", 100), assistant("done " * 50)]  # fmt: skip
    size = TOKENS.count_messages(messages)
    out = apply(messages, size // 2)
    assert out.messages[:2] == messages[:2]  # system prompt and original task verbatim
    dropped = [m for m in out.messages if text_of(m["content"]).startswith(
        f"{PLACEHOLDER_PREFIX} dropped")]  # fmt: skip
    assert dropped and out.messages[2] is dropped[0]
    assert out.report["prune"]["stages"].get("drop", 0) > 0
    assert TOKENS.count_messages(out.messages) <= size // 2
    assert out.messages[-1] == messages[-1]
    assert chain_validator.find_violations(out.messages) == []


def test_floor_over_budget_warns() -> None:
    messages = [system("rules " * 2000), TASK]
    out = apply(messages, 500)
    assert out.messages is messages
    assert out.report["prune"]["over_budget"] is True
    over, below = out.report["warnings"]
    assert over == {"kind": "over_budget", "tokens": TOKENS.count_messages(messages), "budget": 500}
    # the system prompt alone is over it: the budget is below what every request carries
    assert below["kind"] == "budget_below_floor" and below["budget"] == 500
    assert below["floor"] == TOKENS.count_messages(messages) > 500
    assert below["system"] == TOKENS.count_message(messages[0]) and below["tools"] == 0
    assert "Raise the budget above" in below["note"]
    # told once: the state remembers this budget, and a changed budget is told again
    again = apply(messages, 500, state=out.state)
    assert [w["kind"] for w in again.report["warnings"]] == ["over_budget"]
    other = apply(messages, 600, state=out.state)
    assert [w["kind"] for w in other.report["warnings"]] == ["over_budget", "budget_below_floor"]


@pytest.mark.parametrize(
    "request_body",
    [
        {"previous_response_id": "resp_123"},
        {"messages": [{"role": "assistant", "type": "compaction", "encrypted_content": "x"}]},
    ],
)
def test_provider_owned_state_is_left_alone(request_body: dict[str, Any]) -> None:
    messages = [TASK, *read("r1", "a.py"), *read("r2", "a.py")]
    if "messages" in request_body:
        messages = [*messages, *request_body["messages"]]
    out = apply(messages, 100, request=request_body, max_result_tokens=100)
    assert out.messages is messages
    assert out.report["prune"]["skipped"]


def test_idempotent_and_deterministic() -> None:
    messages = [TASK, *read("r1", "a.py"), *read("r2", "b.py"), *read("r3", "a.py"),
                *run_cmd("c1", "pytest", PYTEST_FAIL), *read("r4", "c.py")]  # fmt: skip
    budget = int(TOKENS.count_messages(messages) * 0.8)
    options = {"keep_last_observations": 2, "target_ratio": 0.6, "drop_turns": False}
    once = apply(messages, budget, **options)
    again = apply(messages, budget, **options)
    assert once.messages == again.messages and once.state == again.state
    assert len(elided(once)) >= 2
    twice = apply(once.messages, budget, state=once.state, **options)
    assert twice.messages == once.messages
    # system, user and assistant messages are untouched short of dropping turns
    assert [m for m in once.messages if m["role"] != "tool"] == [
        m for m in messages if m["role"] != "tool"
    ]


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "target"),
    [
        ("bash", {"command": "cat ./src/a.py"}, "read", "src/a.py"),
        ("bash", {"command": "sed -n '10,40p' src/a.py"}, "read", "src/a.py"),
        ("bash", {"command": "sed -i 's/x/y/' src/a.py"}, "write", "src/a.py"),
        ("bash", {"command": "cat > notes.md <<'EOF'\nhi\nEOF"}, "write", "notes.md"),
        (
            "bash",
            {"command": "python run.py 2>&1 | tee out.log"},
            "run",
            "python run.py 2>&1 | tee out.log",
        ),
        (
            "bash",
            {"command": "pytest -x  tests/ 2>/dev/null"},
            "run",
            "pytest -x tests/ 2>/dev/null",
        ),
        ("bash", {"command": "ls -la src/"}, "list", "ls src"),
        ("str_replace_editor", {"command": "view", "path": "/r/a.py"}, "read", "/r/a.py"),
        ("str_replace_editor", {"command": "str_replace", "path": "/r/a.py"}, "write", "/r/a.py"),
        ("Read", {"file_path": "a.py"}, "read", "a.py"),
        ("Write", {"file_path": "a.py", "content": "x"}, "write", "a.py"),
        ("LS", {"path": "/r"}, "list", "ls /r"),
        ("TodoWrite", {"todos": []}, "plan", "todowrite"),
    ],
)
def test_tool_calls_are_classified(
    name: str, arguments: dict[str, Any], kind: str, target: str
) -> None:
    action = observations_mod.classify(name, orjson.dumps(arguments).decode())
    assert (action.kind, action.target) == (kind, target)


BIG = "\n".join(f"line {i} " + "lorem ipsum dolor " * 5 for i in range(300))
LATEST = user("LATEST INSTRUCTION: now rename module foo to bar")
# (messages, budget, messages that must be forwarded verbatim): the drop stage never touches the
# latest user instruction nor the turn the model must answer (trailing system messages aside).
CURRENT_TURN_CASES = [
    pytest.param(
        [system("sys"), user("Original task: build the thing"),
         assistant("ok", shell("c1", "python a.py")), result("c1", BIG), LATEST,
         *[m for k in range(2, 6) for m in run_cmd(f"c{k}", f"python s{k}.py", BIG)]],
        9000, [LATEST], id="tool-loop-after-latest-instruction",
    ),
    pytest.param(
        [system("sys"), user("Original task"), *run_cmd("c1", "python a.py", "small"),
         *run_cmd("c2", "python b.py", BIG), system("<system-reminder>go on</system-reminder>")],
        5000, [assistant(None, shell("c2", "python b.py")), result("c2", BIG)],
        id="trailing-system-reminder",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("messages", "budget", "kept"), CURRENT_TURN_CASES)
def test_drop_never_touches_the_current_turn(
    messages: list[dict[str, Any]], budget: int, kept: list[dict[str, Any]]
) -> None:
    out = apply(messages, budget, keep_last_observations=2)
    for m in kept:
        assert m in out.messages
    assert chain_validator.find_violations(out.messages) == []


TOOLS = [
    {"type": "function", "function": {"name": f"tool_{i}", "description": "does a thing " * 200,
                                      "parameters": {"type": "object", "properties": {}}}}
    for i in range(10)
]  # fmt: skip


def test_budget_counts_the_tools_schema() -> None:
    messages = [TASK, *[m for k in range(8) for m in read(f"r{k}", f"f{k}.py")]]
    size, schema = TOKENS.count_messages(messages), TOKENS.count_tools(TOOLS)
    budget = size + schema // 2  # the messages alone fit, with the tools they do not
    out = apply(messages, budget, tools=TOOLS, keep_last_observations=2)
    info = out.report["prune"]
    assert info["compacted"] is True and info["over_budget"] is False
    assert info["tokens_after"] == TOKENS.count_messages(out.messages) + schema <= budget
    assert apply(messages, budget, keep_last_observations=2).messages is messages


# (room left under the budget, options): prune compacts as soon as fewer than the reserve (for
# inject's tail block) are left: ``reserve_tokens``, at most ``reserve_ratio`` of the budget
# (inject fits its block to the room left), never more than budget - target.
RESERVE_CASES = [
    pytest.param(500, {"reserve_ratio": 1.0}, True, id="reserve-is-injects-cap"),
    pytest.param(500, {"reserve_ratio": 1.0, "reserve_tokens": 200}, False, id="smaller-reserve"),
    pytest.param(1500, {"reserve_ratio": 1.0}, False, id="room-enough"),
    pytest.param(500, {}, False, id="small-budget-reserves-a-share"),
    pytest.param(100, {}, True, id="less-than-the-share-left"),
]


@pytest.mark.parametrize(("room", "options", "compacts"), RESERVE_CASES)
def test_reserves_room_for_the_tail_block(
    room: int, options: dict[str, Any], compacts: bool
) -> None:
    messages = [TASK, *[m for k in range(8) for m in read(f"r{k}", f"f{k}.py")]]
    budget = TOKENS.count_messages(messages) + room
    assert budget * 0.05 < 500 < 1_000  # the default share of this budget is under both rooms
    out = apply(messages, budget, keep_last_observations=2, **options)
    assert out.report["prune"]["compacted"] is compacts
    assert (out.messages is messages) is not compacts
    reserve = min(
        options.get("reserve_tokens", 1_000), int(budget * options.get("reserve_ratio", 0.05))
    )
    assert out.report["prune"]["reserve"] == reserve


def test_reserve_never_exceeds_the_gap_to_the_target() -> None:
    messages = [system("rules " * 200), TASK]
    budget = TOKENS.count_messages(messages) + 100  # far less than the reserve, over the target
    out = apply(messages, budget)
    assert out.messages is messages and out.report["prune"]["over_budget"] is False


def view(cid: str, path: str, **extra: Any) -> dict[str, Any]:
    return assistant(None, call(cid, "str_replace_editor", command="view", path=path, **extra))


# (calls in order, each answered; indices of the calls whose results are superseded): a partial
# read goes only for a later read covering its lines, or a full read or a write of the file.
PARTIAL_CASES = [
    pytest.param([view("v1", "/r/big.py", view_range=[1, 40]),
                  view("v2", "/r/big.py", view_range=[900, 940])], set(), id="disjoint-ranges"),
    pytest.param([assistant(None, shell("s1", "sed -n '10,20p' a.py")),
                  assistant(None, shell("s2", "head -5 a.py"))], set(), id="sed-then-head"),
    pytest.param([view("v1", "/r/big.py", view_range=[10, 20]),
                  view("v2", "/r/big.py", view_range=[1, 40])], {0}, id="covered"),
    pytest.param([view("v1", "/r/big.py", view_range=[10, 20]),
                  view("v2", "/r/big.py", view_range=[15, -1])], set(), id="overlap-only"),
    pytest.param([view("v1", "/r/big.py", view_range=[900, 940]), view("v2", "/r/big.py")], {0},
                 id="then-full-read"),
    pytest.param([view("v1", "/r/big.py"), view("v2", "/r/big.py", view_range=[1, 40])], set(),
                 id="full-then-partial"),
    # the range written as a string, as some models send it: still a part of the file
    pytest.param([view("v1", "/r/big.py"), view("v2", "/r/big.py", view_range="[360, -1]")],
                 set(), id="full-then-partial-as-a-string"),
    pytest.param([view("v1", "/r/big.py", view_range="[10, 20]"),
                  view("v2", "/r/big.py", view_range="[1, 40]")], {0}, id="covered-as-strings"),
    pytest.param([view("v1", "/r/big.py", view_range="[1, 40]"),
                  view("v2", "/r/big.py", view_range="[900, 940]")], set(),
                 id="disjoint-as-strings"),
    # a range it cannot read is some part of the file: it supersedes no other read, and only
    # the same read again supersedes it
    pytest.param([view("v1", "/r/big.py"), view("v2", "/r/big.py", view_range="lines 5 to 9")],
                 set(), id="unreadable-range"),
    pytest.param([view("v1", "/r/big.py"), view("v2", "/r/big.py", view_range=[360])], set(),
                 id="one-number-range"),
    pytest.param([view("v1", "/r/big.py", view_range="x"), view("v2", "/r/big.py", view_range="x")],
                 {0}, id="same-unreadable-range-again"),
    pytest.param([view("v1", "/r/big.py", view_range="x"), view("v2", "/r/big.py", view_range="y")],
                 set(), id="other-unreadable-range"),
    pytest.param([view("v1", "/r/big.py", view_range='["²", 1]'),
                  view("v2", "/r/big.py", view_range='["²", 1]')], {0}, id="digits-int-refuses"),
    # one bound it cannot read makes the pair unreadable, not a wider range
    pytest.param([assistant(None, call("r1", "Read", file_path="a.py", offset=100, limit=100)),
                  assistant(None, call("r2", "Read", file_path="a.py", offset=10, limit=5.0))],
                 set(), id="half-readable-offset"),
    pytest.param([view("v1", "/r/big.py"),
                  assistant(None, call("r2", "Read", file_path="/r/big.py", start_line="x",
                                       end_line=5))], set(), id="half-readable-lines"),
    # empty bounds say nothing: a full read
    pytest.param([view("v1", "/r/big.py", view_range=[10, 20]),
                  view("v2", "/r/big.py", view_range="")], {0}, id="empty-range-is-full"),
    pytest.param([assistant(None, call("r1", "Read", file_path="a.py")),
                  assistant(None, call("r2", "Read", file_path="a.py", offset="the end"))],
                 set(), id="unreadable-offset"),
    pytest.param([assistant(None, call("r1", "Read", file_path="a.py", offset=100, limit=50)),
                  assistant(None, call("r2", "Read", file_path="a.py", offset=1, limit=20))],
                 set(), id="read-offset-limit"),
    pytest.param([assistant(None, shell("s1", "sed -n '10,20p' a.py")),
                  assistant(None, call("w1", "Write", file_path="a.py", content="x"))], {0},
                 id="then-write"),
    pytest.param([assistant(None, shell("t1", "tail -5 a.py")),
                  assistant(None, shell("t2", "head -5 a.py"))], set(), id="tail-then-head"),
    pytest.param([assistant(None, shell("t1", "tail -5 a.py")),
                  assistant(None, shell("t2", "tail -5 a.py"))], {0}, id="same-tail-again"),
]  # fmt: skip


def _raw_view(cid: str, arguments: str) -> dict[str, Any]:
    """A view call whose arguments are ``arguments`` as sent (not written by a JSON encoder)."""
    out = view(cid, "/r/big.py")
    out["tool_calls"][0]["function"]["arguments"] = arguments
    return out


DEEP = "[" * 1_500 + "]" * 1_500  # deeper than orjson reads: the standard parser would recurse
PARTIAL_CASES += [
    pytest.param([view("v1", "/r/big.py"),
                  _raw_view("v2", '{"command": "view", "path": "/r/big.py", "view_range": '
                            '[360, -1], "note": "\\udcff"}')], set(), id="lone-surrogate"),
    pytest.param([view("v1", "/r/big.py"), view("v2", "/r/big.py", view_range=[[[[1]]], 2])],
                 set(), id="nested-range"),
    pytest.param([view("v1", "/r/big.py", view_range=[1, 40]),
                  _raw_view("v2", '{"command": "view", "path": "/r/big.py", "view_range": '
                            + DEEP + "}")], set(), id="nested-past-orjson"),
]  # fmt: skip


@pytest.mark.parametrize(("calls", "superseded"), PARTIAL_CASES)
def test_partial_reads_are_superseded_only_by_what_covers_them(
    calls: list[dict[str, Any]], superseded: set[int]
) -> None:
    messages: list[dict[str, Any]] = [TASK]
    for k, c in enumerate(calls):
        messages += [c, result(c["tool_calls"][0]["id"], f"output {k}")]
    obs = observations_mod.observations(messages)
    got = prune_stages.supersede(obs, set(), messages)
    assert {(i - 2) // 2 for i, _ in got} == superseded


@pytest.mark.parametrize(
    ("budget", "options"),
    [
        pytest.param(20_000, {}, id="masks-and-drops"),
        pytest.param(25_000, {"drop_turns": False}, id="masks"),
        pytest.param(None, {"max_result_tokens": 500}, id="caps"),
    ],
)
def test_reapplied_to_its_own_output_nothing_changes(
    budget: int | None, options: dict[str, Any]
) -> None:
    messages = [system("sys"), TASK]
    for k in range(14):
        messages += run_cmd(f"c{k}", f"python s{k}.py", BIG if k % 3 == 0 else "ok " * 300)
    once = apply(messages, budget, **options)
    assert once.state.get(prune.NAMESPACE)["edits"]
    twice = apply(once.messages, budget, state=once.state, **options)
    assert twice.messages is once.messages
    assert twice.state == once.state


def test_a_provider_item_is_found_past_a_prefix_resent_from_the_last_request() -> None:
    """The session's last list was free of provider-owned items: its messages, resent as the
    same objects, are not looked at again; one that arrives with the new ones, or in place of
    an earlier one, is still found."""
    messages = [TASK, *read("r1", "a.py"), *read("r2", "b.py")]
    item = {"role": "assistant", "type": "compaction", "encrypted_content": "x"}
    kept: dict[str, Any] = {}
    config = prune.Config(max_result_tokens=100)
    first = prune.apply(ctx(messages, budget=100, memo=kept), config)
    assert "skipped" not in first.report["prune"]
    for sent in ([*messages, item], [TASK, item, *messages[2:]]):
        out = prune.apply(ctx(sent, budget=100, memo=kept), config)
        assert out.messages is sent
        assert out.report["prune"]["skipped"] == "provider compaction item"


BATCH = [f"b{k}" for k in range(4)]


def _batch_after_reads(older: int, each: int) -> list[dict[str, Any]]:
    """Two older reads, then four reads called at once and their results, not read yet."""
    return [
        TASK,
        *read("r1", "old_a.py", older), *read("r2", "old_b.py", older),
        assistant(None, *(call(c, "Read", file_path=f"src/{c}.py") for c in BATCH)),
        *(result(c, blob(f"src/{c}.py", each)) for c in BATCH),
    ]  # fmt: skip


def test_a_batch_over_half_the_budget_keeps_its_last_two_whole() -> None:
    """Unread results that could not fit beside the rest are cut as any recent result is: the
    last two stay whole, and the request fits its budget."""
    messages = _batch_after_reads(older=100, each=600)
    size = TOKENS.count_messages(messages)
    budget = int(size * 0.75)
    out = apply(messages, budget, keep_last_observations=10, target_ratio=0.6)
    got = elided(out)
    whole = [m["tool_call_id"] for i, m in enumerate(out.messages)
             if m.get("tool_call_id") in BATCH and i not in got]  # fmt: skip
    assert whole[-2:] == BATCH[-2:] and len(whole) < len(BATCH)
    assert TOKENS.count_messages(out.messages) <= budget


def test_a_forced_cut_keeps_the_results_of_calls_made_at_once_the_model_has_not_read() -> None:
    """The model's last turn called four reads at once; their results are what it reads next.
    Masked unread (a forced cut kept the last two only), each is read again, and the re-reads
    bring the same request back over the budget. Older results go instead."""
    messages = _batch_after_reads(older=900, each=200)
    size = TOKENS.count_messages(messages)
    out = apply(messages, int(size * 0.75), keep_last_observations=10, target_ratio=0.6)
    assert out.report["prune"]["schedule"]["decision"] == "forced"
    kept = {m["tool_call_id"]: m for m in out.messages if m.get("tool_call_id") in BATCH}
    assert kept == {m["tool_call_id"]: m for m in messages if m.get("tool_call_id") in BATCH}
    gone = {"r1", "r2"} - {m.get("tool_call_id") for m in out.messages if m in messages}
    assert gone  # the older reads went instead
    assert chain_validator.find_violations(out.messages) == []
