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
- Windows' ``net use \\\\HOST\\SHARE SECRET`` and ``net user NAME SECRET``;
- ``http -a user:SECRET`` (HTTPie's ``https``, ``--auth``; xh);
- ``zip -P SECRET`` (``unzip``), ``ssh-keygen -N SECRET`` (``-P``), ``7z -pSECRET``, ``openssl
  enc -k SECRET``, ``sqlplus user/SECRET@db`` (``expdp``, ``impdp``), ``mongo -pSECRET``,
  ``mysqladmin password SECRET``,
  ``rclone config create … secret_access_key SECRET``, ``aws configure set
  aws_secret_access_key SECRET``, ``npm config set _authToken SECRET``
  (pnpm's, yarn's), ``useradd -p SECRET``, ``xfreerdp /p:SECRET``, ``rdesktop -p SECRET``,
  ``vault login TOKEN``, ``kubectl create secret … --from-literal=KEY=SECRET`` (``oc``'s too:
  ``rules.redact_literals``), ``mosquitto_pub -P SECRET``, ``lftp -u user,SECRET``.

A command's words run to the end of its line (a line continued with ``\\`` goes on) or to a
``|``, ``;`` or ``&`` word; a quoted value is taken to its closing quote (512 characters at most).
Linear: each word is read once, since the search for the next command resumes after the words
read (a command named among them, ``mysql -e "… mysql …"``, is not read again), and at most once
more: when the first of them that holds the command's name holds a quote, its words are read
again from that name to where the first reading ended. A quote may pair across two commands
(``curl ' curl -b 'sid=X'``: the second is read as an argument of the first)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from rules.redact_clients import CLIENTS
from rules.redact_literals import from_literals
from rules.redact_names import is_secret_name
from rules.redact_references import names_where_kept
from rules.redact_shapes import REDACTED
from rules.redact_words import (
    Reader,
    Span,
    command_named,
    command_words,
    either,
    flag_reader,
    named_command,
    operands,
    positional_reader,
    value_after,
    word_value,
)

_PORTS = re.compile(r"[0-9.:]*:[0-9]+(?:/[a-z]+)?")  # -p3306:3306, -p127.0.0.1:80:80/tcp
# Short options curl takes without a value, before ``u`` or ``U`` in one word (``-ku user:pw``).
_CURL_USER = re.compile(r"-[sSkLvifgjlnqOJZN46]*[uU]|--user|--proxy-user")


def _mysql(text: str, words: list[Span]) -> Iterator[Span]:
    for start, end in words:
        value = word_value(text, start + 2, end) if text.startswith("-p", start) else None
        if value is not None and not _PORTS.fullmatch(text, *value):
            yield value


def _curl(text: str, words: list[Span]) -> Iterator[Span]:
    for i, (start, end) in enumerate(words):
        word, nxt = text[start:end], words[i + 1] if i + 1 < len(words) else None
        if nxt is not None and _CURL_USER.fullmatch(word):
            yield from value_after(text, *nxt, ":")
        elif word[:2] in ("-u", "-U") and len(word) > 2:
            yield from value_after(text, start + 2, end, ":")
        elif nxt is not None and word in ("-b", "--cookie"):
            yield from value_after(text, *nxt, "=")  # -b FILE names a file: no "="
        elif word[:2] == "-b" and len(word) > 2:
            yield from value_after(text, start + 2, end, "=")


def _attached(prefix: str) -> Reader:
    """A reader of the value given in the option's own word (``7z -pSECRET``, ``mongo
    -pSECRET``, ``xfreerdp /p:SECRET``; ``-p`` alone prompts)."""

    def read(text: str, words: list[Span]) -> Iterator[Span]:
        for start, end in words:
            if text.startswith(prefix, start) and end - start > len(prefix):
                yield from filter(None, [word_value(text, start + len(prefix), end)])

    return read


def _attached_after(prefix: str, sep: str) -> Reader:
    """A reader of the value after ``sep`` in the option's own word (``http -auser:SECRET``)."""

    def read(text: str, words: list[Span]) -> Iterator[Span]:
        for start, end in words:
            if text.startswith(prefix, start) and end - start > len(prefix):
                yield from value_after(text, start + len(prefix), end, sep)

    return read


_ORACLE_LOGIN = re.compile(r"[A-Za-z][\w$#]{0,127}/")  # a user's name, then its password


def _slash_login(text: str, words: list[Span]) -> Iterator[Span]:
    """Oracle's ``sqlplus user/SECRET@db`` (``expdp``, ``impdp``): the first word that is no
    option, between its ``/`` and ``@``, when a user's name comes before the ``/`` (``sqlplus
    / as sysdba``, ``hr@host/XEPDB1``, ``@scripts/a.sql`` and ``parfile=/x`` name none)."""
    first = next(((s, e) for s, e in words if text[s] != "-"), None)
    value = word_value(text, *first) if first is not None else None
    login = _ORACLE_LOGIN.match(text, value[0], value[1]) if value is not None else None
    if value is None or login is None:
        return
    at = text.find("@", login.end(), value[1])
    end = at if at >= 0 else value[1]
    if login.end() < end:
        yield login.end(), end


def _named_values(text: str, words: list[Span]) -> Iterator[Span]:
    """The word after each word named as a secret (``mysqladmin password SECRET``, ``rclone
    config create r s3 secret_access_key SECRET``)."""
    for i in range(len(words) - 1):
        name = text[words[i][0] : words[i][1]]
        if name[:1] != "-" and is_secret_name(name):
            value = word_value(text, *words[i + 1])
            # ``$AWS_SECRET_ACCESS_KEY``: where the secret is kept, not the secret
            if value is not None and not names_where_kept(text, *value):
                yield value


def _token_operand(text: str, words: list[Span]) -> Iterator[Span]:
    """``vault login TOKEN``: its one operand, unless it is a ``name=value`` pair."""
    args = operands(text, words)
    if len(args) == 1 and "=" not in text[args[0][0] : args[0][1]]:
        yield from filter(None, [word_value(text, *args[0])])


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
            yield from filter(None, [word_value(text, *words[i])])
        elif word.startswith("-p"):
            yield from filter(None, [word_value(text, start + 2, end)])
        i += word in ("-p", "-f", "-d", "-P")  # options with a value


def _htpasswd(text: str, words: list[Span]) -> Iterator[Span]:
    """``htpasswd -b FILE USER SECRET`` (``-nb USER SECRET``: no file)."""
    options = "".join(text[s + 1 : e] for s, e in words if text[s] == "-")
    if "b" in options:
        args = operands(text, words)
        at = 1 if "n" in options else 2
        if len(args) == at + 1:  # the password is the last word (as ``positional_reader`` reads)
            yield from filter(None, [word_value(text, *args[at])])


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
        yield from filter(None, [word_value(text, *args[at])])


# (a literal the text must hold, where the command is named, its flags' reader); a name starts
# a word, or a line in a JSON string (after an escaped ``\n``: a tool call's arguments)
_AWS_CONFIGURE_SET = (
    r"aws(?:[ \t]++--[a-z][a-z-]{0,30}+(?:[ \t]++[^\s-]\S{0,200}+)?){0,4}[ \t]++configure[ \t]++set"
)
_COMMANDS: tuple[tuple[str, re.Pattern[str], Reader], ...] = (
    ("mysql", re.compile(r"mysql(?:(?<![\w\-.]mysql)|(?<=\\[nrt]mysql))[a-z_]*+"), _mysql),
    (
        "mariadb",
        re.compile(r"mariadb(?:(?<![\w\-.]mariadb)|(?<=\\[nrt]mariadb))(?:-[a-z]+)?+"),
        _mysql,
    ),
    ("curl", re.compile(r"curl(?:(?<![\w\-.]curl)|(?<=\\[nrt]curl))(?:\.exe)?+"), _curl),
    ("sshpass", re.compile(r"sshpass(?:(?<![\w\-.]sshpass)|(?<=\\[nrt]sshpass))"), _sshpass),
    ("redis-cli", named_command("redis-cli"), flag_reader("-a", "--pass")),
    (
        "mongo",
        named_command("mongo(?:sh|dump|restore|export|import|stat|top|files)?"),
        either(flag_reader("-p"), _attached("-p")),
    ),
    ("zip", named_command("zip|unzip"), flag_reader("-P")),  # zip's -P is the password
    ("ssh-keygen", named_command("ssh-keygen"), flag_reader("-N", "-P")),  # new, old passphrase
    ("7z", named_command("7za?|7zr"), _attached("-p")),
    ("openssl", named_command("openssl"), flag_reader("-k")),  # ``enc -k SECRET``
    ("sqlplus", named_command("sqlplus"), _slash_login),
    ("expdp", named_command("expdp"), _slash_login),
    ("impdp", named_command("impdp"), _slash_login),
    ("mysqladmin", named_command("mysqladmin"), _named_values),
    (
        "rclone",
        command_named(r"rclone[ \t]++config[ \t]++(?:create|update)", "rclone"),
        _named_values,
    ),
    # ``aws configure set aws_secret_access_key SECRET`` (``aws_session_token``, a profile's
    # ``profile.dev.aws_secret_access_key``; ``aws_access_key_id`` is no secret)
    # (after up to four global options: ``aws --profile dev configure set …``)
    ("aws", command_named(_AWS_CONFIGURE_SET, "aws"), _named_values),
    # ``npm config set //registry/:_authToken SECRET`` (``_auth``; yarn's npmAuthToken)
    *(
        (name, command_named(rf"{name}[ \t]++config[ \t]++set", name), _named_values)
        for name in ("npm", "pnpm", "yarn")
    ),
    ("useradd", named_command("useradd"), flag_reader("-p", "--password")),
    ("usermod", named_command("usermod"), flag_reader("-p", "--password")),
    ("vault", command_named(r"vault[ \t]++login", "vault"), _token_operand),
    ("rdesktop", named_command("rdesktop"), flag_reader("-p")),
    # HTTPie (and xh): ``http -a user:SECRET URL`` (``--auth``; ``-a user`` prompts); the name
    # followed by a blank, so a URL's ``http://`` names no command
    (
        "http",
        re.compile(r"(?:(?<![\w\-.])|(?<=\\[nrt]))(?:https?|xhs?)(?=[ \t])"),
        either(flag_reader("-a", "--auth", sep=":"), _attached_after("-a", ":")),
    ),
    (
        "xh",
        re.compile(r"(?:(?<![\w\-.])|(?<=\\[nrt]))xhs?(?=[ \t])"),
        either(flag_reader("-a", "--auth", sep=":"), _attached_after("-a", ":")),
    ),
    ("freerdp", named_command("[xw]freerdp3?"), _attached("/p:")),
    ("twine", named_command("twine"), flag_reader("-p")),
    # ``kubectl create secret --from-literal`` (OpenShift's ``oc`` too): "secret" is in the text
    ("secret", named_command("kubectl|oc"), from_literals),
    ("mosquitto", named_command("mosquitto_(?:pub|sub|rr)"), flag_reader("-P", "--pw")),
    ("lftp", named_command("lftp"), flag_reader("-u", "--user", sep=",")),  # ``-u user,SECRET``
    (
        "ldap",
        named_command("ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn)"),
        flag_reader("-w"),
    ),
    (
        "keytool",
        named_command("keytool"),
        flag_reader(
            "-storepass",
            "-keypass",
            "-srcstorepass",
            "-deststorepass",
            "-srckeypass",
            "-destkeypass",
        ),
    ),
    (
        "openssl",
        named_command("openssl"),
        flag_reader("-passin", "-passout", "-pass", prefix="pass:"),
    ),
    ("smbclient", named_command("smbclient"), flag_reader("-U", "--user", sep="%")),
    ("rpcclient", named_command("rpcclient"), flag_reader("-U", "--user", sep="%")),
    ("sqlcmd", named_command("sqlcmd"), flag_reader("-P")),  # SQL Server's -P is the password
    ("bcp", named_command("bcp"), flag_reader("-P")),
    ("influx", named_command("influx"), flag_reader("-p")),
    ("htpasswd", named_command("htpasswd"), _htpasswd),
    ("net", named_command("net(?:\\.exe)?"), _net),  # Windows' net use / net user
    (
        "rabbitmqctl",
        named_command("rabbitmqctl"),
        either(positional_reader("add_user", at=1), positional_reader("change_password", at=1)),
    ),
    # MinIO's client: ``mc alias set NAME URL ACCESS_KEY SECRET_KEY`` (``config host add``)
    (
        "mc",
        named_command("mc"),
        either(
            positional_reader("alias", "set", at=3),
            positional_reader("config", "host", "add", at=3),
        ),
    ),
    # secret stores set from a command line: the value is the secret, whatever its name
    (
        "put-parameter",
        command_named(r"aws[ \t]++ssm[ \t]++put-parameter", "aws"),
        flag_reader("--value"),
    ),
    (
        "keyvault",
        command_named(r"az[ \t]++keyvault[ \t]++secret[ \t]++set", "az"),
        flag_reader("--value"),
    ),
    ("secret", command_named(r"gh[ \t]++secret[ \t]++set", "gh"), flag_reader("--body", "-b")),
    # the logins whose -p is the password (``gh auth login -p`` names a git protocol)
    (
        "login",
        re.compile(
            r"(?:(?<![\w\-.])|(?<=\\[nrt]))"
            r"(?:docker|podman|nerdctl|buildah|skopeo|oras|az|oc|cf|helm[ \t]+registry)"
            r"(?:\.exe)?[ \t]+login(?![\w\-.])"
        ),
        either(flag_reader("-p"), flag_reader("<<<")),  # ``--password-stdin <<< SECRET`` too
    ),
    *CLIENTS,  # package managers, .NET's user secrets, macOS' keychain, unrar, nmcli, SNMP
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
            words = list(command_words(text, m.end()))
            pos = words[-1][1] if words else m.end()
            found = list(reader(text, words))
            if (inner := _quoted_name(text, words, named)) is not None:
                found += reader(text, list(command_words(text, inner, pos)))
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
