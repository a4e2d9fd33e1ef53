"""What the rules write in short (a placeholder's command, a dropped run's names, a loop note's
quote, a shrunk argument's head, an error's echo) is redacted before it is cut: cut first, a
secret lost the context the redactor knows it by (a URL's ``@``, a password's key), and the
stored or relayed copy kept it whole or nearly so."""

from __future__ import annotations

import json

from proxy.protocols.body import echo, echo_id
from rules.activity.observations import Observation, observations
from rules.context import digest, overlay, shrink
from rules.loops import detect, note
from tests.support.factories import assistant, result, shell, user

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
