"""More command lines that take a secret, for ``rules.redact_flags``' table of commands: package
managers' repository credentials (``poetry config http-basic.REPO USER SECRET``, ``pypi-token.…``,
``composer config http-basic.HOST USER SECRET``, ``github-oauth.…``, ``cargo login TOKEN``),
``dotnet user-secrets set KEY SECRET``, macOS' ``security add-generic-password … -w SECRET``,
logins given their token (``wandb login KEY``, ``ngrok authtoken TOKEN``, ``snyk auth TOKEN``,
``cf auth USER SECRET``, ``codecov -t TOKEN``), ``unrar x -pSECRET``, NetworkManager's ``nmcli
… password SECRET`` (``wifi-sec.psk SECRET``) and SNMP's community and pass phrases (``snmpwalk
-c SECRET``, ``-A``, ``-X``). Each reads the words of its command once, as the table's readers
do."""

from __future__ import annotations

import re
from collections.abc import Iterator

from rules.redact_words import (
    Reader,
    Span,
    command_named,
    flag_reader,
    named_command,
    operands,
    word_value,
)

# A repository's credentials set from a command line: the setting's prefix, and which of the
# words after it is the secret (``http-basic.REPO USER SECRET``: the second)
_REPO_SETTINGS = (
    ("http-basic.", 1),
    ("bitbucket-oauth.", 1),
    ("pypi-token.", 0),
    ("github-oauth.", 0),
    ("gitlab-token.", 0),
    ("gitlab-oauth.", 0),
    ("bearer.", 0),
)


def _repo_credentials(text: str, words: list[Span]) -> Iterator[Span]:
    for i, (start, _end) in enumerate(words):
        at = next((at for prefix, at in _REPO_SETTINGS if text.startswith(prefix, start)), None)
        if at is None:
            continue
        args = operands(text, words[i + 1 :])
        if len(args) > at:
            yield from filter(None, [word_value(text, *args[at])])
        return


def _operand(at: int) -> Reader:
    """A reader of the ``at``-th operand, when there are ``at + 1`` or more and it is no
    ``name=value`` pair (``cargo login TOKEN``, ``dotnet user-secrets set KEY SECRET``)."""

    def read(text: str, words: list[Span]) -> Iterator[Span]:
        args = operands(text, words)
        if len(args) > at and "=" not in text[args[at][0] : args[at][1]]:
            yield from filter(None, [word_value(text, *args[at])])

    return read


def _unrar(text: str, words: list[Span]) -> Iterator[Span]:
    """``unrar x -pSECRET``: the password in the option's word (``-p`` alone prompts, ``-p-``
    asks for none)."""
    for start, end in words:
        if text.startswith("-p", start) and end - start > 2 and text[start + 2] != "-":
            yield from filter(None, [word_value(text, start + 2, end)])


# nmcli's settings that hold a secret (``wifi-sec.psk``, ``802-1x.password``), and the word
# ``password`` of ``nmcli dev wifi connect SSID password SECRET``
_NM_SECRETS = (".psk", ".password", ".wep-key0", ".wep-key1", ".wep-key2", ".wep-key3")
_NM_FIELDS = frozenset({"-f", "--fields", "-g", "--get-values"})  # what names settings to show


def _nmcli(text: str, words: list[Span]) -> Iterator[Span]:
    for i, (start, end) in enumerate(words[:-1]):
        word = text[start:end]
        if word != "password" and not word.endswith(_NM_SECRETS):
            continue
        if i and text[words[i - 1][0] : words[i - 1][1]] in _NM_FIELDS:
            continue
        yield from filter(None, [word_value(text, *words[i + 1])])


# (a literal the text must hold, where the command is named, its reader): the literal is what
# decides whether a text is read for commands at all, so it is as long as the command allows
CLIENTS: tuple[tuple[str, re.Pattern[str], Reader], ...] = (
    ("poetry config", command_named(r"poetry[ \t]++config", "poetry"), _repo_credentials),
    (
        "composer",
        command_named(r"composer[ \t]++(?:global[ \t]++)?config", "composer"),
        _repo_credentials,
    ),
    ("cargo login", command_named(r"cargo[ \t]++login", "cargo"), _operand(0)),
    (
        "user-secrets",
        command_named(r"dotnet[ \t]++user-secrets[ \t]++set", "dotnet"),
        _operand(1),
    ),
    (
        "security add-",
        command_named(r"security[ \t]++add-(?:generic|internet)-password", "security"),
        flag_reader("-w"),
    ),
    # logins given their token (``wandb login KEY``, ``ngrok config add-authtoken TOKEN``, ``snyk
    # auth TOKEN``, ``cf auth USER SECRET``, ``codecov -t TOKEN``)
    ("wandb login", command_named(r"wandb[ \t]++login", "wandb"), _operand(0)),
    (
        "authtoken",
        command_named(r"ngrok[ \t]++(?:config[ \t]++add-)?authtoken", "ngrok"),
        _operand(0),
    ),
    ("snyk auth", command_named(r"snyk[ \t]++auth", "snyk"), _operand(0)),
    ("cf auth", command_named(r"cf[ \t]++auth", "cf"), _operand(1)),
    ("codecov", named_command("codecov"), flag_reader("-t", "--token")),
    ("rar ", named_command("unrar|rar"), _unrar),  # "rar" alone is in "library"
    ("nmcli", named_command("nmcli"), _nmcli),
    (
        "snmp",
        named_command(r"snmp(?:walk|bulkwalk|get|getnext|bulkget|set|table|trap|inform|status|df)"),
        flag_reader("-c", "-A", "-X"),
    ),
)
