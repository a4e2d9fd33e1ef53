"""Passwords piped into the command that reads them, for ``rules.redact``: ``echo SECRET |
sudo -S …``, ``echo SECRET | docker login -u me --password-stdin``, ``echo "bob:SECRET" |
chpasswd``, ``printf '%s\\n' SECRET | passwd --stdin bob``, ``echo SECRET | gh secret set NAME``
(a secret store's command), or given to one as a here-string (``chpasswd <<< "bob:SECRET"``).
The secret is the last word ``echo`` or ``printf`` prints; an echo piped anywhere else stays. So
is one printed into a file whose name says it holds a password (``echo SECRET > ~/.vault_pass``,
``>> /run/secrets/db``) or given through a process substitution where such a file is asked for
(``--vault-password-file <(echo SECRET)``, ``sshpass -f <(…)``). Linear: every part is bounded
and anchored at an ``echo`` or a ``printf``, at a flag before ``<(``, or at what reads a
here-string."""

from __future__ import annotations

import re

from rules.redact_names import is_secret_name, name_words
from rules.redact_shapes import REDACTED

# What ``echo`` or ``printf`` prints: up to four words, quoted (escaped too: a command inside a
# tool call's JSON arguments, ``echo \\"SECRET\\"``) or bare (ending also at the characters given)
_ARGS = (
    r"(?P<args>(?:[ \t]++(?:'[^'\r\n]{0,256}'|\"[^\"\r\n]{0,256}\""
    r"|\\{1,7}\"[^\"\\\r\n]{0,256}\\{1,7}\"|\\{1,7}'[^'\\\r\n]{0,256}\\{1,7}'"
    r"|[^\s|;&'\"%s]{1,256})){1,4}+)"
)
# What reads a password or a secret from its input: ``sudo -S``, ``chpasswd``, ``passwd --stdin``,
# and a secret store's command that sets one (``gh secret set NAME``, ``gcloud secrets create``,
# ``wrangler secret put``, ``docker secret create``, ``kubectl create secret``, ``vercel env add``)
_READS = (
    r"(?:sudo[ \t]++(?:-[A-Za-z]*S|--stdin)|chpasswd|passwd[ \t]++--stdin"
    r"|(?:gh|gcloud|wrangler|docker|podman|fly|flyctl|doppler|infisical)[ \t][^\r\n|;&<]{0,100}?"
    r"(?<![\w\-.])secrets?[ \t]++(?:set|create|put|add|import|versions[ \t]++add)(?![\w\-.])"
    r"|(?:kubectl|oc)[ \t][^\r\n|;&<]{0,100}?create[ \t]++secret(?![\w\-.])"
    r"|vercel[ \t]++env[ \t]++add(?![\w\-.]))"
)
_PIPED = re.compile(
    r"(?<![\w\-.])(?:echo|printf)" + _ARGS % "" + r"[ \t]*+\|[ \t]*+"
    r"(?=" + _READS + r"|[^\r\n|;&]{0,200}?--password-stdin)"
)
# The last word echoed, or a here-string: quoted (escaped too) or bare
_QUOTED_WORD = (
    r"'(?P<sq>[^'\r\n]{1,256})'|\"(?P<dq>[^\"\r\n]{1,256})\""
    r"|\\{1,7}\"(?P<edq>[^\"\\\r\n]{1,256})\\{1,7}\"|\\{1,7}'(?P<esq>[^'\\\r\n]{1,256})\\{1,7}'"
)
_GROUPS = ("sq", "dq", "edq", "esq", "bare")
# ``chpasswd <<< "bob:SECRET"``, ``sudo -S … <<< 'SECRET'``: a here-string given to what reads one
_HERE_STRING = re.compile(
    r"(?<![\w\-.])" + _READS + r"[^\r\n|;&<]{0,200}?<<<[ \t]*+"
    r"(?:" + _QUOTED_WORD + r"|(?P<bare>[^\s;&|'\"\\][^\s;&|'\"]{0,255}))"
)
_LAST_WORD = re.compile(r"(?:" + _QUOTED_WORD + r"|(?P<bare>\S{1,256}))\Z")
_READERS = ("sudo", "chpasswd", "passwd", "password-stdin", "secret", "vercel")
# a variable, a command's output or a CI template (``${{ secrets.PAT }}``): a name, no secret
_REFERENCES = ("$", "`", "{{", "}}")


def redact_piped(text: str) -> str:
    """``text`` with the password each ``echo`` or ``printf`` pipes into a command that reads
    one replaced by REDACTED."""
    if not any(word in text for word in _READERS):
        return text
    if "|" in text:
        text = _PIPED.sub(_redacted, text)
    return _HERE_STRING.sub(_here_string, text) if "<<<" in text else text


def _here_string(m: re.Match[str]) -> str:
    group = next(g for g in _GROUPS if m[g] is not None)
    if m[group] == REDACTED or any(mark in m[group] for mark in _REFERENCES):
        return m[0]
    start, end = m.start(group) - m.start(), m.end(group) - m.start()
    return m[0][:start] + REDACTED + m[0][end:]


# ``echo SECRET > PATH`` (``>>``): the path judged by ``_secret_file``
_REDIRECTED = re.compile(
    r"(?<![\w\-.])(?:echo|printf)"
    + _ARGS % "<>"
    + r"[ \t]*+>>?[ \t]*+(?P<path>[^\s;&|<>'\"]{1,256}+)"
)
# ``--password-file <(echo SECRET)`` (``=``): the flag judged by ``_secret_flag``
_SUBSTITUTED = re.compile(
    r"(?<![\w\-.])(?P<flag>-{1,2}[A-Za-z][\w.\-]{0,63}+)(?:=|[ \t]++)<\([ \t]*+(?:echo|printf)"
    + _ARGS % "()"
    + r"[ \t]*+\)"
)
# A file's name's last word that says it holds a secret, and the extensions of such a file
_SECRET_WORDS = frozenset(
    {"pw", "pwd", "pass", "passwd", "password", "passphrase", "secret", "token", "apikey", "key"}
)
_TEXT_EXTENSIONS = frozenset({"", "txt", "pass", "pw", "key", "secret", "token"})
# A file's or a flag's last words that say where a secret is (``--vault-password-file``)
_WHERE = ("file", "path", "fd")


def _secret_file(path: str) -> bool:
    """Whether ``path`` names a file that holds a secret: its name ends in a secret's word
    (``.vault_pass``, ``db_password``, ``pw.txt``) with no extension but a text's, or it is in a
    ``secrets`` folder (``password_utils.py``, ``secrets.json`` are code and data)."""
    folder, _, name = path.rpartition("/")
    if folder.rpartition("/")[2] == "secrets" and name:
        return True
    stem, _, extension = name.lstrip(".").partition(".")
    words = name_words(stem)
    return extension in _TEXT_EXTENSIONS and bool(words) and words[-1] in _SECRET_WORDS


def _secret_flag(text: str, m: re.Match[str]) -> bool:
    """Whether the flag before ``<(…)`` asks for a file holding a secret (``sshpass -f``)."""
    flag = m["flag"]
    if flag == "-f":
        line = max(text.rfind("\n", 0, m.start()) + 1, m.start() - 128)
        return "sshpass" in text[line : m.start()]
    words = name_words(flag)
    while words and words[-1] in _WHERE:
        words.pop()
    return bool(words) and (words[-1] in ("pw", "pwd", "pass") or is_secret_name("_".join(words)))


def redact_echoed(text: str) -> str:
    """``text`` with the password each ``echo`` or ``printf`` writes to a file that holds one, or
    gives through a process substitution where such a file is asked for, replaced."""
    if "echo" not in text and "printf" not in text:
        return text
    if ">" in text:
        text = _REDIRECTED.sub(lambda m: _redacted(m) if _secret_file(m["path"]) else m[0], text)
    if "<(" in text:
        text = _SUBSTITUTED.sub(lambda m: _redacted(m) if _secret_flag(text, m) else m[0], text)
    return text


def _redacted(m: re.Match[str]) -> str:
    args = m["args"].rstrip()
    last = _LAST_WORD.search(args)
    if last is None:
        return m[0]
    group = next(g for g in _GROUPS if last[g] is not None)
    if last[group] == REDACTED or any(mark in args for mark in _REFERENCES):
        return m[0]  # redacted already, or what names a secret kept elsewhere
    start = m.start("args") - m.start() + last.start(group)
    end = m.start("args") - m.start() + last.end(group)
    return m[0][:start] + REDACTED + m[0][end:]


# An expect script's answer to a password's prompt: ``expect "Password:"`` then ``send "SECRET\\r"``
# (on the next line, or in the braces after the pattern); also ``exp_send``
_EXPECTED = re.compile(
    r"expect[ \t]++(?:-[a-z]{1,8}[ \t]++)*+\"[^\"\r\n]{0,64}?(?i:p?ass(?:word|phrase|wd)?|pin)\b"
    r"[^\"\r\n]{0,64}\"[^\r\n\"]{0,64}?(?:\r?\n[ \t]*+)?(?:exp_)?send[ \t]++(?:--[ \t]++)?"
    r"\"(?P<dq>[^\"\\\r\n]{1,256}?)(?:\\[rn])?\""
)


def redact_expected(text: str) -> str:
    """``text`` with what an expect script sends to a password's prompt replaced (a variable,
    ``$pw``, is no secret and stays)."""
    if "send" not in text or "expect" not in text:
        return text
    return _EXPECTED.sub(_expected_redacted, text)


def _expected_redacted(m: re.Match[str]) -> str:
    if m["dq"].startswith(("$", REDACTED)):
        return m[0]
    start, end = m.start("dq") - m.start(), m.end("dq") - m.start()
    return m[0][:start] + REDACTED + m[0][end:]


# PowerShell's ``ConvertTo-SecureString 'SECRET' -AsPlainText`` (or ``-String 'SECRET'``): the
# plain text a secure string is made of
_SECURE_STRING = re.compile(
    r"(?i:ConvertTo-SecureString)[ \t]++(?:(?i:-String)[ \t]++)?"
    r"(?:'(?P<sq>[^'\s][^'\r\n]{0,511})'|\"(?P<dq>[^\"\s][^\"\r\n]{0,511})\")"
)


def redact_secure_strings(text: str) -> str:
    """``text`` with the plain text of each ``ConvertTo-SecureString`` replaced (a variable's
    name, ``$pw``, is no secret and stays)."""
    if "SecureString" not in text and "securestring" not in text.lower():
        return text
    return _SECURE_STRING.sub(_secure_redacted, text)


def _secure_redacted(m: re.Match[str]) -> str:
    group = "sq" if m["sq"] is not None else "dq"
    value = m[group]
    if value.startswith("$") or value == REDACTED:
        return m[0]
    start, end = m.span(group)
    return m[0][: start - m.start()] + REDACTED + m[0][end - m.start() :]
