"""Values that say where a secret is kept, not the secret, for ``rules.redact``: code that
reads one (``os.environ['GITHUB_TOKEN']``, ``os.getenv("HF_TOKEN")``, ``getpass.getpass()``,
``input("pw: ")``, ``process.env.OPENAI_API_KEY``, ``settings.SECRET_KEY``) and a shell's
variable named as a secret (``$DB_PASSWORD``, ``${API_KEY:-}``). Redacted, the code shown to the
model (the working set's blocks, a replayed command) read ``token = [REDACTED]'GITHUB_TOKEN']``,
which is neither the code nor a secret. A bare value only: a quoted one is a literal. Also
(``names_a_source``) a command's output or a template's placeholder, quoted or not, and what
stands where a secret would without being one (``is_placeholder``: ``null``, ``<sensitive>``,
``****``; ``declares``: a type annotation, a YAML tag)."""

from __future__ import annotations

import re

from rules.redact_names import is_secret_name
from rules.redact_shapes import KEY_KINDS

_CHAIN = r"[A-Za-z_]\w{0,63}(?:\.[A-Za-z_]\w{0,63}){0,7}"
# a call or an index whose argument is quoted (the bare value stops at the quote)
_OPENS = re.compile(rf"{_CHAIN}[(\[]")
_CALLED = re.compile(rf"{_CHAIN}\(\)")  # a call with no argument: getpass.getpass()
_DOTTED = re.compile(rf"{_CHAIN}\.(?P<last>[A-Za-z_]\w{{0,63}})")
_SHELL = re.compile(
    r"\$(?:(?P<bare>[A-Za-z_]\w{0,63})|\{(?P<braced>[A-Za-z_]\w{0,63})(?:[:?+\-=][^}]{0,64})?\})"
)


# Code computing a value: a call given a name or nothing (``hash_key = self.hash_key(name)``,
# ``token = token_generator.make_token(user)``, ``password = models.CharField(_(…``, the value
# cut at its quote or comma), maybe a tuple's first item (``lookup_key = (_make_id(receiver),
# …``); or a tuple of names (``related_key = (app_label, …``) cut at its comma
_COMPUTED = re.compile(rf"\(?{_CHAIN}\((?:{_CHAIN}\(?)?\)*+[\]}}]*+")
_TUPLE = re.compile(rf"\({_CHAIN}")
_CUT = ("'", '"', ",", "\\")  # where a bare value is cut inside a call


def names_where_kept(text: str, start: int, end: int) -> bool:
    """Whether the bare value ``text[start:end]`` is code reading a secret or a shell variable
    named as one, or code computing a value, not a secret."""
    if _CALLED.fullmatch(text, start, end):
        return True
    if text[start - 1 : start] in (" ", "\t"):  # code's ``x = f(y)`` (an env file's has no blank)
        computed = _COMPUTED.fullmatch(text, start, end)
        if computed is not None and (text[end - 1] in ")]}" or text[end : end + 1] in _CUT):
            return True  # closed, or cut at its argument's quote or its next one
        if _TUPLE.fullmatch(text, start, end) and text[end : end + 1] == ",":
            return True
    if _OPENS.fullmatch(text, start, end):  # its argument quoted (escaped, in JSON, too)
        after = text[end : end + 9].lstrip("\\")
        return after[:1] in ("'", '"')
    dotted = _DOTTED.fullmatch(text, start, end)
    if dotted is not None:
        return is_secret_name(dotted["last"])
    shell = _SHELL.fullmatch(text, start, end)
    return shell is not None and is_secret_name(shell["bare"] or shell["braced"])


# A command's output (``$(cat /run/secrets/db)``, ``$(gcloud auth print-access-token)``, a
# backquoted one) or a template's or a CI's placeholder (``{{ .Values.apiKey }}``, ``${{
# secrets.PAT }}``, ERB's ``<%= … %>``): where the secret comes from, not the secret. A
# backquoted command has a blank in it (a command and its arguments): Markdown backquotes one
# word, and a secret written so (``password: `Xy7pQ2zk9` ``) is the secret.
_SOURCE = re.compile(
    r"\$\([^()\r\n]{1,256}\)|`(?=[^`\r\n]{0,255}[ \t])[^`\r\n]{1,256}`"
    r"|\$?\{\{[^{}\r\n]{1,256}\}\}|<%=?[^%\r\n]{1,256}%>"
)
# how such a source starts: a bare value is cut at its first blank (``$(cat``, ``{{``)
_SOURCE_START = ("$(", "`", "{{", "${{", "<%")


def names_a_source(value: str, bare: bool = False) -> bool:
    """Whether ``value`` is a reference to where a secret is kept rather than the secret: a
    command's output, a template's placeholder, or a shell variable named as a secret
    (``"${DB_PASSWORD}"``, which compose files and shell lines quote); ``bare``: the value was
    cut at a blank, so its start is enough."""
    if _SOURCE.fullmatch(value) is not None:
        return True
    # cut at a blank, a backquoted command lacks its closing quote (``\`cat``); one word
    # backquoted whole is Markdown's
    if bare and value.startswith(_SOURCE_START) and not (value[0] == "`" and value[-1] == "`"):
        return True
    shell = _SHELL.fullmatch(value)
    return shell is not None and is_secret_name(shell["bare"] or shell["braced"])


# What a secret's name is given when no secret is there: YAML's and JSON's null and booleans, a
# placeholder in angle brackets (Terraform's ``<sensitive>``, ``<your-token>``) or in words
# (``your-api-key-here``: ``_FILLER``), a mask (``****``,
# ``gho_****…``, ``sk-…****abcd``, ``AKIA****``: before it a key's kind (``KEY_KINDS``) and
# at most 12 characters, or at most 4 characters; 4 after). A value shown in part before its mask
# (``hunter2*****``, ``correct-horse-****``) is the secret's beginning, and goes.
_UNSET = frozenset({"null", "none", "nil", "undefined", "true", "false", "~"})
_PLACEHOLDER = re.compile(r"<[A-Za-z][\w .\-]{0,62}>")
# A README's or a template's filler, words with no digit: ``your-api-key-here``, ``YOUR_TOKEN``,
# ``yourApiKey``, ``paste-token-here``, and a run of x (``xxxx-xxxx``). A real secret holds a
# digit or a sign, or is no such phrase; ``changeme`` is a default password in use, and goes.
_FILLER = re.compile(
    r"(?:[Yy]our|YOUR)(?:[-_.]|(?=[A-Z]))[A-Za-z]{1,24}+(?:[-_.][A-Za-z]{1,24}+){0,6}+"
    r"|(?:[A-Za-z]{1,24}+[-_.]){1,6}+(?:here|HERE)"
    r"|(?:[xX]{4,64}+[-_.]?){1,8}+"
    # a test's or an example's value that says so, in words (``test-secret-key``, ``dummy_token``,
    # ``django_tests_secret_key``, ``fake``): ``test1234`` holds a digit, and goes
    r"|(?:[A-Za-z]{1,24}+[-_]){0,6}(?i:test|tests|dummy|fake|example|sample|mock|insecure)"
    r"(?:[-_][A-Za-z]{1,24}+){0,6}+"
    # a format's placeholder (``'Change password: %s'``, ``{}``), or markup's closing tag
    # (``<label>Password:</label>``)
    r"|%[sdr]|%\([\w.]{1,32}+\)[sdr]|\{[\w.]{0,32}+\}|</[\w:\-]{1,32}+>.{0,64}+"
)
_MASK = re.compile(
    rf"(?:{KEY_KINDS}[\w\-.…]{{0,12}}|[^*•●]{{0,4}})[*•●]{{4,}}[^*•●]{{0,4}}"
)


def is_placeholder(value: str, bare: bool) -> bool:
    """Whether ``value`` stands where a secret would (unset, masked or a placeholder); ``bare``:
    it was not quoted (a quoted ``"null"`` is a string)."""
    if bare and value.lower() in _UNSET:
        return True
    if _FILLER.fullmatch(value) is not None:
        return True
    return _PLACEHOLDER.fullmatch(value) is not None or (
        ("*" in value or "•" in value or "●" in value) and _MASK.fullmatch(value) is not None
    )


# A type annotation after a name and a colon (``password: str``, ``api_key: Optional[str]``,
# ``token: Option<String>``, ``secret: SecretStr``): code declaring a field, not its value.
_TYPE = re.compile(
    r"[&*]?(?:str|string|String|bytes|int|number|bool|boolean|Any|any|object|char|Text|text"
    r"|SecretStr|SecretBytes|SecretString|Secret|None|undefined)(?:\[\])?\??"
    r"|(?:typing\.)?(?:Optional|Option|Union|List|Maybe|Nullable|Annotated|Sequence|Box|Vec)"
    r"[\[<][\w\[\]<>&*.| ,]{1,128}"
)
# a YAML tag before its operand (CloudFormation's ``!Ref DbPassword``, Home Assistant's ``!secret
# http_password``, Ansible's ``!vault |``): a function of what follows, not a value
_YAML_TAG = re.compile(r"![A-Za-z][\w:.\-]{0,31}")


def declares(value: str, after: str) -> bool:
    """Whether the bare ``value`` after a name and a colon is a type annotation or a YAML tag
    (``after``: the text following the value)."""
    if _YAML_TAG.fullmatch(value) is not None:
        return after[:1] in (" ", "\t")
    return _TYPE.fullmatch(value.rstrip(")]},;=")) is not None
