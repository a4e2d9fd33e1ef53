"""resolve_refs with its session memos carried from request to request answers exactly what it
answers with nothing kept, over random sessions: tool loops near and far from the question (chat
loops of hundreds of calls), new questions, questions resent as other objects or edited in
place, results sent as user messages, compactions, entities made after the question (the sorts
present change under it), options changed and a parent session coming and going."""

from __future__ import annotations

import random
from typing import Any

import pytest

from rules.base import Ancestor, Message, SessionState
from rules.entities import cache as entity_cache
from rules.entities import ref_memo, resolve_refs, track_entities
from rules.messages import PLACEHOLDER_PREFIX
from tests.support.factories import assistant, ctx, result, shell, user

TRACK = track_entities.Config()
CONFIGS = [resolve_refs.Config(), resolve_refs.Config(threshold=0.3), resolve_refs.Config()]
QUESTIONS = [
    "revert that commit",
    "push the branch you just made",
    "delete the folder you just created",
    "ok keep going",
    "删除刚创建的文件夹",
    "방금 만든 브랜치를 푸시해",
    "open it",
    "stop the dev server",
    "push it",  # found only once a branch or commit is in reach (the sorts present)
    "revert it",
    "merge it into main",
    "fix it",  # found only below the default threshold
    "ok keep going",  # most messages of a session name nothing
    "looks good, run the tests again",
    "继续",
    "계속해 주세요",
    "続けてください",
]


def _command(rng: random.Random, n: int) -> tuple[str, str]:
    """A shell call and its output: some make entities (a folder, a branch, a commit)."""
    if rng.random() < 0.7:
        return rng.choice([("npm test", "Tests: 4 passed"), ("ls", "a.py b.py")])
    return rng.choice(
        [
            (f"mkdir -p /w/dir{n}", ""),
            (f"git switch -c feat/b{n}", f"Switched to a new branch 'feat/b{n}'"),
            (f'git commit -am "step {n}"', f"[main {n:07x}] step {n}\n 1 file changed"),
        ]
    )


def _parent() -> Ancestor:
    messages = [
        user("start"),
        assistant(None, shell("p1", 'git commit -am "lead"')),
        result("p1", "[main abcdef1] lead\n 1 file changed"),
        assistant(None, shell("p2", "git switch -c feat/lead")),
        result("p2", "Switched to a new branch 'feat/lead'"),
    ]
    tracked = track_entities.apply(ctx(messages, now=900.0, session_id="lead"), TRACK)
    return Ancestor("lead", tracked.state, 1)


def _step(rng: random.Random, history: list[Message], n: int) -> list[Message]:
    """The session's next list: mostly its tool loop's next request (the same objects)."""
    op = rng.random()
    if op < 0.62:  # a call and its result
        command, output = _command(rng, n)
        return [*history, assistant(None, shell(f"c{n}", command)), result(f"c{n}", output)]
    if op < 0.7:  # a run of calls: the question falls far behind (a chat tool loop)
        steps = []
        for k in range(rng.randint(20, 70)):
            command, output = _command(rng, n * 100 + k)
            steps += [assistant(None, shell(f"c{n}_{k}", command)), result(f"c{n}_{k}", output)]
        return [*history, *steps]
    if op < 0.8:
        return [*history, user(rng.choice(QUESTIONS))]
    if op < 0.84:  # a result sent as a user message (the proxy's placeholder)
        return [*history, user(f"{PLACEHOLDER_PREFIX} result {n}]")]
    users = [i for i, m in enumerate(history) if m["role"] == "user"]
    if op < 0.9 and users:  # the latest question resent as a new object: equal, or another text
        i = users[-1]
        text = history[i]["content"] if rng.random() < 0.5 else rng.choice(QUESTIONS)
        return [*history[:i], user(text), *history[i + 1 :]]
    if op < 0.95 and len(history) > 8:  # a compaction: the oldest dropped
        return [history[0], *history[rng.randrange(2, len(history) - 2) :]]
    return list(history)  # the same objects resent


@pytest.mark.parametrize("seed", range(8))
def test_carried_memos_answer_what_nothing_kept_answers(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    parent = _parent()
    shortcuts: list[bool] = []
    real = ref_memo.nothing_asked_again

    def counted(*args: Any) -> bool:
        shortcuts.append(real(*args))
        return shortcuts[-1]

    monkeypatch.setattr(ref_memo, "nothing_asked_again", counted)
    history: list[Message] = [user(rng.choice(QUESTIONS))]
    state, memo, now = SessionState(), {}, 1000.0
    cfg, ancestors = CONFIGS[0], ()
    reported = resolved = 0
    for n in range(260):
        history = _step(rng, history, n)
        now += 5.0
        if rng.random() < 0.05:
            cfg = rng.choice(CONFIGS)  # other options (or equal ones, another object)
        if rng.random() < 0.05:
            ancestors = () if ancestors else (parent,)
        tracked = track_entities.apply(
            ctx(history, now=now, session_id="me", state=state, memo=memo), TRACK
        )
        fields = {"now": now, "session_id": "me", "state": tracked.state, "ancestors": ancestors}
        kept = resolve_refs.apply(ctx(history, memo=memo, **fields), cfg)
        fresh = resolve_refs.apply(ctx(history, memo={}, **fields), cfg)
        assert kept.report == fresh.report, n
        assert kept.state.data == fresh.state.data, n
        state = kept.state
        refs = kept.report.get("references") or []
        reported += bool(refs)
        resolved += any(r.get("entity") for r in refs)
    # the probe reached both ways: answered at once, and worked out (found, resolved)
    assert sum(shortcuts) > 10 and reported > 20 and resolved > 10


class Session:
    """One session's requests, its memos carried; each answer checked against nothing kept."""

    def __init__(self, question: str) -> None:
        self.history: list[Message] = [user("start"), user(question)]
        self.state, self.memo, self.now = SessionState(), {}, 1000.0

    def request(
        self, cfg: resolve_refs.Config, ancestors: tuple[Ancestor, ...] = (), command: str = "ls"
    ) -> list[Any]:
        n = len(self.history)
        output = f"Switched to a new branch '{command.split()[-1]}'" if "switch" in command else ""
        self.history = [
            *self.history,
            assistant(None, shell(f"c{n}", command)),
            result(f"c{n}", output),
        ]
        self.now += 5.0
        tracked = track_entities.apply(
            ctx(self.history, now=self.now, session_id="me", state=self.state, memo=self.memo),
            TRACK,
        )
        fields = {"now": self.now, "session_id": "me", "state": tracked.state}
        kept = resolve_refs.apply(
            ctx(self.history, memo=self.memo, ancestors=ancestors, **fields), cfg
        )
        fresh = resolve_refs.apply(ctx(self.history, memo={}, ancestors=ancestors, **fields), cfg)
        assert kept.report == fresh.report
        self.state = kept.state
        refs: list[Any] = kept.report.get("references") or []
        return refs


def test_other_options_read_the_question_again() -> None:
    """ "fix it" names nothing at the default threshold; below it, it is a mention."""
    session = Session("fix it")
    assert session.request(CONFIGS[0]) == session.request(CONFIGS[0]) == []
    refs = session.request(resolve_refs.Config(threshold=0.3))
    assert [r["mention"] for r in refs] == ["it"]


def test_a_parent_in_reach_reads_the_question_again() -> None:
    """ "push it" names nothing while no branch is in reach; the lead's branch is."""
    session = Session("push it")
    assert session.request(CONFIGS[0]) == session.request(CONFIGS[0]) == []
    refs = session.request(CONFIGS[0], ancestors=(_parent(),))
    assert refs and "branch:feat/lead" in refs[0]["candidates"]  # the lead's, weighed


def test_sorts_made_under_the_question_read_it_again() -> None:
    """A branch made after "push it" was asked: the question is read again for the patterns that
    need one (and the branch, made after it, is no candidate)."""
    session = Session("push it")
    assert session.request(CONFIGS[0]) == []
    refs = session.request(CONFIGS[0], command="git switch -c feat/late")
    assert refs and not refs[0].get("entity")


def test_a_new_summary_of_the_same_sorts_is_kept_with_the_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shortcut compares summaries by identity: a new one (here equal, as a restored state
    would hold) is kept with the question once worked out, so the loop's next request takes the
    shortcut again."""
    taken: list[bool] = []
    real = ref_memo.nothing_asked_again
    monkeypatch.setattr(
        ref_memo, "nothing_asked_again", lambda *a: taken.append(real(*a)) or taken[-1]
    )
    session = Session("ok keep going")
    session.request(CONFIGS[0], command="git switch -c feat/x")
    session.request(CONFIGS[0])
    assert taken[::2] == [False, True]  # (each request is also worked out with nothing kept)
    summary = session.state.get(entity_cache.SUMMARY)
    session.state = session.state.with_value(entity_cache.SUMMARY, dict(summary))
    session.request(CONFIGS[0])
    session.request(CONFIGS[0])
    assert taken[::2] == [False, True, False, True]
