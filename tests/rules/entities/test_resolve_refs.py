"""resolve_refs: detection in four languages, resolution by type/action/recency, abstention,
ancestors, and the rule's contract (never edits messages)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rules.base import Ancestor, SessionState
from rules.entities import resolve_refs
from rules.entities.ref_detect import detect, load_lexicons
from rules.messages import INJECT_CLOSE, INJECT_OPEN
from tests.support.factories import apply_rules, assistant, call, ctx, result, shell, system, user

CFG = resolve_refs.Config()
LANGS = ("en", "zh", "ko", "ja")

# (text, expected first mention as (type, action, recency, kind)), None = no mention
DETECT = [
    ("delete the folder I just created", ("folder", "create", True, "described")),
    ("open that file", ("file", None, False, "demonstrative")),
    ("please remove it", (None, None, False, "pronoun_op")),
    ("restore the one you just deleted", (None, "delete", True, "action_only")),
    ("show me the last file", ("file", None, True, "recent")),
    ("rename the new folder to x", ("folder", None, True, "recent")),
    ("zip the directory we just made", ("folder", "create", True, "described")),
    ("undo the file you edited", ("file", "modify", False, "described")),
    ("删除刚创建的文件夹", ("folder", "create", True, "described")),
    ("打开那个文件", ("file", None, False, "demonstrative")),
    ("删除它", (None, None, False, "pronoun_op")),
    ("你刚才删除的那个文件恢复一下", ("file", "delete", True, "described")),
    ("刚才那个目录在哪", ("folder", None, True, "recent")),
    ("방금 만든 폴더 삭제해줘", ("folder", "create", True, "described")),
    ("그 파일 열어줘", ("file", None, False, "demonstrative")),
    ("그것을 삭제해", (None, None, False, "pronoun_op")),
    ("아까 지운 파일 복원해", ("file", "delete", True, "described")),
    ("さっき作ったフォルダを削除して", ("folder", "create", True, "described")),
    ("そのファイルを開いて", ("file", None, False, "demonstrative")),
    ("それを削除して", (None, None, False, "pronoun_op")),
    ("先ほど編集したファイルを見せて", ("file", "modify", True, "described")),
    ("fix the bug in utils.py", None),
    # "new" introducing a thing to be created is no recency: a create verb before it, a name after
    ("Now write the new file utils.py with the helpers", None),
    ("create the new folder for the assets", None),
    ("add the new script run.sh", None),
    ("put the helpers in the new file `helpers.py`", None),
    ("make the new directory called assets", None),
    ("delete the new file", ("file", None, True, "recent")),
    ("move the new folder into src", ("folder", None, True, "recent")),
    ("add a test for the parser", None),
    # "that" before a name ("library.py") is a conjunction, and the noun a name's start
    ("it looks to me that library.py is having uncommitted changes", None),
    ("I think that config/settings.py is stale", None),
    # the file "that file" stands for is named just before it, in the user's own words
    ("read the docs in apple_books.md: he described the UI based on them in that file", None),
    ("用中文回答", None),
    ("테스트를 실행해", None),
    ("テストを実行して", None),
]


@pytest.mark.parametrize(("text", "expected"), DETECT, ids=[t for t, _ in DETECT])
def test_detection(text: str, expected: tuple[Any, ...] | None) -> None:
    kinds, lexicons = load_lexicons()
    found = [m for m in detect(text, kinds, lexicons, LANGS) if m.kind != "pronoun"]
    if expected is None:
        assert found == []
    else:
        m = found[0]
        assert (m.type, m.action, m.recency, m.kind) == expected


def test_injected_blocks_are_not_read_as_user_text() -> None:
    kinds, lexicons = load_lexicons()
    text = f'thanks\n\n{INJECT_OPEN}\nResolved references:\n- "that file" means …\n{INJECT_CLOSE}'
    assert detect(text, kinds, lexicons, LANGS) == []


def ev(
    path: str, typ: str, action: str, seq: int, cid: str | None = None, seen: float = 1000.0
) -> dict[str, Any]:
    return {
        "type": typ,
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "action": action,
        "first_seen": seen,
        "call_id": cid or f"c{seq}",
        "seq": seq,
        "tool": "bash",
    }


def run(
    text: str,
    events: list[dict[str, Any]],
    now: float = 1010.0,
    ancestors: tuple[Ancestor, ...] = (),
    messages: list[dict[str, Any]] | None = None,
    cfg: resolve_refs.Config = CFG,
):  # type: ignore[no-untyped-def]
    msgs = messages or [user("start"), assistant("ok"), user(text)]
    context = ctx(
        msgs,
        now=now,
        session_id="me",
        state=SessionState({"entities": events}),
        ancestors=ancestors,
    )
    return track_result(resolve_refs.apply(context, cfg), msgs)


def track_result(res, msgs):  # type: ignore[no-untyped-def]
    assert res.messages is msgs  # resolve_refs never edits messages
    return res


FOLDER = ev("~/Desktop/123", "folder", "create", 1)
FILE_A = ev("/w/a.py", "file", "create", 2)
FILE_B = ev("/w/b.py", "file", "modify", 3)
GONE = ev("/w/old", "folder", "delete", 4)

MADE = [ev(f"/w/{n}.py", "file", "create", k, seen=1000.0 + k) for k, n in
        enumerate(["alpha", "beta", "gamma"], 1)]  # fmt: skip

# (text, events, expected path or abstention reason)
RESOLVE = [
    ("删除刚创建的文件夹", [FOLDER], "~/Desktop/123"),
    ("delete the folder I just created", [FOLDER, FILE_A], "~/Desktop/123"),
    ("방금 만든 폴더 삭제해줘", [FOLDER, FILE_A], "~/Desktop/123"),
    ("さっき作ったフォルダを削除して", [FOLDER, FILE_A], "~/Desktop/123"),
    ("open the file I just created", [FILE_A, FILE_B], "/w/a.py"),
    ("open that file", [FILE_A], "/w/a.py"),
    ("打开那个文件", [FILE_A, FILE_B], "/w/b.py"),  # newest, two candidates: 0.7
    ("그 파일 열어줘", [FILE_A], "/w/a.py"),
    ("そのファイルを開いて", [FILE_A], "/w/a.py"),
    ("restore the one you just deleted", [FOLDER, GONE], "/w/old"),
    ("delete it", [FILE_A], "/w/a.py"),
    ("delete it", [FOLDER, FILE_A], "low_confidence"),  # 0.65 - 0.1: two things it could be
    ("删除它", [FOLDER, GONE], "~/Desktop/123"),  # a deleted folder cannot be deleted again
    (
        "the folder I just created",
        [ev("/w/x", "folder", "create", 1, "same"), ev("/w/y", "folder", "create", 2, "same")],
        "ambiguous",
    ),
    ("open that file", [ev(f"/w/{i}.py", "file", "create", i) for i in range(5)], "low_confidence"),
    ("delete the folder I just created", [], "no_candidate"),
    ("delete the folder I just created", [FILE_A], "no_candidate"),
    (
        "delete the folder I just created",
        [ev("/w/x", "folder", "create", 1, seen=1010.0 - 3601)],
        "no_candidate",
    ),  # older than the TTL
    # a place among the things made: in the order they were made, never the newest instead
    ("delete the first file you created", MADE, "/w/alpha.py"),
    ("delete the second file you created", MADE, "/w/beta.py"),
    ("open the 2nd file you wrote", MADE, "/w/beta.py"),
    ("remove the third file you just created", MADE, "/w/gamma.py"),
    ("delete the fourth file you created", MADE, "no_candidate"),
]


@pytest.mark.parametrize(
    ("text", "events", "expected"), RESOLVE, ids=[f"{i}-{r[0]}" for i, r in enumerate(RESOLVE)]
)
def test_resolution(text: str, events: list[dict[str, Any]], expected: str) -> None:
    refs = run(text, events).report["references"]
    ref = refs[0]
    if expected in ("ambiguous", "low_confidence", "no_candidate"):
        assert ref["entity"] is None and ref["abstained"] == expected
        assert ref["confidence"] < CFG.threshold or expected != "low_confidence"
    else:
        assert ref["entity"]["path"] == expected
        assert ref["confidence"] >= CFG.threshold
        assert set(ref["entity"]) == {"type", "name", "path", "action"}
        assert ref["chain"][-1]["session"] == "me"


@pytest.mark.parametrize("text", ["run the tests please", "is it possible?", "用中文回答"])
def test_no_reference_no_report(text: str) -> None:
    res = run(text, [FOLDER])  # a bare "it" (0.45) could never pass the threshold: not reported
    assert "references" not in res.report


def test_entities_from_calls_after_the_message_are_not_candidates() -> None:
    msgs = [
        user("delete the folder I just created"),
        assistant(None, shell("later", "mkdir other")),
    ]
    events = [FOLDER, ev("/w/other", "folder", "create", 2, "later")]
    ref = run("", events, messages=msgs).report["references"][0]
    assert ref["entity"]["path"] == "~/Desktop/123"


def test_ancestors_resolve_with_chain() -> None:
    parent = Ancestor("parent", SessionState({"entities": [FOLDER]}), 1)
    grand = Ancestor("grand", SessionState({"entities": [FILE_A]}), 2)
    ref = run("open that file", [], ancestors=(parent, grand)).report["references"][0]
    assert ref["entity"]["path"] == "/w/a.py"
    assert [c["session"] for c in ref["chain"]] == ["me", "parent", "grand"]
    assert ref["confidence"] == pytest.approx(0.8 - 2 * CFG.ancestor_penalty)
    own_first = run("open that file", [FILE_B], ancestors=(grand,)).report["references"][0]
    assert own_first["entity"]["path"] == "/w/b.py" and len(own_first["chain"]) == 1


def test_ancestors_can_be_limited_or_off() -> None:
    far = Ancestor("far", SessionState({"entities": [FILE_A]}), 3)
    cfg = resolve_refs.Config(max_ancestor_depth=2)
    assert (
        run("open that file", [], ancestors=(far,), cfg=cfg).report["references"][0]["abstained"]
        == "no_candidate"
    )
    off = resolve_refs.Config(use_ancestors=False)
    assert (
        run("open that file", [], ancestors=(far,), cfg=off).report["references"][0]["abstained"]
        == "no_candidate"
    )


def test_threshold_is_configurable() -> None:
    grand = Ancestor("grand", SessionState({"entities": [FOLDER]}), 2)
    text = "delete the folder I just created"
    assert run(text, [], ancestors=(grand,)).report["references"][0]["entity"] is not None
    strict = resolve_refs.Config(threshold=0.9)  # 0.95 - 2 x 0.05 < 0.9
    ref = run(text, [], ancestors=(grand,), cfg=strict).report["references"][0]
    assert ref["abstained"] == "low_confidence"
    assert "references" not in run("open that file", [FILE_A], cfg=strict).report  # 0.8 < 0.9


def test_deterministic() -> None:
    a = run("删除刚创建的文件夹", [FOLDER, FILE_A]).report
    b = run("删除刚创建的文件夹", [FOLDER, FILE_A]).report
    assert a == b


def test_packs_load_when_the_config_is_validated_not_per_request() -> None:
    load_lexicons.cache_clear()
    resolve_refs.Config()
    assert load_lexicons.cache_info().currsize == 1


TWINS = [ev("/w/x", "folder", "create", 1, "same"), ev("/w/y", "folder", "create", 2, "same")]


@pytest.mark.parametrize(
    ("pick", "expected"),
    [
        ({"path": "/w/y", "confidence": 0.9, "model": "m"}, "/w/y"),
        ({"path": "/w/x", "confidence": 0.7, "model": "m"}, "/w/x"),
        ({"path": "/etc", "confidence": 0.99, "model": "m"}, None),  # not a candidate
        ({"path": "/w/y", "confidence": 0.3, "model": "m"}, None),  # below the threshold
        ({"path": "/w/y", "model": "m"}, None),  # no confidence
    ],
)
def test_resolver_hints_settle_abstentions(pick: dict[str, Any], expected: str | None) -> None:
    msgs = [user("start"), assistant("ok"), user("delete the folder I just created")]
    context = ctx(
        msgs,
        now=1010.0,
        session_id="me",
        state=SessionState({"entities": TWINS}),
        hints={"resolver": {"the folder I just created": pick}},
    )
    (ref,) = resolve_refs.apply(context, CFG).report["references"]
    if expected is None:
        assert ref["entity"] is None and ref["abstained"] == "ambiguous"
        assert sorted(ref["candidates"]) == ["/w/x", "/w/y"]
    else:
        assert ref["entity"]["path"] == expected
        assert ref["resolved_by"] == "resolver_model"
        assert ref["chain"][-1]["resolver"] == "m"
        assert "abstained" not in ref


def test_text_the_proxy_wrote_is_not_scanned_as_the_users_message() -> None:
    orphan = user("[ctxproxy: tool result for call c9 had no matching call] open that file")
    msgs = [user("delete the folder I just created"), assistant("ok"), orphan]
    (ref,) = run("", [FOLDER, FILE_A], messages=msgs).report["references"]
    assert ref["mention"] == "the folder I just created"
    assert ref["entity"]["path"] == "~/Desktop/123"


def test_a_file_to_be_created_is_not_resolved_to_an_old_one() -> None:
    res = run("Now write the new file utils.py with the helpers", [FILE_A])
    assert "references" not in res.report


def test_a_compactions_summary_is_not_the_users_question() -> None:
    """Claude Code's summary after its own compaction retells what the session said ("delete
    the folder I just created" among it): it is the harness's turn, not a question now."""
    summary = (
        "This session is being continued from a previous conversation that ran out of context. "
        "The user asked: delete the folder I just created"
    )
    res = run(summary, [FOLDER])
    assert res.report.get("references", []) == []


@pytest.mark.parametrize(
    "text",
    [
        "delete the folder I just created and the file I made",
        "remove the file I added, then the folder we just created",
    ],
)
def test_two_of_the_speakers_mentions_both_resolve(text: str) -> None:
    """Each mention's own "I made" is no word of the user's making something themselves: read
    outside one mention, the other's gave up on both (``user_made``)."""
    refs = run(text, [FOLDER, FILE_A]).report["references"]
    assert {r["entity"]["path"] for r in refs if r.get("entity")} == {"~/Desktop/123", "/w/a.py"}
    assert not any(r.get("abstained") for r in refs)
    # the user's own making still reads as theirs
    mine = run("I made a folder myself; delete the folder I just created", [FOLDER])
    assert mine.report["references"][0]["abstained"] == "user_made"


@pytest.mark.parametrize(
    ("text", "mine"),
    [
        ("我在桌面上新建了一个文件夹，把图片移到我刚创建的文件夹里", True),
        ("把图片移到我刚创建的文件夹里", False),
        ("デスクトップにフォルダを作りました。私がさっき作ったフォルダに画像を移して", True),
        ("私がさっき作ったフォルダに画像を移して", False),
        ("Creé una carpeta en el escritorio. Mueve la imagen a la carpeta que acabo de crear.",
         True),
        ("Mueve la imagen a la carpeta que acabo de crear.", False),
        ("Creé una carpeta en el escritorio. Mueve la imagen a la carpeta que acabas de crear.",
         False),  # "acabas": the agent's
        ("Ich habe auf dem Desktop einen Ordner angelegt. Verschieb das Bild in den Ordner, den "
         "ich gerade erstellt habe.", True),
        ("Verschieb das Bild in den Ordner, den ich gerade erstellt habe.", False),
        ("J'ai créé un dossier sur le bureau. Déplace l'image dans le dossier que je viens de "
         "créer.", True),
        ("Déplace l'image dans le dossier que je viens de créer.", False),
    ],
)  # fmt: skip
def test_the_users_own_making_is_read_in_their_language(text: str, mine: bool) -> None:
    """ "I made a folder on my Desktop … the folder I just created" is the user's folder, not the
    agent's newest: read in English only, the other languages got the agent's folder at 0.95."""
    (ref,) = run(text, [FOLDER]).report["references"]
    assert (ref.get("abstained") == "user_made") is mine, ref
    if not mine:
        assert ref["entity"]["path"] == "~/Desktop/123"


@pytest.mark.parametrize(
    ("text", "events", "expected"),
    [
        ("run the test file you just created", [ev("/w/src/util.py", "file", "create", 1)],
         "no_candidate"),  # no file made is a test: it named util.py at 0.95
        ("run the test file you just created",
         [ev("/w/tests/test_util.py", "file", "create", 1),
          ev("/w/src/util.py", "file", "create", 2)],
         "/w/tests/test_util.py"),
        ("open the temp file you just created", [ev("/w/out.txt", "file", "create", 1)],
         "/w/out.txt"),  # "temp" describes, it names no kind
    ],
)  # fmt: skip
def test_a_test_file_is_one_whose_name_says_so(
    text: str, events: list[dict[str, Any]], expected: str
) -> None:
    (ref,) = run(text, events).report["references"]
    assert ref.get("abstained", (ref.get("entity") or {}).get("path")) == expected, ref


def test_an_issues_pointer_says_its_number() -> None:
    """A tracker's issue is closed by its number (GitHub's #42), not by its internal id: the
    pointer said only "id 99123", and an agent closing issue 99123 hit another issue or a 404."""
    from rules.entities import track_entities

    answer = {"id": 99123, "number": 42, "title": "Login broken", "state": "open"}
    msgs = [system(), user("go"),
            assistant(None, call("c0", "mcp__github__create_issue", repo="w", title="Login")),
            result("c0", orjson.dumps(answer).decode()), assistant("Done."),
            user("close the issue you just opened")]  # fmt: skip
    report = apply_rules(
        ctx(msgs, now=1000.0, session_id="s"),
        (track_entities, track_entities.Config()),
        (resolve_refs, CFG),
    ).report
    (ref,) = report["references"]
    assert "number 42" in ref["entity"]["description"], ref


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("delete it", "/w/new"),  # the thing made a moment ago, not one among the hour's
        ("open that folder", "/w/new"),
        ("delete the folder you created", "/w/new"),  # a verb of making: the newest, as always
    ],
)
def test_a_crowded_mention_reads_the_near_past(text: str, expected: str) -> None:
    """An hour's memory gave "that commit" seven candidates and a confidence of 0.2 where the
    one made 7 s before was meant: a mention each candidate lowers reads ``near_seconds``."""
    old = [ev(f"/w/old{i}", "folder", "create", i, seen=1010.0 - 1800 + i) for i in range(6)]
    events = [*old, ev("/w/new", "folder", "create", 9, seen=1003.0)]
    (ref,) = run(text, events).report["references"]
    assert (ref.get("entity") or {}).get("path") == expected, ref
    assert ref["confidence"] >= CFG.threshold
