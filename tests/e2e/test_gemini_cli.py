"""Tier 3, a real agent: Gemini CLI 0.61.0 (``gemini -p --yolo``) → a live proxy → a scripted
Gemini upstream that enforces the pairing rule as the real API does. The model asks for
``run_shell_command`` ``mkdir``, the CLI runs it (the folder really exists), then
``gemini -p "now delete the folder you just made" --resume latest`` reaches the upstream
repaired (the CLI restores the tool's response twice on resume: one call, two responses, which
the real API refuses) with the folder's path named in a ``<ctxproxy-context>`` block, and the CLI
deletes it.

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

import re

import httpx
import orjson

from tests.support.agent_clis import GEMINI_KEY, Gemini
from tests.support.agent_proxy import completed_rows, injected_block
from tests.support.gemini_upstream import PAIRING_MESSAGE, Seen, shell_then_text

MAKE = "make a folder for the build output"
DELETE = "now delete the folder you just made"


def _responses(seen: Seen) -> list[dict]:  # type: ignore[type-arg]
    return [
        p["functionResponse"]
        for c in seen.json["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]


def _calls(seen: Seen) -> list[dict]:  # type: ignore[type-arg]
    return [p for c in seen.json["contents"] for p in c["parts"] if "functionCall" in p]


def _last_user_text(seen: Seen) -> str:
    last = seen.json["contents"][-1]
    return "\n".join(p.get("text", "") for p in last["parts"])


def _ok(run, answer: str) -> None:  # type: ignore[no-untyped-def]
    assert run.returncode == 0, run.explain()
    assert orjson.loads(run.stdout)["response"].strip().endswith(answer), run.explain()


def test_resumed_session_breaks_the_pairing_rule_without_the_proxy(gemini_upstream, tmp_path):  # type: ignore[no-untyped-def]
    """The CLI alone against the strict fake: the first prompt works, the resumed one is refused
    (one call, its response restored twice) and the folder stays."""
    target = tmp_path / "work" / "direct_folder"
    gemini_upstream.responder = shell_then_text(lambda _: f"mkdir -p {target}", "Created.")
    cli = Gemini(gemini_upstream.url, tmp_path / "home", tmp_path / "work")
    _ok(cli.run(MAKE), "Created.")
    assert target.is_dir()
    gemini_upstream.reset()
    gemini_upstream.responder = shell_then_text(lambda _: f"rmdir {target}", "Deleted.")
    run = cli.run(DELETE, "--resume", "latest")
    assert run.returncode != 0, run.explain()
    assert PAIRING_MESSAGE[:40] in run.stdout + run.stderr, run.explain()
    assert target.is_dir()
    resumed = gemini_upstream.requests[0]
    ids = [r.get("id") for r in _responses(resumed)]
    assert len(ids) == 2 and ids[0] == ids[1], ids  # the restored response, doubled


def test_gemini_cli_through_ctxproxy_then_resume(gemini_proxy, gemini_upstream, tmp_path):  # type: ignore[no-untyped-def]
    proxy = gemini_proxy()
    target = tmp_path / "work" / "build_output"
    cli = Gemini(proxy.url, tmp_path / "home", tmp_path / "work")

    # Turn 1: the classifier, then the tool round trip; run_shell_command mkdir runs for real.
    gemini_upstream.responder = shell_then_text(lambda _: f"mkdir -p {target}", "Created.")
    _ok(cli.run(MAKE), "Created.")
    assert target.is_dir(), "run_shell_command did not run"
    first, second = gemini_upstream.main_calls()
    for seen in gemini_upstream.requests:
        assert seen.header("x-goog-api-key") == GEMINI_KEY
        assert seen.query in ("", "alt=sse")
    (call,) = _calls(second)
    (response,) = _responses(second)
    assert call["functionCall"]["id"] == response["id"]
    # the model's signature comes back byte-identical within the live tool loop
    assert call["thoughtSignature"].startswith("CiQBfakeSig")
    # the stable 46 KB prefix goes as the CLI sent it
    assert first.json["systemInstruction"] == second.json["systemInstruction"]
    assert first.json["tools"] == second.json["tools"]
    rows = completed_rows(proxy, len(gemini_upstream.requests))
    assert {r["protocol"] for r in rows} == {"gemini"}
    assert all(r["status"] == 200 for r in rows)
    main_rows = [r for r in rows if r["path"].endswith(":streamGenerateContent")]
    assert main_rows[0]["session_id"] == main_rows[1]["session_id"]
    assert main_rows[1]["prompt_tokens"] == 40 and main_rows[1]["cached_tokens"] == 24
    assert main_rows[1]["completion_tokens"] == 7  # from the relayed SSE's usageMetadata
    goal = main_rows[1]["report"]["working_set"]["goal"]
    assert goal == MAKE, goal  # the prompt, not the CLI's <session_context> preamble
    # the CLI writes compact JSON: its second body is read from the first one's
    metrics = httpx.get(proxy.url + "/metrics").text
    reused = re.search(r'ctxproxy_bodies_reused_total\{protocol="gemini"\} (\S+)', metrics)
    assert reused is not None and float(reused.group(1)) >= 1, metrics

    # Turn 2: resumed; the doubled response is repaired, the folder is named upstream.
    gemini_upstream.reset()
    gemini_upstream.responder = shell_then_text(lambda _: f"rmdir {target}", "Deleted.")
    _ok(cli.run(DELETE, "--resume", "latest"), "Deleted.")
    assert not target.exists(), "the resumed session did not run rmdir"
    resumed = gemini_upstream.main_calls()[0]
    ids = [r.get("id") for r in _responses(resumed)]
    assert len(ids) == len(set(ids)) == len(_calls(resumed)) >= 1, ids
    text = _last_user_text(resumed)
    assert DELETE in text
    assert str(target) in injected_block(text)
    for seen in gemini_upstream.classifier_calls():  # the side call carries the history too
        assert len(_responses(seen)) == len(_calls(seen))

    before = len(rows)
    rows = completed_rows(proxy, before + len(gemini_upstream.requests))
    assert all(r["status"] == 200 for r in rows)
    later = rows[before:]
    main_resumed = [r for r in later if r["path"].endswith(":streamGenerateContent")]
    assert main_resumed[0]["session_id"] == main_rows[0]["session_id"]  # one proxy session
    assert "lineage" not in main_resumed[0]["report"]  # its state goes on: the same branch
    repairs = main_resumed[0]["report"]["repairs"]
    assert any(r["kind"] == "duplicate_result" for r in repairs), repairs
    assert main_resumed[0]["report"]["working_set"]["goal"] == MAKE
    side = [r for r in later if r["path"].endswith(":generateContent")]
    assert side and any(r["kind"] == "duplicate_result" for r in side[0]["report"]["repairs"])
