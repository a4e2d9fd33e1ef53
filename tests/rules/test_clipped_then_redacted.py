"""What the rules write in short (a placeholder's command, a dropped run's names, a loop note's
quote, a shrunk argument's head, an error's echo) is redacted before it is cut: cut first, a
secret lost the context the redactor knows it by (a URL's ``@``, a password's key), and the
stored or relayed copy kept it whole or nearly so."""

from __future__ import annotations

import json
from typing import Any

from proxy.protocols.body import echo, echo_id
from proxy.store.redact_state import redact_state
from rules.activity.observations import Observation, observations
from rules.base import SessionState
from rules.context import digest, overlay, shrink, working_set
from rules.entities import track_entities
from rules.loops import detect, note
from rules.redact import redact_text, redacted_prefix
from tests.support.factories import apply_rules, assistant, ctx, result, shell, user

TOKEN = "Zq8Lm2Rt6Wy4Np0Hk3Vd7Bs1Fc9Gx5Jt2KaBcD"
# the token begins before a cut and its URL's ``@`` falls past it: at 80 characters in CLONE, at
# 120, 160 and 200 in LONG
CLONE = "cd /srv/app07 && git clone https://deploybot:" + TOKEN + "@github.com/org/repo.git"
LONG = "cd /srv/a-rather-long-application-folder-name/and/more && " + CLONE
PASSWORD = "Tr0ub4dorAndHorse9"
HEX = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
SETTINGS = json.dumps({"host": "db.internal", "password": PASSWORD, "token": HEX}, indent=2)


def leaked(text: str) -> bool:
    return any(part in text for part in (TOKEN[:12], PASSWORD, HEX[:16]))


def _observation(command: str) -> Observation:
    messages = [user("deploy"), assistant(None, shell("c1", command)), result("c1", "done")]
    (obs,) = observations(messages)
    return obs


def test_a_placeholders_command() -> None:
    shown = overlay.key_args(_observation(CLONE + " && make"))
    assert shown.startswith("cmd: cd /srv/") and not leaked(shown)


def test_a_dropped_runs_names() -> None:
    """The digest named the values and left their keys out: nothing to tell them by after."""
    for words in (digest.in_order(SETTINGS, 48, 960), digest.digest(SETTINGS, 48, 960)):
        assert "db.internal" in words and not leaked(" ".join(words)), words


def test_a_loop_notes_call_and_quote() -> None:
    obs = _observation(LONG + " --depth 1 && make deploy && make verify-deploy-now")
    label = detect.label("bash", json.dumps({"command": obs.action.command}), obs)
    assert label.startswith("bash cd /srv/") and not leaked(label)
    error = "fatal: could not read from " + LONG.replace("cd ", "", 1) * 2
    assert not leaked(note._quote(error, 160)) and not leaked(note._quote(error))


def test_a_shrunk_arguments_head() -> None:
    head = shrink._elided(CLONE + "\n" + "echo more\n" * 400)
    assert head.startswith("cd /srv/") and not leaked(head)


def test_an_errors_echo() -> None:
    assert not leaked(echo(["sk-proj-" + TOKEN]))
    assert not leaked(echo_id("resp_x password=" + PASSWORD))


# A GitHub token: 30 random characters and a 6-character checksum. A cut that left 29 of them
# left too few for its shape, and the rest is one guess in 62.
GITHUB = "ghp_Aa1Bb2Cc3DAa1Bb2Cc3DAa1Bb2Cc3DChK5Um"


def _kept_part(text: str) -> str:
    """The longest run of the token's characters after its prefix that ``text`` holds."""
    body = GITHUB[4:]
    return max((body[:n] for n in range(len(body) + 1) if body[:n] in text), key=len)


def test_a_cut_through_a_key_keeps_none_of_it() -> None:
    for keep in range(4, len(GITHUB)):
        text = "docker run -d -e G=" + GITHUB + " nginx"
        limit = len("docker run -d -e G=") + keep
        out = redacted_prefix(text, limit)
        assert len(_kept_part(out)) < 6, (keep, out)
        assert out.startswith("docker run -d -e G=")


def test_a_keys_beginning_left_at_a_texts_end_is_redacted() -> None:
    for keep in range(10, 34):
        for end in ("", "…", "..."):
            out = redact_text("export GH=" + GITHUB[:keep] + end)
            assert len(_kept_part(out)) < 6, out
    for word in ("pip install sk-learn...", "see the glance-review", "ASIAPACIFIC", "a task-"):
        assert redact_text(word) == word


def test_redaction_far_past_the_cut_cannot_bring_a_keys_part_before_it() -> None:
    """Keys redacted past the cut shorten the window: what was beyond it moves up."""
    many = " ".join("sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8" * 3 for _ in range(60))
    text = "x" * 90 + " " + many + " " + GITHUB
    assert len(_kept_part(redacted_prefix(text, 100))) < 6


def run_rules(messages: list[dict[str, Any]]) -> str:
    """The session state track_entities and working_set leave, redacted as the engine stores it."""
    rules = (
        (track_entities, track_entities.Config()),
        (working_set, working_set.Config()),
    )
    out = apply_rules(ctx(*messages), *rules)
    return json.dumps(redact_state(out.state, SessionState()).data)


def test_the_entity_goal_and_diagnostic_a_session_keeps_hold_no_part_of_a_key() -> None:
    """A command's 100 characters (what started a container), a task's first 1,856 (the goal)
    and a failure's 200 (a diagnostic) were cut, then redacted with the state: for some places
    of the key, all but one of its random characters were kept."""
    for shift in range(0, 44, 2):
        command = "docker run -d --name webapp -p 8080:80 -e MODE=" + "p" * shift + " -e G="
        goal = "Deploy with this token" + "\n" * (1780 + shift) + " " + GITHUB + " please"
        failure = "FAILED tests/test_auth.py::test_login - AssertionError: " + "x" * (100 + shift)
        state = run_rules(
            [
                user(goal),
                assistant(None, shell("c1", command + GITHUB + " nginx:latest")),
                result("c1", "3f2a1b9c8d7e"),
                assistant(None, shell("c2", "pytest tests/test_auth.py")),
                result("c2", failure + " " + GITHUB + "\n=== 1 failed in 0.12s ===\n"),
                user("now stop the container you just started"),
            ]
        )
        assert "webapp" in state and "test_login" in state and "Deploy" in state
        assert len(_kept_part(state)) < 6, (shift, _kept_part(state))
