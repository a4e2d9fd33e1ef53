"""Passwords given on a command line, for ``rules.redact``: read among the words of the command
that takes them, so the same letters elsewhere stay (``ssh -p 22``, ``docker run -p 8080:80`` or
``-u 1000:1000``, ``mkdir -p``).

- ``mysql -pSECRET`` (attached: ``-p`` alone prompts), in every MySQL and MariaDB client
  (``mysqldump``, ``mariadb-dump`` …); a port mapping (``-p3306:3306``) stays;
- ``curl -u user:SECRET`` (``--user``, ``-U`` / ``--proxy-user``; ``-u user`` prompts) and
  ``curl -b name=SECRET`` (``--cookie``; ``-b file`` names a file);
- ``sshpass -p SECRET`` (among sshpass's own options, before the command it runs);
- ``login -p SECRET`` (``docker login``, ``podman login``, ``helm registry login``, ``az login``,
  ``oc login``; not ``gh auth login -p https``, a git protocol);
- ``redis-cli -a SECRET``, ``mongosh -p SECRET`` (and the other MongoDB tools), ``twine -p``,
  ``ldapsearch -w`` (and the other LDAP tools), ``keytool -storepass``/``-keypass``,
  ``openssl -passin pass:SECRET`` (``-passout``, ``-pass``), ``smbclient -U user%SECRET``;
- a secret store's value: ``aws ssm put-parameter --value SECRET``, ``az keyvault secret set
  --value SECRET``, ``gh secret set NAME --body SECRET`` (``-b``; ``--value=SECRET`` too);
- Windows' ``net use \\\\HOST\\SHARE SECRET`` and ``net user NAME SECRET``.

A command's words run to the end of its line (a line continued with ``\\`` goes on) or to a
``|``, ``;`` or ``&`` word; a quoted value is taken to its closing quote (512 characters at most).
Linear: each word is read once, since the search for the next command resumes after the words
read (a command named among them, ``mysql -e "… mysql …"``, is not read again), and at most once
more: when the first of them that holds the command's name holds a quote, its words are read
again from that name to where the first reading ended. A quote may pair across two commands
(``curl ' curl -b 'sid=X'``: the second is read as an argument of the first)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from rules.redact_shapes import REDACTED

# A word after blanks or a continued line: quoted parts (closed on the line, within 512
# characters: an unclosed quote is a character of the word) may hold blanks, | ; and &.
_NEXT_WORD = re.compile(
    r"""(?:[ \t]|\\\r?\n)++(?P<word>(?:[^\s\\'"]|\\(?!\r?\n)|'[^'\r\n]{0,512}'"""
    r"""|"[^"\r\n]{0,512}"|['"])++)"""
)
_CLOSING = {"'": re.compile(r"[^'\r\n]{0,512}'"), '"': re.compile(r'[^"\r\n]{0,512}"')}
_BARE_END = re.compile(r"""["'\\]""")
_PORTS = re.compile(r"[0-9.:]*:[0-9]+(?:/[a-z]+)?")  # -p3306:3306, -p127.0.0.1:80:80/tcp
# Short options curl takes without a value, before ``u`` or ``U`` in one word (``-ku user:pw``).
_CURL_USER = re.compile(r"-[sSkLvifgjlnqOJZN46]*[uU]|--user|--proxy-user")

Span = tuple[int, int]
_Reader = Callable[[str, list[Span]], Iterator[Span]]


def _words(text: str, pos: int, until: int | None = None) -> Iterator[Span]:
    """(start, end) of each word of the command whose name ends at ``pos``, to a word that starts
    with ``|``, ``;`` or ``&`` or after one that ends with one (which is left out of it), or to
    one that starts at ``until`` or later."""
    while (m := _NEXT_WORD.match(text, pos)) is not None and text[m.start("word")] not in "|;&":
        if until is not None and m.start("word") >= until:
            return
        start, pos = m.span("word")
        end = pos
        while text[end - 1] in "|;&":
            end -= 1
        yield start, end
        if end < pos:
            return


def _value(text: str, start: int, end: int) -> Span | None:
    """The value that starts at ``start`` in a word ending at ``end``: inside its quotes (``'…'``,
    ``"…"``, ``\\"…\\"`` in a JSON string), or up to a quote or backslash (the string's end)."""
    escaped = text.startswith('\\"', start)
    quote = '"' if escaped else text[start : start + 1]
    close = _CLOSING[quote].match(text, start + 1 + escaped) if quote in _CLOSING else None
    if close is not None:
        start, end = start + 1 + escaped, close.end() - 1 - escaped
    elif (cut := _BARE_END.search(text, start, end)) is not None:
        end = cut.start()
    return (start, end) if start < end else None


def _after(text: str, start: int, end: int, sep: str) -> list[Span]:
    """The part after the first ``sep`` of the value at ``start`` (``user:SECRET``,
    ``name=SECRET``, ``user:"SECRET"``)."""
    value = _value(text, start, end)
    at = -1 if value is None else text.find(sep, *value)
    if value is None or at < 0:
        return []
    rest = (at + 1, value[1]) if at + 1 < value[1] else _value(text, at + 1, end)
    return [rest] if rest is not None else []


def _mysql(text: str, words: list[Span]) -> Iterator[Span]:
    for start, end in words:
        value = _value(text, start + 2, end) if text.startswith("-p", start) else None
        if value is not None and not _PORTS.fullmatch(text, *value):
            yield value


def _curl(text: str, words: list[Span]) -> Iterator[Span]:
    for i, (start, end) in enumerate(words):
        word, nxt = text[start:end], words[i + 1] if i + 1 < len(words) else None
        if nxt is not None and _CURL_USER.fullmatch(word):
            yield from _after(text, *nxt, ":")
        elif word[:2] in ("-u", "-U") and len(word) > 2:
            yield from _after(text, start + 2, end, ":")
        elif nxt is not None and word in ("-b", "--cookie"):
            yield from _after(text, *nxt, "=")  # -b FILE names a file: no "="
        elif word[:2] == "-b" and len(word) > 2:
            yield from _after(text, start + 2, end, "=")


def _sshpass(text: str, words: list[Span]) -> Iterator[Span]:
    """Among sshpass's own options: the command it runs, from the first other word, has its own
    (``sshpass -p SECRET ssh -p 22 host``) until a word names sshpass again."""
    options, i = True, 0
    while i < len(words):
        start, end = words[i]
        word, i = text[start:end], i + 1
        if word == "sshpass" or word.endswith("/sshpass"):
            options = True
        elif not options or word[:1] != "-":
            options = False
        elif word == "-p" and i < len(words):
            yield from filter(None, [_value(text, *words[i])])
        elif word.startswith("-p"):
            yield from filter(None, [_value(text, start + 2, end)])
        i += word in ("-p", "-f", "-d", "-P")  # options with a value


def _flags(
    *names: str, prefix: str = "", sep: str = ""
) -> Callable[[str, list[Span]], Iterator[Span]]:
    """A reader of the value after any of ``names`` (the next word): whole, or only after
    ``prefix`` (``openssl -passin pass:SECRET``: ``env:VAR`` and ``file:path`` name no secret)
    or after ``sep`` (``smbclient -U user%SECRET``)."""
    wanted = frozenset(names)
    attached = tuple(f"{name}=" for name in names if name.startswith("--"))

    def read(text: str, words: list[Span]) -> Iterator[Span]:
        for i, (start, end) in enumerate(words):
            word = text[start:end]
            if attached and word.startswith(attached):  # ``--value=SECRET``
                yield from filter(None, [_value(text, text.index("=", start) + 1, end)])
                continue
            if word not in wanted or i + 1 == len(words):
                continue
            value = _value(text, *words[i + 1])
            if value is None:
                continue
            if sep:
                yield from _after(text, *words[i + 1], sep)
            elif not prefix:
                yield value
            elif text.startswith(prefix, value[0]) and value[0] + len(prefix) < value[1]:
                yield value[0] + len(prefix), value[1]

    return read


def _command(pattern: str, literal: str) -> re.Pattern[str]:
    """Where a command of several words is named (``gh secret set``): ``pattern`` starts with
    ``literal``, the name's first word, found by a fast scan; a word's start, or a line's in a
    JSON string."""
    lit = re.escape(literal)
    return re.compile(
        rf"{lit}(?:(?<![\w\-.]{lit})|(?<=\\[nrt]{lit})){pattern[len(literal) :]}(?![\w\-.])"
    )


def _positional(*path: str, at: int) -> Callable[[str, list[Span]], Iterator[Span]]:
    """A reader of the ``at``-th word (from 0) that is no option after the words ``path``, the
    last such word (``rabbitmqctl add_user USER SECRET``: ``_positional("add_user", at=1)``):
    more words are no such command line, and reading them would make what a value's redaction
    shifts (a command's name taken for a value) change a second reading."""

    def read(text: str, words: list[Span]) -> Iterator[Span]:
        named = [text[s:e] for s, e in words[: len(path)]]
        if tuple(named) != path:
            return
        args = _operands(text, words[len(path) :])
        if len(args) == at + 1:
            yield from filter(None, [_value(text, *args[at])])

    return read


_REDIRECT = re.compile(r"[0-9]*[<>]")


def _operands(text: str, words: list[Span]) -> list[Span]:
    """The words that are no option, up to a redirection (``> out``, ``2>&1``) or an option
    after them (``--api S3v4``: an option's value is no operand)."""
    out: list[Span] = []
    for start, end in words:
        if _REDIRECT.match(text, start, end) or (out and text[start] == "-"):
            break
        if text[start] != "-":
            out.append((start, end))
    return out


def _htpasswd(text: str, words: list[Span]) -> Iterator[Span]:
    """``htpasswd -b FILE USER SECRET`` (``-nb USER SECRET``: no file)."""
    options = "".join(text[s + 1 : e] for s, e in words if text[s] == "-")
    if "b" in options:
        args = _operands(text, words)
        at = 1 if "n" in options else 2
        if len(args) == at + 1:  # the password is the last word (as ``_positional`` reads)
            yield from filter(None, [_value(text, *args[at])])


def _net(text: str, words: list[Span]) -> Iterator[Span]:
    """Windows' ``net use [DEVICE] \\\\HOST\\SHARE SECRET /user:NAME`` and ``net user NAME
    SECRET /add``: the password, the last word that is no ``/`` option (``*`` asks for it)."""
    if not words:
        return
    verb = text[words[0][0] : words[0][1]].lower()
    args = [w for w in words[1:] if text[w[0]] != "/"]
    if verb == "use":
        share = next((k for k, w in enumerate(args) if text.startswith("\\\\", w[0])), None)
        at = None if share is None else share + 1
    else:
        at = 1 if verb == "user" else None
    if at is not None and at == len(args) - 1 and text[args[at][0] : args[at][1]] != "*":
        yield from filter(None, [_value(text, *args[at])])


def _either(*readers: _Reader) -> _Reader:
    def read(text: str, words: list[Span]) -> Iterator[Span]:
        for reader in readers:
            yield from reader(text, words)

    return read


def _named(names: str) -> re.Pattern[str]:
    """Where one of ``names`` (a regex alternation) is named: a word's start, or a line's in a
    JSON string (after an escaped ``\\n``)."""
    return re.compile(rf"(?:(?<![\w\-.])|(?<=\\[nrt]))(?:{names})(?![\w\-.])")


# (a literal the text must hold, where the command is named, its flags' reader); a name starts
# a word, or a line in a JSON string (after an escaped ``\n``: a tool call's arguments)
_COMMANDS: tuple[tuple[str, re.Pattern[str], _Reader], ...] = (
    ("mysql", re.compile(r"mysql(?:(?<![\w\-.]mysql)|(?<=\\[nrt]mysql))[a-z_]*+"), _mysql),
    (
        "mariadb",
        re.compile(r"mariadb(?:(?<![\w\-.]mariadb)|(?<=\\[nrt]mariadb))(?:-[a-z]+)?+"),
        _mysql,
    ),
    ("curl", re.compile(r"curl(?:(?<![\w\-.]curl)|(?<=\\[nrt]curl))(?:\.exe)?+"), _curl),
    ("sshpass", re.compile(r"sshpass(?:(?<![\w\-.]sshpass)|(?<=\\[nrt]sshpass))"), _sshpass),
    ("redis-cli", _named("redis-cli"), _flags("-a", "--pass")),
    ("mongo", _named("mongo(?:sh|dump|restore|export|import|stat|top|files)?"), _flags("-p")),
    ("twine", _named("twine"), _flags("-p")),
    ("ldap", _named("ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn)"), _flags("-w")),
    (
        "keytool",
        _named("keytool"),
        _flags(
            "-storepass",
            "-keypass",
            "-srcstorepass",
            "-deststorepass",
            "-srckeypass",
            "-destkeypass",
        ),
    ),
    ("openssl", _named("openssl"), _flags("-passin", "-passout", "-pass", prefix="pass:")),
    ("smbclient", _named("smbclient"), _flags("-U", "--user", sep="%")),
    ("rpcclient", _named("rpcclient"), _flags("-U", "--user", sep="%")),
    ("sqlcmd", _named("sqlcmd"), _flags("-P")),  # SQL Server's -P is the password
    ("bcp", _named("bcp"), _flags("-P")),
    ("influx", _named("influx"), _flags("-p")),
    ("htpasswd", _named("htpasswd"), _htpasswd),
    ("net", _named("net(?:\\.exe)?"), _net),  # Windows' net use / net user
    (
        "rabbitmqctl",
        _named("rabbitmqctl"),
        _either(_positional("add_user", at=1), _positional("change_password", at=1)),
    ),
    # MinIO's client: ``mc alias set NAME URL ACCESS_KEY SECRET_KEY`` (``config host add``)
    (
        "mc",
        _named("mc"),
        _either(_positional("alias", "set", at=3), _positional("config", "host", "add", at=3)),
    ),
    # secret stores set from a command line: the value is the secret, whatever its name
    (
        "put-parameter",
        _command(r"aws[ \t]++ssm[ \t]++put-parameter", "aws"),
        _flags("--value"),
    ),
    (
        "keyvault",
        _command(r"az[ \t]++keyvault[ \t]++secret[ \t]++set", "az"),
        _flags("--value"),
    ),
    ("secret", _command(r"gh[ \t]++secret[ \t]++set", "gh"), _flags("--body", "-b")),
    # the logins whose -p is the password (``gh auth login -p`` names a git protocol)
    (
        "login",
        re.compile(
            r"(?:(?<![\w\-.])|(?<=\\[nrt]))"
            r"(?:docker|podman|nerdctl|buildah|skopeo|oras|az|oc|cf|helm[ \t]+registry)"
            r"(?:\.exe)?[ \t]+login(?![\w\-.])"
        ),
        _either(_flags("-p"), _flags("<<<")),  # ``--password-stdin <<< SECRET`` too
    ),
)


def names_a_command(text: str) -> bool:
    """Whether ``text`` names one of the commands above: else ``redact_flags`` has nothing to do
    (a text with its secrets replaced by REDACTED names none either)."""
    return any(literal in text for literal, _, _ in _COMMANDS)


def _quoted_name(text: str, words: list[Span], named: re.Pattern[str]) -> int | None:
    """Where the command's name ends in the first of ``words`` that names it, when that word
    holds a quote: the words after it are read again from there."""
    for start, end in words:
        if (m := named.search(text, start, end)) is not None:
            word = text[start:end]
            return m.end() if "'" in word or '"' in word else None
    return None


def redact_flags(text: str) -> str:
    """``text`` with the passwords given to the commands above replaced by REDACTED."""
    spans: list[Span] = []
    for literal, named, reader in _COMMANDS:
        if literal not in text:
            continue
        pos = 0
        while (m := named.search(text, pos)) is not None:
            words = list(_words(text, m.end()))
            pos = words[-1][1] if words else m.end()
            found = list(reader(text, words))
            if (inner := _quoted_name(text, words, named)) is not None:
                found += reader(text, list(_words(text, inner, pos)))
            spans += [s for s in found if not text.startswith(REDACTED, s[0])]
    if not spans:
        return text
    out: list[str] = []
    done = 0
    for start, end in sorted(set(spans)):
        if start >= done:
            out += [text[done:start], REDACTED]
            done = end
    out.append(text[done:])
    return "".join(out)


# After a long flag named as a secret (``--password X``, ``--api-key "X"``): blanks, then its
# value, quoted (to its quote) or bare (to a blank, a quote or a shell separator).
_FLAG_VALUE = re.compile(
    r"""[ \t]++(?:"(?P<dq>[^"\\\r\n]+)"|'(?P<sq>[^'\\\r\n]+)'"""
    r"""|(?P<bare>[^\s"',;&|\\\-][^\s"',;&|\\]*+))"""  # not another flag
)
# The clients whose ``--password`` asks for it (its next word is a database or an argument)
_PROMPTING = re.compile(
    r"(?<![\w\-.])(?:psql|pg_[a-z]+|pgbench|createdb|dropdb|createuser|dropuser|vacuumdb"
    r"|reindexdb|clusterdb|mysql[a-z_]*|mariadb(?:-[a-z]+)?)(?![\w\-.])"
)


def _prompts(text: str, start: int) -> bool:
    """Whether the command on the line before ``start`` (256 characters back at most) takes a bare
    ``--password`` as "ask for it" (PostgreSQL's and MySQL's clients): what follows is no value."""
    line = max(text.rfind("\n", max(0, start - 256), start) + 1, start - 256, 0)
    return _PROMPTING.search(text, line, start) is not None


def flag_value(text: str, start: int, end: int) -> re.Match[str] | None:
    """The value after the long flag named as a secret at ``text[start:end]`` (``--password
    X``): its ``dq``, ``sq`` or ``bare`` group; None after a client's ``--password`` that asks."""
    return None if _prompts(text, start) else _FLAG_VALUE.match(text, end)
