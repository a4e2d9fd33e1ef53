"""A secret a command prints alone (``op read …``, ``heroku auth:token``, ``cat
secrets/db_password``) is known by the call beside its result, in each protocol's message list;
other calls' one-word results stay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules.redact import REDACTED, redact
from tests.support.cpu_clock import cpu_timer

SECRET = "Zq8vLp2mWx4nR7tY"
READS = [
    "op read op://prod/db/password",
    "vault kv get -field=password secret/db",
    "cat secrets/db_password",
    "cat /run/secrets/postgres_password",
    "aws secretsmanager get-secret-value --secret-id prod/db --query SecretString --output text",
    "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
    "heroku auth:token",
    "echo $DB_PASSWORD",
    "printenv GITHUB_TOKEN",
    "cat /etc/openvpn/auth.txt",
]
PLAIN = ["git rev-parse HEAD", "cat VERSION", "cat /etc/passwd", "cat src/auth.py", "pwd"]


def chat(command: str, output: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
    return {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]}  # fmt: skip


def messages(command: str, output: str) -> dict[str, Any]:
    return {"messages": [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": command}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": output}]},
    ]}  # fmt: skip


def responses(command: str, output: str) -> dict[str, Any]:
    return {"input": [
        {"type": "function_call", "call_id": "k1", "name": "exec_command",
         "arguments": json.dumps({"cmd": command})},
        {"type": "function_call_output", "call_id": "k1",
         "output": "Chunk ID: bbe59e\nWall time: 0.1 seconds\nProcess exited with code 0\n"
                   f"Original token count: 5\nOutput:\n{output}"},
    ]}  # fmt: skip


def gemini(command: str, output: str) -> dict[str, Any]:
    return {"contents": [
        {"role": "model", "parts": [
            {"functionCall": {"name": "run_shell_command", "args": {"command": command}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "run_shell_command", "response": {"output": output}}}]},
    ]}  # fmt: skip


FORMS = [chat, messages, responses, gemini]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("command", READS)
def test_a_secret_printed_alone_goes(form: Any, command: str) -> None:
    body = form(command, f"{SECRET}\n")
    out = json.dumps(redact(body))
    assert SECRET not in out
    assert REDACTED in out
    assert redact(redact(body)) == redact(body)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("command", PLAIN)
def test_another_calls_word_stays(form: Any, command: str) -> None:
    word = "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
    body = form(command, f"{word}\n")
    assert word in json.dumps(redact(body))


def test_a_reads_error_and_header_stay() -> None:
    error = '[ERROR] 2026/12/07 "prod" isn\'t a vault in this account'
    body = responses("op read op://prod/db/password", error)
    out = json.dumps(redact(body))
    assert "Process exited with code 0" in out and "isn't a vault in this account" in out


def test_a_read_tools_secret_file_goes() -> None:
    body = messages("", f"     1\u2192{SECRET}\n")
    body["messages"][0]["content"][0]["input"] = {"file_path": "/srv/app/secrets/api_token"}
    assert SECRET not in json.dumps(redact(body))


@pytest.mark.parametrize("word", ["cat a/", "kubectl ", "echo $", "file_path: '", "op "])
def test_calls_are_read_in_linear_time(word: str) -> None:
    command = word * (4096 // len(word))
    body = {"messages": [m for i in range(64) for m in chat(command, "x")["messages"]]}
    with cpu_timer() as took:
        redact(body)
    assert took.seconds < 0.25, f"{took.seconds:.3f} s"


@pytest.mark.parametrize("missing", ["messages", "responses", "gemini"])
def test_a_result_without_its_output_field_is_redacted_whole(missing: str) -> None:
    """A result may carry no output field (Anthropic's tool_result without content): it was read
    as there, and redaction raised (a captured body's 500 on every retry)."""
    body = {"messages": messages, "responses": responses, "gemini": gemini}[missing](
        "cat secrets/db_password", SECRET
    )
    items = body.get("messages") or body.get("input") or body["contents"]
    result = items[1]
    holder = result["content"][0] if missing == "messages" else result
    if missing == "gemini":
        holder = result["parts"][0]["functionResponse"]
    holder.pop({"messages": "content", "responses": "output", "gemini": "response"}[missing])
    assert redact(body) is not None


def test_a_folder_given_to_a_search_tool_is_no_secret_read() -> None:
    """Glob's ``path`` names a folder: a listing of ``credentials/`` had every line redacted."""
    listing = "/repo/app/credentials/__init__.py\n/repo/app/credentials/store.py"
    body = {"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "g1", "name": "Glob",
            "input": {"pattern": "**/*.py", "path": "/repo/app/credentials"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "g1", "content": listing}]},
    ]}  # fmt: skip
    assert redact(body)["messages"][1]["content"][0]["content"] == listing


def test_a_listing_beside_a_secret_read_keeps_its_lines() -> None:
    """The secret read in ``$(…)`` and a listing printed after it: every package and hash went."""
    listing = "Django==4.2\nrequests==2.31\nurllib3==2.0.7\nabc1234\ndef5678\n0a1b2c3"
    command = "export TOKEN=$(cat secrets/token); pip list --format=freeze | head -3; git log -3"
    out = redact(chat(command, listing))["messages"][1]["content"]
    assert out == listing
    # one secret printed alone still goes
    assert SECRET not in redact(chat("cat secrets/token", SECRET + "\n"))["messages"][1]["content"]
