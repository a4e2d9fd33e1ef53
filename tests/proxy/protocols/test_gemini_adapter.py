"""The Gemini ``generateContent`` adapter, through the real engine (strict: a rule that raises
fails the test): what the rules did not change is forwarded as the client's own objects, byte for
byte (``thoughtSignature``, ``inlineData``, unknown fields, ids, part order); broken histories
come out valid under Gemini's pairing rule; the rules' edits land as patches."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import orjson

from proxy.protocols.base import TAG
from proxy.protocols.gemini import GEMINI
from proxy.protocols.gemini_checks import pairing_violations
from proxy.rewrite.engine import Engine, Rewritten

MODEL = "gemini-3.8-flash"
SIG = "CiQBfakeSig45b47e7510a446798a9ed8fee000b676=="
SHELL = {
    "name": "run_shell_command",
    "description": "Run a shell command.",
    "parametersJsonSchema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def preamble(listing: str = "") -> dict[str, Any]:
    return {"text": f"<session_context>\nThis is the Gemini CLI.\n{listing}\n</session_context>"}


def body(*contents: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "contents": list(contents),
        "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}], "role": "user"},
        "tools": [{"functionDeclarations": [SHELL]}],
        "generationConfig": {"temperature": 1, "topP": 0.95},
        **extra,
    }


def user(*parts: Any) -> dict[str, Any]:
    return {"parts": [p if isinstance(p, dict) else {"text": p} for p in parts], "role": "user"}


def model(*parts: Any) -> dict[str, Any]:
    return {"parts": [p if isinstance(p, dict) else {"text": p} for p in parts], "role": "model"}


def call(cid: str | None, command: str, sig: str | None = SIG) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": "run_shell_command", "args": {"command": command}}
    if cid is not None:
        fc = {"id": cid, **fc}
    part: dict[str, Any] = {"functionCall": fc}
    if sig is not None:
        part["thoughtSignature"] = sig
    return part


def response(cid: str | None, output: str = "made", name: str = "run_shell_command") -> dict:  # type: ignore[type-arg]
    fr: dict[str, Any] = {"name": name, "response": {"output": output}}
    if cid is not None:
        fr["id"] = cid
    return {"functionResponse": fr}


async def rewrite(
    engine: Engine, b: dict[str, Any], now: float = 1000.0, headers: dict[str, str] | None = None
) -> Rewritten:
    sent = copy.deepcopy(b)
    out = await engine.rewrite(b, headers or {}, now=now, adapter=GEMINI, model=MODEL)
    assert b == sent, "the client's body was mutated"
    assert TAG.encode() not in orjson.dumps(out.body)
    assert pairing_violations(out.body["contents"]) == []
    assert "integrity" not in out.report
    return out


def same(a: Any, b: Any) -> bool:
    return orjson.dumps(a) == orjson.dumps(b)


def responses_of(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for p in content["parts"] if "functionResponse" in p]


async def test_a_request_the_rules_leave_alone_is_the_clients_own_body(engine: Engine) -> None:
    b = body(user(preamble(), "make a folder"))
    out = await rewrite(engine, b)
    assert out.body is b
    assert out.report["protocol"] == "gemini"
    assert out.report["working_set"]["goal"] == "make a folder"  # not the preamble


async def test_a_resumed_session_with_a_doubled_response_is_repaired(engine: Engine) -> None:
    first = user(preamble("└───a.txt"), "make a folder")
    turn = model("I'll run it.", call("run_shell_command_1_0", "mkdir -p demo789"))
    doubled = user(response("run_shell_command_1_0"), response("run_shell_command_1_0"))
    done = model("Created.")
    ask = user("now delete the folder you just made")
    out = await rewrite(engine, body(first, turn, doubled, done, ask))
    fwd = out.body["contents"]
    assert fwd[0] is first and fwd[1] is turn and fwd[3] is done  # the client's own objects
    assert fwd[2]["parts"] == [response("run_shell_command_1_0")]  # one response, as sent
    assert fwd[2]["role"] == "user"
    kinds = [r["kind"] for r in out.report["repairs"]]
    assert kinds == ["duplicate_result"], kinds
    # written from the contents' kept bytes, not serialised again: the same bytes
    assert out.data is not None and out.data == orjson.dumps(out.body)


async def test_a_resumed_cli_session_is_one_proxy_session(engine: Engine) -> None:
    turn = model("I'll run it.", call("c1", "mkdir -p demo"))
    b1 = body(user(preamble("└───a.txt"), "make a folder"), turn, user(response("c1")))
    s1 = (await rewrite(engine, b1)).session_id
    # resumed: the preamble regenerated (the listing changed), the prompt and system the same
    b2 = body(user(preamble("└───a.txt\n└───demo/"), "make a folder"), turn, user(response("c1")),
              model("Created."), user("now delete it"))  # fmt: skip
    resumed = await rewrite(engine, b2, now=1010.0)
    assert resumed.session_id == s1
    assert "lineage" not in resumed.report  # the conversation's own branch goes on: no fork
    assert resumed.body["contents"][0] is b2["contents"][0]  # the fresh preamble, as sent
    assert resumed.report["sections"]["environment"]["before"] > 0  # counted, kept out of view
    other = body(user(preamble("└───a.txt"), "list the files"))
    assert (await rewrite(engine, other)).session_id != s1


async def test_broken_histories_come_out_valid_with_untouched_parts_identical(
    engine: Engine,
) -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    first = user(preamble(), "make two folders", image)
    # calls without ids, answered by name and order as Gemini pairs them
    two = model({"text": "plan", "thought": True, "thoughtSignature": SIG},
                call(None, "mkdir a", None), call(None, "mkdir b", None))  # fmt: skip
    answered = user(response(None, "made a"), response(None, "made b"))
    unanswered = model("Listing.", call("c2", "ls"))
    user_instead = user("and?")  # c2 never answered
    orphan = user(response("ghost", "stale output"), "go on")  # answers no call
    b = body(first, two, answered, unanswered, user_instead, model("Listed."), orphan)
    out = await rewrite(engine, b)
    fwd = out.body["contents"]
    assert fwd[0] is first and fwd[1] is two and fwd[2] is answered
    assert "functionResponse" not in orjson.dumps(fwd[-1]).decode()  # the orphan: readable text
    assert "stale output" in orjson.dumps(fwd[-1]).decode()
    assert responses_of(fwd[4])[0]["id"] == "c2"  # a result for the unanswered call, first
    assert same(fwd[4]["parts"][-1], {"text": "and?"})
    kinds = {r["kind"] for r in out.report["repairs"]}
    assert len(kinds) >= 2, kinds
    roles = [c["role"] for c in fwd]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


async def test_drifted_and_reused_ids_are_unified(engine: Engine) -> None:
    drifted = model(call("Call_7", "mkdir x"))
    answered = user(response("call_7 ", "made x"))  # case and whitespace drifted
    reused_a = model(call("dup", "ls a"))
    reused_a_done = user(response("dup", "a.txt"))
    reused_b = model(call("dup", "ls b"))
    reused_b_done = user(response("dup", "b.txt"))
    b = body(user("go"), drifted, answered, reused_a, reused_a_done, reused_b, reused_b_done,
             model("Done."), user("thanks"))  # fmt: skip
    out = await rewrite(engine, b)
    fwd = out.body["contents"]
    pairs = [(c["parts"][0]["functionCall"]["id"], responses_of(n)[0]["id"])
             for c, n in itertools.pairwise(fwd)
             if c["role"] == "model" and "functionCall" in c["parts"][0]]  # fmt: skip
    assert len(pairs) == 3 and all(a == b for a, b in pairs), pairs
    ids = [a for a, _ in pairs]
    assert len(set(ids)) == 3, ids
    signed = [c for c in fwd if c["role"] == "model" and "functionCall" in c["parts"][0]]
    assert all(c["parts"][0]["thoughtSignature"] == SIG for c in signed)


async def test_two_calls_of_one_turn_sharing_an_id_stay_two(engine: Engine) -> None:
    twice = model(call("dup", "ls a"), call("dup", "ls b", sig=None))
    out = await rewrite(engine, body(user("go"), twice, user(response("dup", "a.txt"))))
    calls = [p["functionCall"] for p in out.body["contents"][1]["parts"]]
    assert [(c["id"], c["args"]["command"]) for c in calls] == [("dup", "ls a"), ("dup_2", "ls b")]
    assert out.body["contents"][1]["parts"][0]["thoughtSignature"] == SIG
    assert [r["id"] for r in responses_of(out.body["contents"][2])] == ["dup", "dup_2"]


async def test_two_user_turns_in_a_row_stay_two(engine: Engine) -> None:
    """The CLI's routing classifier sends the preamble and the prompt as two user contents: the
    API accepts that, so they are not merged for nothing."""
    b = body(user(preamble()), user("make a folder"))
    out = await rewrite(engine, b)
    assert out.body is b


async def test_injected_context_is_a_part_of_its_own_after_the_clients(engine: Engine) -> None:
    turn = model("Creating it.", call("c1", "mkdir -p /work/demo123 && echo made"))
    done = user(response("c1", "made"))
    first = user(preamble(), "make a folder /work/demo123")
    await rewrite(engine, body(first, turn, done), now=1000.0)
    ask = user({"text": "delete the folder you just created", "x-client-field": 7})
    out = await rewrite(engine, body(first, turn, done, model("Done."), ask), now=1010.0)
    last = out.body["contents"][-1]["parts"]
    assert same(last[0], ask["parts"][0])  # the client's part, unknown field and all
    assert "<ctxproxy-context>" in last[-1]["text"] and "/work/demo123" in last[-1]["text"]
    assert out.body["systemInstruction"] is not None
    assert same(out.body["tools"], body()["tools"])


async def test_compaction_patches_responses_and_keeps_ids_and_signatures(engine: Engine) -> None:
    engine.budget_override = 6000
    engine._budgets.clear()
    contents: list[dict[str, Any]] = [user(preamble(), "inspect the logs")]
    for n in range(14):
        cid = f"c{n:02d}"
        contents.append(model({"text": f"step {n}", "thought": True}, call(cid, f"cat log{n}")))
        contents.append(user(response(cid, "\n".join(f"line {k} of log {n}" for k in range(120)))))
    contents.append(user("summarise"))
    out = await rewrite(engine, body(*contents))
    assert out.report["tokens"]["after"] < out.report["tokens"]["before"]
    for c in out.body["contents"]:
        for p in c["parts"]:
            if "functionCall" in p:
                assert p["thoughtSignature"] == SIG
                assert p["functionCall"]["args"] == {
                    "command": f"cat log{int(p['functionCall']['id'][1:])}"
                }
    assert "thinking" in out.report["sections"]
    assert out.data == orjson.dumps(out.body)
    # the session's next request, the same content objects and one more turn: the compacted
    # contents lifted again are written from the bytes kept for them, and stay exact
    again = await rewrite(engine, body(*contents, model("done"), user("next")), now=1010.0)
    rewritten = [c for c in again.body["contents"] if all(c is not k for k in contents)]
    assert len(rewritten) > 2
    assert again.data == orjson.dumps(again.body)


def test_hidden_text_is_the_thought_parts() -> None:
    b = body(user("go"), model({"text": "deep thought", "thought": True}, "ok"))
    assert GEMINI.hidden_text(b) == {"thinking": "deep thought"}


async def test_a_response_not_naming_its_call_is_renamed(engine: Engine) -> None:
    """Gemini pairs a turn's calls and responses by name: one naming another tool is refused, so
    it takes its call's name (the rest of the part as sent)."""
    turn = model(call("c1", "ls"))
    wrong = user(response("c1", "a.txt", name="read_file"))
    out = await rewrite(engine, body(user("list"), turn, wrong, model("One file."), user("ok")))
    fwd = out.body["contents"]
    assert fwd[1] is turn
    assert responses_of(fwd[2]) == [{**responses_of(wrong)[0], "name": "run_shell_command"}]
    assert [r["kind"] for r in out.report["repairs"]] == ["response_name_mismatch"]


async def test_responses_out_of_their_calls_order_are_put_in_it(engine: Engine) -> None:
    """Gemini pairs a turn's calls with the next turn's responses in order: answered in another
    order (by id, or by name without ids) they are written in the calls' order, each part as
    sent; a later turn answered in order stays the client's own."""
    read = {"functionCall": {"id": "r", "name": "read_file", "args": {"path": "a"}}}
    for ids in (True, False):
        calls = model(call("s" if ids else None, "ls"), read if ids else
                      {"functionCall": {"name": "read_file", "args": {"path": "a"}}})  # fmt: skip
        shell = response("s" if ids else None, "a.txt")
        file = response("r" if ids else None, "text", name="read_file")
        later = model(call("t" if ids else None, "pwd"))
        answered = user(response("t" if ids else None, "/w"))
        b = body(
            user("look"), calls, user(file, shell), later, answered, model("Done."), user("ok")
        )
        out = await rewrite(engine, b)
        fwd = out.body["contents"]
        assert fwd[2]["parts"] == [shell, file]
        assert fwd[1] is calls and fwd[4] is answered
        assert [r["kind"] for r in out.report["repairs"]] == ["response_order"]


async def test_a_response_in_a_model_turn_is_moved_to_a_users_content(engine: Engine) -> None:
    """Gemini refuses a function response in a model turn. It was left out, its output lost,
    and a turn of nothing else said "[ctxproxy: functionResponse kept as sent]". The turn now
    goes on without it, its other parts as sent, and the response goes to the user's content
    after it: kept as text when it answers no call, the answer of the call it names otherwise."""
    first = user("list the files")
    odd = model({"text": "Listing.", "thoughtSignature": "sig=="}, response(None, "a.txt"))
    after = user("and now?")
    out = await rewrite(engine, body(first, odd, after))
    fwd = out.body["contents"]
    assert fwd[0] is first
    assert fwd[1] == {"role": "model", "parts": [{"text": "Listing.", "thoughtSignature": "sig=="}]}
    assert fwd[2]["role"] == "user" and "a.txt" in orjson.dumps(fwd[2]).decode()
    assert "response_in_model_turn" in [r["kind"] for r in out.report["repairs"]]
    # a turn of nothing but the answer to the call before it: the answer, in a user's content
    asked = model(call("c9", "make"))
    lone = model(response("c9", "made"))
    out = await rewrite(engine, body(user("go"), asked, lone, user("next")), now=2000.0)
    fwd = out.body["contents"]
    assert [c["role"] for c in fwd] == ["user", "model", "user"]
    assert responses_of(fwd[2]) == [response("c9", "made")["functionResponse"]]
    assert "kept as sent" not in orjson.dumps(fwd).decode()
    # a session's next request, grown: the lowering kept from the last one still knows the turn
    grown = body(first, odd, after, model("Done."), user("thanks"))
    out = await rewrite(engine, grown, now=3000.0)
    assert responses_of(out.body["contents"][1]) == []


async def test_a_turn_after_a_turn_is_answered_with_both_in_the_next_content(
    engine: Engine,
) -> None:
    """Two model turns, each with a call, answered in one user content: the first call's
    response was taken for an orphan and the call said interrupted."""
    first = model({"functionCall": {"name": "ls", "args": {}}})
    second = model({"functionCall": {"name": "cat", "args": {}}})
    both = user(response(None, "LS-OUT", "ls"), response(None, "CAT-OUT", "cat"))
    out = await rewrite(engine, body(user("go"), first, second, both, model("done"), user("n")))
    fwd = out.body["contents"]
    assert [c["role"] for c in fwd] == ["user", "model", "user", "model", "user", "model", "user"]
    assert [r["response"]["output"] for r in responses_of(fwd[2])] == ["LS-OUT"]
    assert [r["response"]["output"] for r in responses_of(fwd[4])] == ["CAT-OUT"]
    assert "interrupted" not in orjson.dumps(fwd).decode()


def test_the_lowering_memory_reuses_a_grown_body_and_stays_within_its_bytes() -> None:
    """A session's next body, sharing its contents as objects (the body memory's), lowers only
    what is new; the snapshots kept are charged by their texts and stay within the bound, the
    oldest sessions' going first."""
    from proxy.protocols.gemini_lower import lower_contents
    from proxy.protocols.gemini_prefix import LoweredMemory

    memory = LoweredMemory(max_slots=64, max_bytes=40_000)
    turns = [user("task"), model(call("c1", "ls")), user(response("c1", "x" * 2_000))]
    first = body(*turns)
    memory.lowered(first, "s1", lower_contents)
    grown = {**first, "contents": [*first["contents"], model("done")]}
    messages, _ = memory.lowered(grown, "s1", lower_contents)
    assert memory.reused == 3
    assert messages[-1]["content"] == "done"
    for n in range(20):  # other sessions, each a body of its own
        other = body(user(f"task {n}"), model(call("c1", "ls")), user(response("c1", "y" * 3_000)))
        memory.lowered(other, f"s{n + 2}", lower_contents)
        assert 0 < memory._slots.held_bytes <= 40_000
    assert len(memory._slots) < 20


def test_a_reused_lowering_keeps_the_bookkeeping_a_whole_lowering_makes() -> None:
    """Reused over a grown body (every previous content shared) and over a body that parts from
    the previous one midway, and with the system instruction gone: the messages, each tag's part
    and each content's tags are those of lowering the body whole."""
    from proxy.protocols.gemini_lower import lower_contents
    from proxy.protocols.gemini_prefix import LoweredMemory

    def bookkeeping(b: dict[str, Any], memory: LoweredMemory) -> tuple[Any, ...]:
        messages, st = memory.lowered(b, "s1", lower_contents)
        whole, ref = lower_contents(b)
        parts = {t: (p.content, p.parts, p.lowered) for t, p in st.parts.items()}
        ref_parts = {t: (p.content, p.parts, p.lowered) for t, p in ref.parts.items()}
        assert (messages, parts, st.tags) == (whole, ref_parts, ref.tags)
        assert st.synthetic == ref.synthetic
        return messages, st

    memory = LoweredMemory()
    turns = [user("task"), model(call("c1", "ls"), call(None, "pwd")),
             user(response("c1", "a"), response(None, "b", "run_shell_command"))]  # fmt: skip
    first = body(*turns)
    bookkeeping(first, memory)
    grown = {**first, "contents": [*first["contents"], model("done"), user("next")]}
    bookkeeping(grown, memory)
    assert memory.reused == 3
    parted = {**grown, "contents": [*grown["contents"][:2], user(response("c1", "changed"))]}
    bookkeeping(parted, memory)
    assert memory.reused == 3 + 2
    no_system = {k: v for k, v in parted.items() if k != "systemInstruction"}
    _, st = bookkeeping(no_system, memory)
    assert "s" not in st.parts


def test_a_reused_lifting_gives_the_contents_a_whole_lifting_gives() -> None:
    """Lifting reuses the previous request's groups and the contents they gave, merges
    included. The rules drop a user turn and rewrite the model turn after it, so two model
    contents meet and merge; the next requests part after that turn and at it (the merge kept
    must not be merged again), the last one grows. Each equals lifting the same messages with
    nothing kept."""
    from proxy.protocols.gemini_lift import lift_contents
    from proxy.protocols.gemini_lower import lower_contents
    from proxy.protocols.gemini_prefix import LoweredMemory

    memory = LoweredMemory()
    rewritten: dict[int, tuple[Any, Any]] = {}  # by id: the rules' copy of a message, kept

    def edit(messages: list[Any]) -> list[Any]:
        out = []
        for i, m in enumerate(messages):
            if i == 3:  # 0: the system instruction
                continue  # the user turn between the first two model turns: dropped
            if i == 4:
                kept = rewritten.get(id(m))
                if kept is None or kept[0] is not m:
                    kept = rewritten[id(m)] = (m, {**m, "content": m["content"] + " (shortened)"})
                m = kept[1]
            out.append(m)
        return out

    def lifted(b: dict[str, Any]) -> list[Any]:
        messages, st = memory.lowered(b, "s1", lower_contents)
        edited = edit(messages)
        out, _ = lift_contents(st, edited)
        fresh = copy.copy(st)
        fresh.lifted = None
        whole, _ = lift_contents(fresh, edited)
        assert out == whole
        return out

    turns = [user("task"), model("a"), user("b"), model("c"), user("d"), model("e")]
    first = body(*turns)

    def texts(content: dict[str, Any]) -> list[str]:
        return [p["text"] for p in content["parts"]]

    out = lifted(first)
    assert len(out) == 4 and texts(out[1]) == ["a", "c", " (shortened)"]  # merged
    # parts after the rewritten turn: the groups up to "a" are reused, the merge is made again
    changed = {**first, "contents": [*first["contents"][:4], user("d2"), model("e")]}
    assert texts(lifted(changed)[1]) == ["a", "c", " (shortened)"]
    changed = {**changed, "contents": [*changed["contents"][:3], model("c2"), user("d3")]}
    assert texts(lifted(changed)[1]) == ["a", "c2", " (shortened)"]
    grown = {**changed, "contents": [*changed["contents"], user("f"), model("g")]}
    assert len(lifted(grown)) == 5  # "d3" and "f", both the client's own, stay two


async def test_a_turn_of_calls_after_the_models_own_turn_is_joined_to_it(engine: Engine) -> None:
    """Gemini refuses a turn of calls that follows no user's turn ("function call turn comes
    immediately after a user turn or after a function response turn"): a model turn of text,
    then one of calls, was forwarded as sent. The calls now join the turn before them."""
    said = model("let me look")
    asked = model({"functionCall": {"name": "ls", "args": {}}})
    answered = user(response(None, "x", "ls"))
    out = await rewrite(engine, body(user("go"), said, asked, answered, model("k"), user("n")))
    fwd = out.body["contents"]
    assert [c["role"] for c in fwd] == ["user", "model", "user", "model", "user"]
    assert fwd[1]["parts"] == [*said["parts"], *asked["parts"]]
    assert "call_turn_order" in [r["kind"] for r in out.report["repairs"]]


async def test_a_history_that_starts_with_calls_gets_a_users_turn_before_them(
    engine: Engine,
) -> None:
    asked = model({"functionCall": {"name": "ls", "args": {}}})
    out = await rewrite(engine, body(asked, user(response(None, "x", "ls")), model("k"), user("n")))
    fwd = out.body["contents"]
    assert [c["role"] for c in fwd] == ["user", "model", "user", "model", "user"]
    assert fwd[1] == asked
