"""The values after secret names and auth schemes in a text (``PGPASSWORD=…``, ``Authorization:
Bearer …``, ``"password": "1234"``, ``Cookie: …``, ``identified by '…'``, a netrc's password),
passwords on command lines (``rules.redact_flags``), and hex runs near secret names: one pass over
the trigger words' places (``redact_after_triggers``). Part of ``rules.redact``'s string net."""

from __future__ import annotations

import re

from rules.redact_auth_params import digest_span
from rules.redact_cjk import CJK_NAMES, cjk_value
from rules.redact_declared import declared_value
from rules.redact_flags import flag_value, names_a_command, redact_flags
from rules.redact_idents import (
    CJK_STOP,
    QUOTED_VALUE,
    VALUE_GROUPS,
    judged_end,
    key_named_value,
    name_end,
    name_ending,
    name_start,
    opens_element,
    paired_value,
)
from rules.redact_names import MIN_SECRET_CHARS as MIN_SECRET_CHARS  # read from here too
from rules.redact_names import SHAPED_REACH, min_chars, shaped_name, value_fits
from rules.redact_names import is_basic_credentials as is_basic_credentials
from rules.redact_names import is_secret_name as is_secret_name
from rules.redact_near_hex import hex_spans
from rules.redact_prose import LOOKS_SET, env_value, said_value, spaced_key
from rules.redact_references import declares, is_placeholder, names_a_source, names_where_kept
from rules.redact_shapes import REDACTED as REDACTED  # the marker, imported from here too
from rules.redact_tables import table_row
from rules.redact_yaml_blocks import block_span, next_line_value

# Words after which a secret may follow, found with str.find on the lowercased text: ~20x faster
# than a case-insensitive regex, which tries every position. (A text whose length changes when
# lowercased, such as one with "İ", uses the regex.)
_TRIGGER_WORDS = (
    *("pass", "secret", "token", "key", "credential", "pwd"),  # names (ODBC's Pwd, DB_PWD)
    "identified",  # SQL's IDENTIFIED BY 'secret'
    '"auth"',  # a Docker config.json's base64 of user:password
    *("_auth", "authident"),  # npm's _auth: the same; yarn's npmAuthIdent: user:password
    *("authorization", "bearer", "basic", "cookie"),  # auth headers and schemes, cookies
    "psk",  # a Wi-Fi's pre-shared key
    *("pw", "auth", "pat", "salt"),  # only as a name's last word (``_LAST_WORDS``)
    # names in Chinese, Japanese and Korean (``rules.redact_cjk``)
    *("密码", "密碼", "口令", "パスワード", "비밀번호", "密钥", "秘钥", "密鑰", "金鑰", "令牌"),
    *("トークン", "토큰", "apiキー", "アクセスキー", "シークレットキー"),
)
# Words taken only where they end a longer name, after a separator or a camelCase step (``DB_PW``,
# ``NPM_AUTH``, ``X-Api-Auth``, ``gitlabPat``): inside a word they are others (``upward``,
# ``author``, ``OAUTH``, ``path``, ``compatible``), and a bare ``auth`` or ``pat`` is rarely one.
_LAST_WORDS = frozenset({"pw", "auth", "pat", "salt"})
_TRIGGER_TAILS = {
    "pass": ("word", "wd", "phrase"),
    "credential": ("s",),
    "key": ("-data", "_data"),  # a kubeconfig's client-key-data
}
_TRIGGER = re.compile(
    r"(?i:pass(?:word|wd|phrase)?|secret|token|key(?:[-_]data)?|credentials?|authorization"
    r'|bearer|basic|cookie|pwd|identified|"auth"|_auth|authident|pw|auth|pat|psk|salt'
    r"|密码|密碼|口令|パスワード|비밀번호|密钥|秘钥|密鑰|金鑰|令牌|トークン|토큰|apiキー|アクセスキー"
    r"|シークレットキー)"
)
# After a secret name: ``=``, ``:``, ``=>`` or ``:=`` (not ``==``), maybe inside quotes (escaped
# too, as in JSON inside a string), then a quoted value (to its quote) or a bare one.
# A bare value runs to a blank, a quote, ``,`` or ``;``, CJK punctuation, or an ``&`` that starts a
# query's next pair (``?password=x&user=bob``; in ``PASSWORD=Tr0ub4dor&3`` it is the password's).
BARE = (
    rf"""(?P<bare>[^\s"',;&\\{CJK_STOP}]++"""
    rf"""(?:&(?![\w.%\-]{{1,64}}=)[^\s"',;&\\{CJK_STOP}]++)*+)"""
)
_ASSIGNED = re.compile(  # ``env["KEY"] = …`` too; ``：`` in CJK text
    # a Markdown label's emphasis or code mark around the colon: ``**Password:** …``,
    # ``**Token**: …``, ``__Password:__ …``, ```password`: …``
    r"""(?:\\{1,7})?(?:["']\]?|\*{1,2}+|__|`)?[ \t]*+(?:=>|:=|[:=：＝]|%3[Dd])(?!=)"""
    r"""(?:(?:\*{1,2}+|__)(?=[ \t]))?[ \t]*+"""
    # a literal's prefix before its quote, read as a bare word, went while the quoted password
    # stayed: Python's (``secret_key = b'…'``, ``f"…"``), C#'s ``@"…"`` and ``$"…"``, C's
    # ``L"…"`` and ``u8"…"``, Rust's ``r#"…"#`` and ``String::from("…")``, C++'s
    # ``std::string("…")``, Java's ``new String("…")``; and a YAML type's tag before a value
    # (``password: !!str …``; a local tag, ``!Ref``, ``!secret``, names where a secret is kept)
    r"""(?:(?:[bBrRuUfF]{1,2}|[@$]{1,2}|u8|L|r\#{1,3}|String::from\(|std::string\("""
    r"""|new[ \t]String\()(?=\\{0,7}["'])|!![A-Za-z][\w-]{0,15}[ \t]++(?=[^\s|>]))?"""
    rf"""(?:{QUOTED_VALUE}|{BARE})"""
)
# An annotated assignment, ``PASSWORD: Final = "…"`` (Python), ``apiKey: string = "…"``
# (TypeScript): the value is the one after `` = ``, not the type (which went, the value stayed).
# Blanks around its ``=``: a YAML password holding ``=`` (``password: ab=cd``) is read whole.
_ANNOTATED = re.compile(
    r"""[ \t]*+:[ \t]*+[A-Za-z_][\w.]*+(?:\[[^\]\r\n]{0,64}\]|<[^>\r\n]{0,64}>)?"""
    r"""(?:[ \t]*+\|[ \t]*+[A-Za-z_][\w.]*+)*+[ \t]++=[ \t]++"""
    rf"""(?:{QUOTED_VALUE}|{BARE})"""
)
# ``Authorization: <scheme> <credentials>``: the credentials go, to the end of the line or quote.
_AUTH_VALUE = re.compile(
    r"""\\?["']?[ \t]*+[:=][ \t]*+\\?["']?[ \t]*+"""  # possessive: blanks are read once
    r"""(?:(?P<scheme>(?i:basic|bearer|token|digest|negotiate|ntlm|aws4-hmac-sha256))[ \t]++)?"""
    r"""(?P<cred>[^"'\\\r\n]+)"""
)
# ``<password>…</password>`` (also with attributes, ``<ns:password>`` or in any case): the element's
# text. Bounded: at most 256 characters of attributes and 512 of text, with no tag inside.
_XML_VALUE = re.compile(r"""(?:[ \t][^<>]{0,256})?>[ \t]*+(?P<xml>[^<\r\n]{1,512})</""")
# After a name ending in cookie: ``name=value; …`` to the end of the line or quote (a
# Set-Cookie's to its first ";"); ``raw_cookie = get_cookie(…)`` is code, not a cookie.
_COOKIE = r"""\\?["']?[ \t]*+[:=][ \t]*+\\?["']?[ \t]*+(?P<cred>[^\s=;,"'\\]{1,256}+=[^"'\\\r\n"""
_COOKIE_VALUE = (re.compile(_COOKIE + "]*)"), re.compile(_COOKIE + ";]*)"))  # Cookie, Set-Cookie
_BEARER_VALUE = re.compile(r"[ \t]++(?P<cred>[A-Za-z0-9._~+/\-]{8,}=*)")
# A token holds a digit, a capital past its first letter or a sign: "Bearer authentication" and
# an OpenAPI scheme's ``scheme: bearer`` before its next line's ``bearerFormat`` hold words
_TOKEN_LIKE = re.compile(r"[0-9A-Z._~+/=\-]")
_BASIC_VALUE = re.compile(r"[ \t]+(?P<cred>[A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])")
# SQL's ``PASSWORD 'secret'`` (``CREATE ROLE … WITH PASSWORD``), and MySQL's ``IDENTIFIED [WITH
# plugin] BY [PASSWORD] 'secret'``: a quoted literal after blanks.
_QUOTED_AFTER = re.compile(
    r"""[ \t]++(?:'(?P<sq>[^'\\\r\n]{1,256})'|"(?P<dq>[^"\\\r\n]{1,256})")"""
)
# What takes a password as its last argument: MySQL's ``SET PASSWORD … = PASSWORD('…')`` (and
# ``OLD_PASSWORD``), Django's ``user.set_password('…')`` and ``check_password('…')``, MongoDB's
# ``db.changeUserPassword("app", "…")``, keyring's ``set_password("svc", "bob", "…")`` (up to two
# arguments before it: a user's name, a service's; ``get_password("svc", "bob")`` asks for one)
_PASSWORD_CALLS = re.compile(r"(?:old_|check_|(?:set|change|update|reset)_?(?:user_?)?)?password")
_QUOTED_ARGUMENT = re.compile(
    r"""\([ \t]*+(?:(?:'[^'\\\r\n]{0,256}'|"[^"\\\r\n]{0,256}"|[\w.]{1,64})[ \t]*+,[ \t]*+){0,2}"""
    r"""(?:'(?P<sq>[^'\\\r\n]{1,256})'|"(?P<dq>[^"\\\r\n]{1,256})")[ \t]*+\)"""
)
_IDENTIFIED_BY = re.compile(
    r"""(?i:[ \t]++(?:with[ \t]++\w{1,64}[ \t]++)?by[ \t]++(?:password[ \t]++)?)"""
    r"""'(?P<sq>[^'\\\r\n]{1,256})'"""
)
_AUTH_MEMBER = re.compile(r'[ \t]*+:[ \t]*+"(?P<cred>[A-Za-z0-9+/]{8,1024}={0,2})"')
# A .netrc's ``machine HOST login USER password SECRET``: the password's word, after a login's
_NETRC_LOGIN = re.compile(r"\blogin[ \t]++[^\s]{1,256}\s{1,16}\Z")
_NETRC_VALUE = re.compile(r"[ \t]++(?P<bare>[^\s\"'\\]{1,256})")
# What stands before a bare ``pwd`` that names a password: a connection string's or a query's
# pairs (``;Pwd=…``, ``?user=bob&pwd=…``); anywhere else PWD is the shell's folder
_PAIR_SEPARATORS = (";", "&", "?")
# a quoted literal after a lower-case ``pwd``, not a folder's path (``"pwd": "/repo"``)
_QUOTED_NEXT = re.compile(
    r"""\\?["']?[ \t]*+[:=][ \t]*+\\{0,7}["'](?![/~.$\\"']|[A-Za-z]:[\\/])"""
)
# The trigger words read as themselves (a header's or a scheme's name, a SQL keyword), not as
# part of an identifier: the identifier's other words are still judged after them.
_OWN_WORDS = frozenset({"authorization", "bearer", "basic", "cookie", '"auth"', "identified"})


def _ends_name(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is the last word of a longer name (``_LAST_WORDS``)."""
    after = text[end : end + 1]
    if after and (after.isalnum() or after in "_-."):
        return False
    before = text[start - 1 : start] if start else ""
    if before in ("_", "-", "."):
        return True
    return before.isalnum() and not before.isupper() and text[start].isupper()


def _value_span(text: str, start: int, end: int) -> tuple[int, int, int] | None:
    """After the trigger word ``text[start:end]``: (start, end) of the secret value that follows it
    and where the scan goes on, or None."""
    word = text[start:end].lower()
    if word == "authorization":
        m = _AUTH_VALUE.match(text, end)
        if m and m["scheme"] and m["scheme"].lower() == "digest":
            return digest_span(text, m.start("cred"))  # ``username="…", response="…"``
        if m:
            cred = m["cred"].rstrip()
            if cred != REDACTED and len(cred) >= (1 if m["scheme"] else MIN_SECRET_CHARS):
                if not (names_a_source(cred) or is_placeholder(cred, bare=False)):
                    return m.start("cred"), m.start("cred") + len(cred), m.end()
                return m.end(), m.end(), m.end()  # ``Bearer $TOKEN``: the whole value is kept
        return None
    if word in ("bearer", "basic"):
        if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            return None  # inside a word
        m = (_BEARER_VALUE if word == "bearer" else _BASIC_VALUE).match(text, end)
        if m and (
            _TOKEN_LIKE.search(m["cred"], 1)
            if word == "bearer"
            else is_basic_credentials(m["cred"])
        ):
            return m.start("cred"), m.end("cred"), m.end()
        return None
    if word == "cookie":  # a header's value, or a name=value one (``raw_cookie = f(x)`` is code)
        set_cookie = name_ending(text, start, end).lower().endswith("set-cookie")
        m = _COOKIE_VALUE[set_cookie].match(text, end)
        if m is None or m["cred"].startswith(REDACTED):
            return None  # "the cookie: a small file", a value already redacted
        cred = m["cred"].rstrip()
        return m.start("cred"), m.start("cred") + len(cred), m.start("cred") + len(cred)
    if word == '"auth"':
        m = _AUTH_MEMBER.match(text, end)
        if m is None or not is_basic_credentials(m["cred"]):
            return None
        return m.start("cred"), m.end("cred"), m.end()
    if word == "identified":
        m = _IDENTIFIED_BY.match(text, end)
        return None if m is None else (m.start("sq"), m.end("sq"), m.end())
    if word in CJK_NAMES:
        return cjk_value(text, end, CJK_NAMES[word])
    end = judged_end(text, start, end)
    name = name_ending(text, start, end)
    if _EXPANDED.match(text, end) and text[name_start(text, start) - 2 : start].startswith("${"):
        return None  # ``${DB_PASSWORD:?required}``: the shell's message when it is unset
    needed = min_chars(name)
    if needed is None and name.lower() == "key" and spaced_key(text, start):
        needed = MIN_SECRET_CHARS  # "API key: …", "the access key is …" (a bare key is code)
    if needed is None and name.lower() == "pwd" and text[start - 1 : start] in _PAIR_SEPARATORS:
        needed = 1  # ODBC's ``;Pwd=secret``, a query's ``&pwd=…`` (a bare PWD is a folder)
    if needed is None and name == "pwd" and _QUOTED_NEXT.match(text, end) is not None:
        needed = 1  # MongoDB's ``createUser({user: "app", pwd: "…"})``: a quoted literal
    if needed is None:
        held = key_named_value(text, start) if text.startswith(_KEY_NAMED, end) else None
        return None if held is None else _held_span(text, held, name, MIN_SECRET_CHARS)
    if opens_element(text, start, end):
        xml = _XML_VALUE.match(text, end)
        inner = xml["xml"].rstrip() if xml else ""
        if xml and not inner.startswith(REDACTED) and len(inner) >= needed:
            if not value_fits(name, inner):
                return None
            return xml.start("xml"), xml.start("xml") + len(inner), xml.end()
        return None
    # a shaped name's value is read so far only: each of a run of them (``aPat=aPat=…``) would
    # read to the run's end, and a value past the reach is no secret of its shape
    reach = min(len(text), end + SHAPED_REACH) if shaped_name(name) else len(text)
    m = (
        paired_value(text, start, end)
        or _ANNOTATED.match(text, end, reach)
        or declared_value(text, name_start(text, start), end)  # before ``:`` takes ``::=``
        or _ASSIGNED.match(text, end, reach)
        or next_line_value(text, name_start(text, start), end)
        or env_value(text, name_start(text, start), end)
    )
    if m is None and name_ending(text, start, end).startswith("--"):
        m = flag_value(text, start, end)  # a command line's ``--password X``
    if m is None and needed == 1:
        m = _QUOTED_AFTER.match(text, end)
        if m is None and _PASSWORD_CALLS.fullmatch(name.rpartition(".")[2].lower()):
            m = _QUOTED_ARGUMENT.match(text, end)  # MySQL's ``= PASSWORD('…')``
        back = max(0, start - 300)  # ``login`` found first: the pattern's ``\b`` tries each place
        if m is None and "login" in text[back:start] and _NETRC_LOGIN.search(text, back, start):
            m = _NETRC_VALUE.match(text, end)  # "login and password are …" holds no digit
            m = m if m is not None and LOOKS_SET.search(m["bare"]) else None
    if m is None:
        m = table_row(text, name_start(text, start), end, needed)
    if m is None:
        said = said_value(text, end, needed)
        return said if said is None or value_fits(name, text[said[0] : said[1]]) else None
    return _held_span(text, m, name, needed) if m else None


def _held_span(text: str, m: re.Match[str], name: str, needed: int) -> tuple[int, int, int] | None:
    """The span of the value ``m`` holds after the secret name ``name`` (``needed``: its shortest
    value), and where the scan goes on; None when it is no secret."""
    groups = m.groupdict()
    group = next(g for g in VALUE_GROUPS if groups.get(g) is not None)
    value: str = m[group]
    if group == "bare" and value == "{":
        # an object opens (``"db_password": {…}``, a schema's ``password: { type: String }``):
        # no value of its own; its fields are judged in their turn (``redact_objects``)
        return m.end(), m.end(), m.end()
    if (
        group == "bare"
        and _BLOCK_SCALAR.fullmatch(value)
        and ":" in text[m.start() : m.start(group)]
        and _LINE_END.match(text, m.end())
    ):
        return block_span(text, m.start(), m.end())  # YAML's ``password: |`` and its lines
    # a value that starts redacted was a key or a URL's password: ``token:[REDACTED]@host``
    if value.startswith(REDACTED) or len(value) < needed or not value_fits(name, value):
        return None
    if group == "bare" and names_where_kept(text, m.start(group), m.end(group)):
        return None  # ``token = os.environ['GITHUB_TOKEN']``: code, not the token
    if _no_secret(text, m, group):
        # ``password: str``, ``token: <sensitive>``, ``api_key: "{{ … }}"``: read past it, but
        # for a command's output, whose words are read in their turn (``$(echo …)``)
        at = m.end() if not value.startswith(_SUBSTITUTED) else m.start(group)
        return at, at, at
    return m.start(group), m.end(group), m.end()


# YAML's block scalar indicator (``|``, ``>-``, ``|2+``): the value is on the lines below
_BLOCK_SCALAR = re.compile(r"[|>](?:[+-]?[1-9]?|[1-9][+-])")
_LINE_END = re.compile(r"[ \t]*+(?:#[^\r\n]*+)?(?:\r?\n|\Z)")
_KEY_NAMED = ("Name", "name", "_name", "_Name")  # ``keyName``, ``key_name``
_SUBSTITUTED = ("$(", "`")


def _no_secret(text: str, m: re.Match[str], group: str) -> bool:
    """Whether the value ``m[group]`` stands where a secret would without being one: a reference
    to where it is kept, a placeholder, or (after a colon) a type annotation or a YAML tag."""
    value, bare = m[group], group == "bare"
    if names_a_source(value, bare) or is_placeholder(value, bare):
        return True
    if not bare and "{" in value and _interpolating(text, m.start(group)):
        return True  # ``f"{settings.DB_PASSWORD}"``, C#'s ``$"Bearer {token}"``: names it
    if bare and _PLAN_PLACEHOLDER.match(text, m.start(group)) is not None:
        return True  # ``password = (sensitive value)``: the bare value is cut at its blank
    if not bare or "=" in text[m.start() : m.start(group)]:
        return False
    return declares(value, text[m.end(group) : m.end(group) + 1])


def _interpolating(text: str, start: int) -> bool:
    """Whether the quoted value at ``start`` is an f-string's or C#'s ``$"…"`` (its quote maybe
    escaped, inside JSON)."""
    at = start - 1  # the quote
    while at > 0 and text[at - 1] == "\\":
        at -= 1
    prefix = text[max(0, at - 2) : at]
    return prefix[-1:] in ("f", "F", "$") or (
        prefix[-1:] in ("r", "R", "@") and prefix[-2:-1] in ("f", "F", "$")
    )


# What Terraform's plan shows for a value it hides or does not know yet
_PLAN_PLACEHOLDER = re.compile(r"\((?:sensitive(?: value)?|known after apply)\)(?![^\s,;])")
# A parameter expansion's operator that prints or substitutes, not a default: ``${NAME:?msg}``
_EXPANDED = re.compile(r":?[?+]")


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by REDACTED (overlapping spans as one)."""
    if not spans:
        return text
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[str] = []
    done = 0
    for start, end in merged:
        out += [text[done:start], REDACTED]
        done = end
    out.append(text[done:])
    return "".join(out)


def _triggers(text: str) -> list[tuple[int, int]]:
    """Where the trigger words are, in order."""
    low = text.lower()
    if len(low) != len(text):
        found = [m.span() for m in _TRIGGER.finditer(text)]
        return [(s, e) for s, e in found if low[s:e] not in _LAST_WORDS or _ends_name(text, s, e)]
    spans = []
    for word in _TRIGGER_WORDS:
        tails = _TRIGGER_TAILS.get(word, ())
        last = word in _LAST_WORDS
        at = low.find(word)
        while at >= 0:
            end = at + len(word)
            end += next((len(t) for t in tails if low.startswith(t, end)), 0)
            if not last or _ends_name(text, at, end):
                spans.append((at, end))
            at = low.find(word, end)
    spans.sort()
    return spans


def redact_after_triggers(text: str) -> str:
    """Passwords on command lines (again after the values, which may hold a command's name or a
    ``;`` between two commands); values after secret names and auth schemes, in one pass; then
    hex runs near secret names (measured after the values went: a second pass finds the same)."""
    commands = names_a_command(text)
    text = redact_flags(text) if commands else text
    triggers = _triggers(text)
    spans: list[tuple[int, int]] = []
    pos = 0
    for start, end in triggers:
        if start < pos:
            continue  # inside a value already redacted, or a name already judged whole
        found = _value_span(text, start, end)
        if found is not None:
            if found[0] < found[1]:  # else no secret, and the scan goes on past a value
                spans.append(found[:2])
            pos = found[2]
        elif text[start:end].lower() not in _OWN_WORDS:
            pos = name_end(text, end)  # the identifier's other trigger words: judged with it
    if spans:
        text = _replace(text, spans)
        text = redact_flags(text) if commands else text
        triggers = _triggers(text)
    seen: set[int] = set()
    hexes: list[tuple[int, int]] = []
    begin = ends = -1  # the identifier last read: its words share its start (read once)
    for start, end in triggers:
        if start >= ends:
            begin, ends = name_start(text, start), name_end(text, end)
        hexes += hex_spans(text, begin, end, seen)
    return _replace(text, hexes)
