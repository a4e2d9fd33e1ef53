"""A Gemini function response with several fields, as the rules read it and as their edits go
back: the text field's lines (``output``, ``content``, ``result`` …) after a line with the other
fields' JSON; an edit goes back into that field and the other fields stay fields. Driven through
the adapter directly, the edit made by hand as a rule makes it (a copy with new content)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.protocols.base import TAG
from proxy.protocols.gemini import GEMINI
from proxy.protocols.gemini_parts import response_text, response_value
from proxy.rewrite.engine import Engine
from rules.messages import PLACEHOLDER_PREFIX
from tests.proxy.protocols.test_gemini_adapter import MODEL, body, call, model, user

NOTE = "<ctxproxy-context>\nthis command failed the same way 3 times\n</ctxproxy-context>"
BIG = "\n".join(f"line {i}: lorem ipsum" for i in range(200))


def _answered(value: Any) -> dict[str, Any]:
    fr = {"id": "c1", "name": "run_shell_command", "response": value}
    return body(user("run it"), model(call("c1", "python run.py")), user({"functionResponse": fr}))


def _lowered_text(value: Any) -> str:
    lowered = GEMINI.lower(_answered(value))
    (tool,) = [m for m in lowered.messages if m.get("role") == "tool"]
    return tool["content"]  # type: ignore[no-any-return]


def _lifted(value: Any, change: Any) -> Any:
    """The ``response`` forwarded once the tool message's text is changed by ``change``."""
    b = _answered(value)
    lowered = GEMINI.lower(b)
    messages = [
        {**m, "content": change(m["content"])} if m.get("role") == "tool" else m
        for m in lowered.messages
    ]
    fwd = GEMINI.lift(b, lowered, messages)
    assert TAG not in orjson.dumps(fwd).decode()
    part = fwd["contents"][2]["parts"][0]
    assert part["functionResponse"]["id"] == "c1"
    return part["functionResponse"]["response"]


def test_the_rules_read_the_text_fields_lines_after_the_other_fields() -> None:
    value = {"output": "a\nb", "exitCode": 1, "meta": {"ms": 5}}
    assert _lowered_text(value) == '{"exitCode":1,"meta":{"ms":5}}\n\na\nb'
    assert _lowered_text({"output": "a\nb"}) == "a\nb"  # one field: its text alone
    assert _lowered_text({"stdout": "x", "stderr": "y"}) == '{"stderr":"y"}\n\nx'
    assert _lowered_text({"files": ["a"], "n": 1}) == '{"files":["a"],"n":1}'  # no text field


def test_an_appended_note_goes_into_the_text_field_and_the_fields_stay() -> None:
    value = {"output": "Traceback\n[Exit Code: 1]", "exitCode": 1, "meta": {"ms": 5}}
    out = _lifted(value, lambda t: f"{t}\n\n{NOTE}")
    assert out == {"output": f"Traceback\n[Exit Code: 1]\n\n{NOTE}", "exitCode": 1,
                   "meta": {"ms": 5}}  # fmt: skip
    assert list(out) == list(value)  # the fields in their order


def test_a_cut_keeps_the_lines_of_the_text_and_the_other_fields() -> None:
    value = {"output": BIG, "truncated": False}

    def cut(text: str) -> str:  # a size cap: the first and last lines kept
        lines = text.split("\n")
        assert len(lines) == 202  # the header, a blank line, the output's 200 lines
        return "\n".join([*lines[:6], "[... 190 lines elided ...]", *lines[-6:]])

    out = _lifted(value, cut)
    assert out["truncated"] is False and list(out) == ["output", "truncated"]
    kept = out["output"].split("\n")
    assert kept[:4] == [f"line {i}: lorem ipsum" for i in range(4)]
    assert kept[-6:] == [f"line {i}: lorem ipsum" for i in range(194, 200)]


def test_an_elision_that_takes_the_blank_line_still_finds_the_fields() -> None:
    value = {"output": "first\nmiddle\nlast", "exitCode": 2}
    out = _lifted(value, lambda t: f"{t.split(chr(10))[0]}\n{PLACEHOLDER_PREFIX} elided]\nlast")
    assert out == {"output": f"{PLACEHOLDER_PREFIX} elided]\nlast", "exitCode": 2}


def test_an_edit_inside_the_other_fields_is_kept_as_fields() -> None:
    value = {"output": "token sk-123", "meta": {"key": "sk-123"}}
    out = _lifted(value, lambda t: t.replace("sk-123", "[redacted]"))
    assert out == {"output": "token [redacted]", "meta": {"key": "[redacted]"}}


def test_a_text_replaced_whole_goes_into_the_text_field() -> None:
    value = {"output": BIG, "exitCode": 0}
    out = _lifted(value, lambda t: "[output dropped]")
    assert out == {"output": "[output dropped]", "exitCode": 0}


def test_without_a_text_field_a_note_is_an_output_field_of_its_own() -> None:
    value = {"files": ["a", "b"], "count": 2}
    assert _lifted(value, lambda t: f"{t}\n\n{NOTE}") == {**value, "output": NOTE}
    edited = _lifted(value, lambda t: t.replace('"a"', '"A"'))
    assert edited == {"files": ["A", "b"], "count": 2}


@pytest.mark.parametrize(
    "value",
    [
        {"output": {"files": ["a"]}},
        {"output": {"a": 1}, "n": 2},
        {"output": ["x"], "note": "y"},
        {"output": 3},
    ],
)
def test_a_note_after_an_output_of_no_text_keeps_the_object(value: dict[str, Any]) -> None:
    """A note appended (the working set, a resolved reference's pointer) to a response whose
    ``output`` is an object: the response stays that object, the note a field of its own."""
    for note in (lambda t: f"{t}\n\n{NOTE}", lambda t: f"{t}\n{NOTE}"):
        out = _lifted(value, note)
        assert {k: v for k, v in out.items() if k in value} == value, out
        (added,) = set(out) - set(value)
        assert out[added] == NOTE


@pytest.mark.parametrize(
    "value",
    [
        {"output": "x"},
        {"output": "", "exitCode": 0},
        {"output": "\nstarts blank", "exitCode": 0},
        {"exitCode": 1, "error": "boom\n\nmore", "output": None},
        {"content": "c", "result": "r", "meta": {"a": [1, 2]}},
    ],
)
def test_a_response_read_back_unchanged_is_itself(value: dict[str, Any]) -> None:
    assert response_value(value, response_text({"response": value})) == value


def test_the_text_field_is_the_first_known_one_with_text() -> None:
    value = {"stdout": "", "stderr": "Traceback\nboom", "exit_code": 1}
    assert _lowered_text(value) == '{"stdout":"","exit_code":1}\n\nTraceback\nboom'
    assert _lowered_text({"stdout": "", "exit_code": 0}) == '{"exit_code":0}\n\n'


async def test_a_loop_note_through_the_engine_keeps_the_fields(engine: Engine) -> None:
    err = "Traceback (most recent call last):\n  File run.py\nModuleNotFoundError: foo"
    contents = [user("run the script")]
    for i in range(4):
        contents.append(model(call(f"c{i}", "python run.py")))
        value = {"output": f"{err}\n[Exit Code: 1]", "exitCode": 1, "meta": {"ms": 5}}
        fr = {"id": f"c{i}", "name": "run_shell_command", "response": value}
        contents.append(user({"functionResponse": fr}))
    b = body(*contents)
    out = await engine.rewrite(b, {}, now=1000.0, adapter=GEMINI, model=MODEL)
    responses = [p["functionResponse"]["response"] for c in out.body["contents"]
                 for p in c["parts"] if "functionResponse" in p]  # fmt: skip
    assert len(responses) == 4
    assert any("<ctxproxy-context>" in r["output"] for r in responses), responses  # a note
    for r in responses:
        assert r["exitCode"] == 1 and r["meta"] == {"ms": 5}, r
        assert r["output"].startswith(("Traceback", PLACEHOLDER_PREFIX)), r


@pytest.mark.parametrize("bad", [-1, 1.5, [[]], {"a": 1}, True])
def test_a_response_id_of_no_string_takes_its_calls(bad: Any) -> None:
    """A function response whose ``id`` is no string answers its call by name, as one with no
    id does: it is forwarded with the call's id (it was forwarded as sent, an id no call has,
    and the integrity check logged the forwarded body as broken)."""
    from proxy.protocols.gemini_checks import pairing_violations

    fr = {"id": bad, "name": "run_shell_command", "response": {"output": "ok"}}
    b = body(user("run it"), model(call("c1", "python run.py")), user({"functionResponse": fr}))
    lowered = GEMINI.lower(b)
    assert any(r["kind"] == "response_id_invalid" for r in lowered.repairs)
    fwd = GEMINI.lift(b, lowered, lowered.messages)
    sent = fwd["contents"][2]["parts"][0]["functionResponse"]
    assert sent == {**fr, "id": "c1"}
    assert pairing_violations(fwd["contents"]) == []
    assert b["contents"][2]["parts"][0]["functionResponse"]["id"] == bad  # the client's as sent
