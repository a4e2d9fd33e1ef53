"""The shrink stage: old prose clipped to its first lines, large string arguments replaced inside
the JSON (the arguments stay valid JSON, every call keeps its envelope), the recent turns, the
current turn and protected evidence untouched; as a stage of a forced compaction it runs before
any turn is dropped, and it replays byte for byte."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rules.base import SessionState
from rules.chain.validator import find_violations
from rules.context import prune, shrink
from rules.messages import PLACEHOLDER_PREFIX, call_arguments_text, tool_calls
from tests.support.factories import TOKENS, assistant, call, ctx, result, user

SCRIPT = "cat > app.py <<'EOF'\n" + "\n".join(f"print({i})  # " + "x" * 40 for i in range(200))


def test_large_string_arguments_become_placeholders_in_valid_json() -> None:
    args = orjson.dumps({"command": SCRIPT, "timeout": 30, "env": {"A": "b" * 900}}).decode()
    out = shrink.shrink_arguments(args, 400)
    assert out is not None
    parsed = orjson.loads(out)  # still JSON
    assert parsed["timeout"] == 30
    assert parsed["command"].startswith("cat > app.py <<'EOF' " + PLACEHOLDER_PREFIX)
    assert f"{len(SCRIPT):,}{shrink.ARG_ELIDED}" in parsed["command"]
    assert parsed["env"]["A"].endswith(f"900{shrink.ARG_ELIDED}")
    assert len(out) < 400


@pytest.mark.parametrize("args", ["{}", '{"path": "a.py"}', "not json at all " * 100])
def test_small_or_unparsable_arguments_are_left_alone(args: str) -> None:
    assert shrink.shrink_arguments(args, 400) is None


def test_prose_keeps_its_first_lines() -> None:
    prose = "\n".join(f"Thought {i}: " + "because " * 10 for i in range(30))
    msg = assistant(prose, call("c1", "bash", command=SCRIPT))
    out = shrink.shrink_message(msg, keep_lines=3, max_chars=400)
    text = out["content"]
    assert text.startswith("Thought 0") and "Thought 2" in text and "Thought 3" not in text
    assert shrink.CLIPPED in text
    (c,) = tool_calls(out)
    assert c["id"] == "c1" and c["function"]["name"] == "bash"  # the envelope
    assert orjson.loads(call_arguments_text(c))["command"].startswith("cat > app.py")
    assert shrink.is_shrunk(out) and not shrink.is_shrunk(msg)
    assert shrink.shrink_message(msg, 3, 400) == out  # deterministic


def agent_session(turns: int) -> list[dict[str, Any]]:
    msgs = [user("Build the app")]
    for k in range(turns):
        prose = "\n".join(f"Turn {k} line {i}: " + "reasoning " * 8 for i in range(12))
        script = f"cat > m{k}.py <<'EOF'\n" + "\n".join(f"v{i} = {i}  # {k}" for i in range(150))
        msgs += [assistant(prose, call(f"c{k}", "bash", command=script)), result(f"c{k}", "ok")]
    return msgs


def test_a_forced_compaction_shrinks_before_dropping_and_keeps_every_envelope() -> None:
    messages = agent_session(12)
    size = TOKENS.count_messages(messages)
    budget = int(size * 0.8)  # shrinking alone makes it fit: no turn is dropped
    # a session growing little: the room kept for its growth is small, shrinking reaches it
    state = SessionState({prune.SESSION: {"requests": 12, "last_tokens": size, "growth": 50}})
    out = prune.apply(ctx(messages, budget=budget, state=state), prune.Config())
    info = out.report["prune"]
    assert info["compacted"] and "shrink" in info["stages"] and "drop" not in info["stages"]
    assert info["tokens_after"] <= budget
    assert find_violations(out.messages) == []
    sent = [c["id"] for m in messages for c in tool_calls(m)]
    kept = [c["id"] for m in out.messages for c in tool_calls(m)]
    assert kept == sent  # every call keeps its envelope
    for m in out.messages:
        for c in tool_calls(m):
            orjson.loads(call_arguments_text(c))  # valid JSON arguments
    # the last turns and the current one are whole
    assert out.messages[-4:] == messages[-4:]
    assert out.messages[0] == messages[0]
    # replayed byte for byte on the next request
    later = [*messages, assistant("done"), user("thanks")]
    again = prune.apply(ctx(later, budget=budget, state=out.state), prune.Config())
    assert again.messages[: len(out.messages)] == out.messages


def test_a_call_whose_result_is_protected_is_not_shrunk() -> None:
    messages = agent_session(8)
    write = assistant(None, call("w1", "Write", file_path="core.py", content="y = 1\n" * 400))
    messages[-4:-4] = [write, result("w1", "File written")]  # among the last three writes
    size = TOKENS.count_messages(messages)
    out = prune.apply(ctx(messages, budget=int(size * 0.6)), prune.Config(keep_last_turns=0))
    assert "shrink" in out.report["prune"]["stages"]
    assert write in out.messages  # a recent write's call is evidence: whole
