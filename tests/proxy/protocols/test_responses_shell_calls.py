"""The shell and patch tools' calls in a Responses input (``shell_call``, ``apply_patch_call``)
are paired as functions are: Responses refuses a call without its output and an output without
its call, so a run interrupted between the two (cancelled, an approval never given) failed on
every retry. An unanswered call gets an output saying so after its turn; an output whose call is
gone becomes the user's text; the rest of the input is forwarded as sent."""

from __future__ import annotations

import time
from typing import Any

import orjson

from proxy.protocols.checks import responses_violations
from proxy.protocols.responses import RESPONSES
from proxy.protocols.responses_opaque import pair_opaque_calls
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_responses_adapter import engine, rewrite  # noqa: F401


def _shell(cid: str) -> dict[str, Any]:
    return {"type": "shell_call", "id": f"sh_{cid}", "call_id": cid, "status": "completed",
            "action": {"commands": ["ls -la"], "timeout_ms": 1000}}  # fmt: skip


def _shell_out(cid: str, stdout: str = "a.txt\n") -> dict[str, Any]:
    chunk = {"stdout": stdout, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
    return {"type": "shell_call_output", "call_id": cid, "output": [chunk]}


def _patch(cid: str) -> dict[str, Any]:
    op = {"type": "update_file", "path": "a.py", "diff": "@@\n-a\n+b\n"}
    return {"type": "apply_patch_call", "id": f"ap_{cid}", "call_id": cid,
            "status": "completed", "operation": op}  # fmt: skip


def _reasoning() -> dict[str, Any]:
    return {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _body(*items: Any) -> dict[str, Any]:
    return {"model": "gpt-5.1", "input": list(items)}


async def test_unanswered_shell_and_patch_calls_get_an_output_after_their_turn(
    engine: Engine,  # noqa: F811
) -> None:
    items = [_user("list, then patch"), _reasoning(), _shell("c1"), _patch("c2"), _user("stop")]
    before = responses_violations(_body(*items))
    assert any("has no output" in v for v in before)  # what the provider refuses
    out = await rewrite(engine, _body(*items))  # asserts the forwarded body has no violation
    sent = out.body["input"]
    assert [i.get("type", "message") for i in sent] == [
        "message", "reasoning", "shell_call", "apply_patch_call",
        "shell_call_output", "apply_patch_call_output", "message",
    ]  # fmt: skip
    assert sent[1:4] == items[1:4] and sent[6] == items[4]
    shell_out, patch_out = sent[4], sent[5]
    assert shell_out["call_id"] == "c1" and shell_out["output"][0]["outcome"]["type"] == "exit"
    assert "interrupted" in shell_out["output"][0]["stderr"]
    assert patch_out == {"type": "apply_patch_call_output", "call_id": "c2", "status": "failed",
                         "output": patch_out["output"]}  # fmt: skip
    kinds = {r["kind"] for r in out.report["repairs"]}
    assert kinds == {"unanswered_call"}


async def test_an_output_whose_call_is_gone_is_the_users_text(engine: Engine) -> None:  # noqa: F811
    items = [_user("go"), _shell_out("gone", stdout="build ok\n"), _user("next?")]
    out = await rewrite(engine, _body(*items))
    sent = out.body["input"]
    assert sent[0] == items[0] and sent[2] == items[2]
    text = sent[1]["content"][0]["text"]
    assert sent[1]["role"] == "user" and "shell_call_output for call gone" in text
    assert "build ok" in text


async def test_an_output_answering_the_providers_history_goes_as_sent(
    engine: Engine,  # noqa: F811
) -> None:
    items = [_shell_out("c9"), _user("more")]  # its call is in the stored response
    b = {**_body(*items), "previous_response_id": "resp_abc"}
    out = await rewrite(engine, b)
    assert orjson.dumps(out.body["input"]) == orjson.dumps(items)


async def test_a_paired_history_goes_as_sent(engine: Engine) -> None:  # noqa: F811
    items = [_user("list"), _shell("c1"), _shell_out("c1"), _patch("c2"),
             {"type": "apply_patch_call_output", "call_id": "c2", "status": "completed"},
             _user("thanks")]  # fmt: skip
    out = await rewrite(engine, _body(*items))
    assert orjson.dumps(out.body["input"]) == orjson.dumps(items)
    assert not out.report.get("repairs")


def _local_shell(cid: str, *argv: str) -> dict[str, Any]:
    action = {"type": "exec", "command": list(argv), "env": {}, "working_directory": "/repo"}
    return {"type": "local_shell_call", "id": f"lsh_{cid}", "call_id": cid, "status": "completed",
            "action": action}  # fmt: skip


async def test_a_local_shell_call_answered_as_codex_answers_it_goes_as_sent(
    engine: Engine,  # noqa: F811
) -> None:
    # Codex answers codex-mini's local shell calls with a function_call_output; before, the
    # output read as an orphan, became user text, and left the call unanswered (a 400)
    codex_output = {"type": "function_call_output", "call_id": "c1",
                    "output": '{"output":"a.txt\\n","metadata":{"exit_code":0}}'}  # fmt: skip
    by_id = {"type": "local_shell_call_output", "id": "c2", "output": "b.txt\n"}
    items = [_user("list"), _local_shell("c1", "ls"), codex_output,
             _local_shell("c2", "ls", "b"), by_id, _user("thanks")]  # fmt: skip
    out = await rewrite(engine, _body(*items))
    assert orjson.dumps(out.body["input"]) == orjson.dumps(items)
    assert not out.report.get("repairs")


async def test_an_unanswered_local_shell_call_gets_a_function_output(engine: Engine) -> None:  # noqa: F811
    items = [_user("list"), _local_shell("c1", "ls"), _user("stop, do something else")]
    out = await rewrite(engine, _body(*items))
    sent = out.body["input"]
    assert sent[:2] == items[:2] and sent[-1] == items[-1]
    assert sent[2]["type"] == "function_call_output" and sent[2]["call_id"] == "c1"
    assert [r["kind"] for r in out.report["repairs"]] == ["unanswered_call"]


async def test_what_a_local_shell_call_made_is_known(engine: Engine) -> None:  # noqa: F811
    made = {"type": "function_call_output", "call_id": "c1",
            "output": '{"output":"","metadata":{"exit_code":0}}'}  # fmt: skip
    items = [_user("make a folder build_out"), _local_shell("c1", "mkdir", "build_out"), made,
             _user("now delete the folder you just created")]  # fmt: skip
    out = await rewrite(engine, _body(*items))
    assert "build_out" in orjson.dumps(out.body["input"][-1]).decode()


async def test_no_reasoning_item_is_left_before_an_output(engine: Engine) -> None:  # noqa: F811
    # a reasoning item cut from what it led to, before the output written for the turn's call,
    # and before a client's shell output: each goes (Responses refuses reasoning before an output)
    cut = [_user("go"), _shell("c1"), _reasoning()]
    before_output = [_user("go"), _shell("c2"), {**_reasoning(), "id": "rs_2"}, _shell_out("c2")]
    for items in (cut, before_output):
        out = await rewrite(engine, _body(*items))  # asserts the forwarded body has no violation
        assert all(i.get("type") != "reasoning" for i in out.body["input"])


async def test_a_search_the_client_runs_is_answered(engine: Engine) -> None:  # noqa: F811
    # Codex runs its tool_search tool itself: an interrupted search gets an empty output, a
    # server's search is the server's to answer
    client = {"type": "tool_search_call", "call_id": "ts1", "execution": "client",
              "arguments": {"query": "deploy"}, "status": "completed"}  # fmt: skip
    server = {**client, "call_id": "ts2", "execution": "server"}
    out = await rewrite(engine, _body(_user("deploy it"), client, server, _user("stop")))
    sent = out.body["input"]
    answers = [i for i in sent if i.get("type") == "tool_search_output"]
    assert [(a["call_id"], a["tools"]) for a in answers] == [("ts1", [])]
    assert sent.index(answers[0]) == 3  # after the turn


async def test_an_old_local_shell_script_shrinks_in_the_body_forwarded(engine: Engine) -> None:  # noqa: F811
    # pruning shrinks an executed script in a call's arguments; a local shell call's arguments
    # are its action, so the shrunk action is what goes (before, the rules counted the saving
    # and the 10 KB script went as sent)
    big = "\n".join(f"src/m/f_{k}.rs:{k}: fn f{k}() -> u32 {{ {k * 7919} }}" for k in range(300))
    lines = "\n".join(f"print('line {k}', {k * 31})" for k in range(400))
    script = f"cat > /tmp/gen.py <<'EOF'\n{lines}\nEOF\npython /tmp/gen.py"  # written and run
    made = {"type": "function_call_output", "call_id": "c0", "output": "ok"}
    items: list[Any] = [_user("fix the build"), _local_shell("c0", "bash", "-lc", script), made]
    for t in range(10):
        items += [
            {"type": "function_call", "call_id": f"f{t}", "name": "exec_command",
             "arguments": orjson.dumps({"cmd": f"cat src/{t}.rs"}).decode()},
            {"type": "function_call_output", "call_id": f"f{t}",
             "output": big.replace("fn", f"fn{t}")},
        ]  # fmt: skip
    out = await engine.rewrite(_body(*items), {}, now=1000.0, adapter=RESPONSES,
                               session_id="shrink", model="gpt-5", budget=40_000)  # fmt: skip
    call = next(i for i in out.body["input"] if i.get("type") == "local_shell_call")
    assert len(orjson.dumps(call["action"])) < 1_000 < len(script)
    assert call["action"]["type"] == "exec" and call["action"]["command"][:2] == ["bash", "-lc"]
    assert {k for k in call if k != "action"} == {"type", "id", "call_id", "status"}


def test_thousands_of_unpaired_items_are_paired_in_one_walk() -> None:
    # each output's look for a stored item and each call's look for its turn's end walked the
    # whole input: 20,000 calls and 20,000 outputs took 220 s of the proxy's CPU; now 0.2 s
    n = 20_000
    items = [_user("go"), *(_shell(f"c{i}") for i in range(n)),
             *(_shell_out(f"gone{i}") for i in range(n))]  # fmt: skip
    started = time.process_time()
    out, repairs = pair_opaque_calls(items, 0, held=False)
    assert time.process_time() - started < 5.0
    assert len(repairs) == 2 * n and len(out) == 3 * n + 1
    assert out[n]["call_id"] == f"c{n - 1}" and out[n + 1]["call_id"] == "c0"  # after the turn


async def test_the_output_goes_before_the_reasoning_that_led_to_the_turns_message(
    engine: Engine,  # noqa: F811
) -> None:
    """A turn that ends in reasoning and the message it led to: the output after that reasoning
    parted it from its message, and the reasoning was then dropped as cut off."""
    second = {**_reasoning(), "id": "rs_2", "encrypted_content": "gBBBB"}
    said = {"type": "message", "role": "assistant", "id": "msg_1",
            "content": [{"type": "output_text", "text": "I will stop here."}]}  # fmt: skip
    items = [_user("list"), _reasoning(), _shell("c1"), second, said, _user("go on")]
    out = await rewrite(engine, _body(*items))
    sent = out.body["input"]
    assert [i.get("type", "message") for i in sent] == [
        "message", "reasoning", "shell_call", "shell_call_output", "reasoning", "message",
        "message",
    ]  # fmt: skip
    assert sent[4] == second and sent[5] == said
    assert {r["kind"] for r in out.report["repairs"]} == {"unanswered_call"}
