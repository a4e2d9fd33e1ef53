"""The key shapes ``rules.redact`` replaces wherever they appear: tokens whose form alone says
secret (``sk-…``, ``ghp_…``, ``AKIA…``, ``dop_v1_…``, JWTs …), one pattern per provider.

Each pattern starts with its literal prefix, so ``re`` finds candidates with a fast scan, and checks
the boundary behind it with a fixed-width lookbehind (linear). The boundary keeps a prefix inside
an identifier from being taken for a key (``task-abcdefgh`` is no ``sk-``); a Stripe key may follow
a ``_`` (``build_sk_live_…``): ``sk_live_`` and ``rk_test_`` are no words' endings."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

REDACTED = "[REDACTED]"


def _boundary(prefix: str, rest: str, before: str = r"\w") -> re.Pattern[str]:
    """``\\b{prefix}{rest}`` with the literal first (found by a fast scan), the boundary checked
    behind it (fixed widths: linear): no character of class ``before`` (``\\w``), or the end of
    an escaped line break or tab (``\\n`` in a JSON string) or URL-encoded ``=`` / ``:``."""
    lit = re.escape(prefix)
    return re.compile(f"{lit}(?:(?<!{before}{lit})|(?<=\\\\[nrt]{lit})|(?<=%3[DdAa]{lit})){rest}")


# An AWS secret access key: a whole run of 40 base64 characters with both cases in it (a git SHA
# or a path of 40 has not). Bounded lookaheads: linear.
AWS_SECRET = (
    r"(?<![A-Za-z0-9/+=])(?=[0-9a-z/+]{0,39}[A-Z])(?=[0-9A-Z/+]{0,39}[a-z])"
    r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
# An access key id, and the secret printed up to 64 characters after it on its line (``aws iam
# create-access-key --output text``, the console's CSV), but not past another key id.
_AWS_KEY_ID = (
    r"[0-9A-Z]{16}\b"
    rf"(?:(?P<gap>(?:(?!A[KS]IA)[^\n]){{0,64}}?)(?P<secret>{AWS_SECRET}))?"
)


def _aws_key(m: re.Match[str]) -> str:
    return REDACTED if m["secret"] is None else REDACTED + m["gap"] + REDACTED


_STRIPE = r"(?:live|test)_[A-Za-z0-9]{16,}"
# A Twilio account SID (no secret), then its auth token within 64 characters on its line
_TWILIO_PAIR = (
    r"[0-9a-f]{32}(?![0-9A-Za-z])(?P<gap>[^\n]{1,64}?)(?<![0-9A-Za-z])[0-9a-f]{32}(?![0-9A-Za-z])"
)


def _twilio_pair(m: re.Match[str]) -> str:
    return m[0][: m.end("gap") - m.start()] + REDACTED


# A Discord bot token: the bot's id (digits) in base64, a timestamp, an HMAC. Found by its middle
# part between two dots (a literal starts the pattern: a fast scan), then its first part is read
# back and checked: it must decode to the 17 to 20 digits of an id.
_DISCORD_TAIL = re.compile(r"\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}(?![\w\-.])")
_DISCORD_HEAD = re.compile(r"(?<![\w\-.])[MNO][A-Za-z0-9_\-]{22,27}\Z")


def _redact_discord_bots(text: str) -> str:
    out: list[str] = []
    done = 0
    for tail in _DISCORD_TAIL.finditer(text):
        head = _DISCORD_HEAD.search(text, max(done, tail.start() - 28), tail.start())
        if head is None:
            continue
        part = head[0]
        try:
            decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        except (binascii.Error, ValueError):
            continue
        if decoded.isdigit() and 17 <= len(decoded) <= 20:
            out += [text[done : head.start()], REDACTED]
            done = tail.end()
    return "".join([*out, text[done:]]) if out else text


KEY_SHAPES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # OpenAI (sk-, sk-proj-), Anthropic, OpenRouter, DeepSeek, gateways: a digit or a capital
    # among the first characters, or 16 letters unbroken (a CSS class, ``sk-spinner-wave``,
    # ``--sk-color-primary``, has neither)
    (_boundary("sk-", r"(?=[a-z_\-]{0,32}[0-9A-Z]|[a-z]{16})[A-Za-z0-9_\-]{8,}"), REDACTED),
    # their longer prefixes say key even glued after a ``_`` (``resp_sk-proj-…``, ``KEY_sk-ant-…``)
    (_boundary("sk-", r"(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{20,}", "[A-Za-z0-9]"), REDACTED),
    (_boundary("sk_", _STRIPE, "[A-Za-z0-9]"), REDACTED),  # Stripe secret keys
    (_boundary("rk_", _STRIPE, "[A-Za-z0-9]"), REDACTED),  # Stripe restricted keys
    (_boundary("AKIA", _AWS_KEY_ID), _aws_key),  # AWS access key ids (long-term)
    (_boundary("ASIA", _AWS_KEY_ID), _aws_key),  # AWS access key ids (temporary)
    (_boundary("AIza", r"[0-9A-Za-z_\-]{30,}"), REDACTED),  # Google API keys
    (_boundary("ya29.", r"[0-9A-Za-z_\-]{20,}"), REDACTED),  # Google OAuth access tokens
    (_boundary("1//0", r"[0-9A-Za-z_\-]{30,}"), REDACTED),  # Google OAuth refresh tokens
    (_boundary("gh", r"[pousr]_[A-Za-z0-9]{30,}"), REDACTED),  # GitHub tokens
    (_boundary("github_pat_", r"[A-Za-z0-9_]{22,}"), REDACTED),  # GitHub fine-grained tokens
    (
        _boundary("gl", r"(?:pat|dt|ft|soat|rt|cbt|ptt|agent|oas|imt)-[A-Za-z0-9_\-]{20,}"),
        REDACTED,
    ),  # GitLab tokens
    (_boundary("xox", r"[abposre]-[A-Za-z0-9\-]{10,}"), REDACTED),  # Slack tokens
    (_boundary("xapp-", r"\d+-[A-Za-z0-9\-]{20,}"), REDACTED),  # Slack app-level tokens
    (_boundary("hooks.slack.com/services/", r"T\w+/B\w+/\w+"), REDACTED),  # Slack webhooks
    (_boundary("hf_", r"[A-Za-z0-9]{30,}"), REDACTED),  # Hugging Face tokens
    (_boundary("npm_", r"[A-Za-z0-9]{36}\b"), REDACTED),  # npm tokens
    (_boundary("pypi-AgE", r"[A-Za-z0-9_\-]{50,}"), REDACTED),  # PyPI upload tokens
    (_boundary("SG.", r"[\w\-]{22}\.[\w\-]{43}"), REDACTED),  # SendGrid keys
    (_boundary("sq0", r"(?:csp|atp)-[\w\-]{22,}"), REDACTED),  # Square secrets, access tokens
    (_boundary("SK", r"[0-9a-f]{32}\b"), REDACTED),  # Twilio API keys
    # DigitalOcean personal, OAuth and refresh tokens: 64 hex, no fewer
    (_boundary("do", r"[opr]_v1_[0-9a-f]{64}(?![0-9A-Za-z])"), REDACTED),
    # age secret keys (bech32, upper case), post-quantum ones too
    (_boundary("AGE-SECRET-KEY-", r"(?:PQ-)?1[02-9AC-HJ-NP-Z]{58,}"), REDACTED),
    (_boundary("hv", r"[sbr]\.[A-Za-z0-9_\-]{24,}"), REDACTED),  # HashiCorp Vault tokens
    # Vault's older service tokens: s. and 24 base62 characters, a digit and both cases among
    # them (a method call, ``s.getElementsByTagNameNS``, holds no digit)
    (
        _boundary(
            "s.",
            r"(?=[A-Za-z]{0,23}[0-9])(?=[0-9a-z]{0,23}[A-Z])(?=[0-9A-Z]{0,23}[a-z])"
            r"[A-Za-z0-9]{24}(?![\w.\-])",
            r"[\w.]",
        ),
        REDACTED,
    ),
    (_boundary("whsec_", r"[A-Za-z0-9+/=]{24,}"), REDACTED),  # Stripe and Svix webhook secrets
    (_boundary("gsk_", r"[A-Za-z0-9]{40,}"), REDACTED),  # Groq API keys
    (_boundary("xai-", r"[A-Za-z0-9]{60,}"), REDACTED),  # xAI API keys
    (_boundary("pplx-", r"[A-Za-z0-9]{40,}"), REDACTED),  # Perplexity API keys
    (_boundary("r8_", r"[A-Za-z0-9]{30,}"), REDACTED),  # Replicate API tokens
    (_boundary("ntn_", r"[A-Za-z0-9]{40,}"), REDACTED),  # Notion integration tokens
    (_boundary("secret_", r"[A-Za-z0-9]{43}\b"), REDACTED),  # Notion tokens (older)
    (_boundary("ATATT", r"[A-Za-z0-9_\-=]{100,}"), REDACTED),  # Atlassian API tokens
    (_boundary("PMAK-", r"[0-9a-f]{24}-[0-9a-f]{34}"), REDACTED),  # Postman API keys
    (_boundary("sntry", r"[su]_[A-Za-z0-9+/=_\-]{40,}"), REDACTED),  # Sentry auth tokens
    (_boundary("gls", r"a_[A-Za-z0-9]{32}_[0-9a-f]{8}"), REDACTED),  # Grafana service tokens
    # Mailgun API keys: 32 lower-case letters and digits (``key-3ax6xnjp…``, as Mailgun's own
    # documentation shows one), not hex alone; a digit among them
    (_boundary("key-", r"(?=[a-z]{0,31}[0-9])[0-9a-z]{32}\b"), REDACTED),
    (_boundary("/api/webhooks/", r"\d{5,30}/[A-Za-z0-9_\-]{40,}", r"[^\w]"), REDACTED),  # Discord
    (_boundary("dapi", r"[0-9a-f]{32}(?:-\d)?\b"), REDACTED),  # Databricks tokens
    (_boundary("shp", r"(?:at|ss|ca|pa)_[0-9a-fA-F]{32}\b"), REDACTED),  # Shopify tokens
    (_boundary("lin_api_", r"[A-Za-z0-9]{40}\b"), REDACTED),  # Linear API keys
    (_boundary(".atlasv1.", r"[A-Za-z0-9_\-]{60,}", r"[^\w]"), REDACTED),  # Terraform Cloud
    (_boundary("sig=", r"[A-Za-z0-9%+/]{30,}={0,2}"), REDACTED),  # Azure SAS signatures
    # a signed URL's signature: S3's SigV4 ``X-Amz-Signature=``, GCS's ``X-Goog-Signature=``,
    # CloudFront's ``&Signature=…&Key-Pair-Id=`` (a working credential until it expires)
    # (a query parameter only: ``sign(body, signature=SECRET_NAME)`` is code)
    (re.compile(r"(?<=[?&])(?:X-Amz-|X-Goog-)?[Ss]ignature=[A-Za-z0-9%+/=~_\-]{32,}"), REDACTED),
    (_boundary("GOCSPX-", r"[A-Za-z0-9_\-]{24,}"), REDACTED),  # Google OAuth client secrets
    (_boundary("sbp_", r"[0-9a-f]{40}\b"), REDACTED),  # Supabase access tokens
    (_boundary("HRKU-", r"[A-Za-z0-9_\-]{30,}"), REDACTED),  # Heroku API keys
    (_boundary("pul-", r"[0-9a-f]{40}\b"), REDACTED),  # Pulumi access tokens
    (_boundary("NRAK-", r"[A-Z0-9]{27}\b"), REDACTED),  # New Relic user API keys
    # AWS session tokens: base64 of their fixed first bytes, then hundreds more characters (``aws
    # sts`` prints them beside the access key id and secret, ``--output text`` with no name)
    (_boundary("IQoJb3JpZ2luX2Vj", r"[A-Za-z0-9+/=]{20,}"), REDACTED),
    (_boundary("FwoGZXIvYXdz", r"[A-Za-z0-9+/=]{20,}"), REDACTED),
    # Doppler tokens: personal, service, service account, CLI, SCIM, audit
    (_boundary("dp.", r"(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9_.\-]{40,}", r"[\w.]"), REDACTED),
    (_boundary("nfp_", r"[A-Za-z0-9]{36,}"), REDACTED),  # Netlify access tokens
    (_boundary("fo1_", r"[A-Za-z0-9_\-]{30,}"), REDACTED),  # Fly.io tokens
    (_boundary("fm", r"[12]_[A-Za-z0-9+/=_\-]{50,}"), REDACTED),  # Fly.io macaroons (FlyV1 fm2_)
    (_boundary("dckr_pat_", r"[A-Za-z0-9_\-]{27,}"), REDACTED),  # Docker Hub tokens
    (_boundary("pscale_", r"(?:tkn|pw|oauth)_[A-Za-z0-9_.\-]{32,}"), REDACTED),  # PlanetScale
    (_boundary("rnd_", r"[A-Za-z0-9]{32,}"), REDACTED),  # Render API keys
    (_boundary("nvapi-", r"[A-Za-z0-9_\-]{60,}"), REDACTED),  # NVIDIA API keys
    (_boundary("tvly-", r"[A-Za-z0-9_\-]{30,}"), REDACTED),  # Tavily API keys
    (_boundary("glc_", r"[A-Za-z0-9+/=_\-]{32,}"), REDACTED),  # Grafana Cloud tokens
    (_boundary("ops_", r"eyJ[A-Za-z0-9+/=_\-]{50,}"), REDACTED),  # 1Password service accounts
    # a Twilio auth token (32 hex) after its account's SID on a line: ``Client('AC…', '…')``
    (_boundary("AC", _TWILIO_PAIR), _twilio_pair),
    # Telegram bot tokens (the bot's id, then 33-35 characters from AA), in a bot API URL too
    (re.compile(r"(?<![0-9])[0-9]{6,12}:AA[A-Za-z0-9_\-]{31,33}(?![\w\-])"), REDACTED),
    # Oracle's JDBC URL holds its login: ``jdbc:oracle:thin:user/SECRET@host:1521:SID``
    (
        re.compile(
            r"jdbc:oracle:(?P<driver>thin|oci8?|kprb):(?P<user>[A-Za-z][\w$#]{0,127})/"
            r"(?!\[REDACTED\])[^@\s\"'\\/]{1,256}@"
        ),
        lambda m: f"jdbc:oracle:{m['driver']}:{m['user']}/{REDACTED}@",
    ),
    # JWTs. Not after a "-" either: each "-eyJ" of "-eyJa-eyJa…" (no dot) would rescan the run.
    (
        _boundary("eyJ", r"[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", r"[\w\-]"),
        REDACTED,
    ),
)


# A key's prefix at the very end of a text (an ellipsis may follow), with fewer characters after
# it than its shape needs: a key cut short by a clip before the text was redacted. Searched only
# in a text's last CUT_TAIL characters.
CUT_TAIL = 160
# the prefix, then a key's first characters (a digit among them: a word cut after a prefix has
# none); read also before a line continued with ``\`` (``rules.redact_continued``)
# the kinds of key a prefix says (a mask may show one: ``gho_****``)
KEY_KINDS = (
    r"(?:sk[-_]|rk_|AKIA|ASIA|AIza|ya29\.|gh[pousr]_|github_pat_|"
    r"gl(?:pat|dt|ft|soat|rt|cbt|ptt|agent|oas|imt)-|xox[abposre]-|xapp-|hf_|npm_|pypi-|SG\.|"
    r"sq0(?:csp|atp)-|do[opr]_v1_|hv[sbr]\.|whsec_|dapi|shp(?:at|ss|ca|pa)_|lin_api_|gsk_|"
    r"xai-|pplx-|r8_|ntn_|ATATT|PMAK-|sntry[su]_|glsa_|eyJ|GOCSPX-|sbp_|HRKU-|"
    r"dp\.(?:pt|st|sa|ct|scim|audit)\.|nfp_|fo1_|fm[12]_|dckr_pat_|pscale_|rnd_|nvapi-|"
    r"tvly-|glc_|ops_)"
)
CUT_KEY_START = (
    r"(?<![\w\-])" + KEY_KINDS + r"(?=[A-Za-z_\-.+/=]{0,12}[0-9])[A-Za-z0-9_\-.+/=]{6,159}"
)
_CUT_KEY = re.compile(CUT_KEY_START + r"(?:…|\.\.\.)?[ \t]*\Z")


# Azure AD (Entra) client secrets: three characters, a digit, "Q~", then 31-34 more. No literal
# starts it (a scan tries every position: 20 ms a MB), so it runs only on a text holding "Q~".
_AZURE_SECRET = re.compile(
    r"(?<![\w~.\-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}(?![\w~.\-])"
)


def redact_key_shapes(text: str) -> str:
    """``text`` with every key-shaped token replaced by REDACTED (an AWS key id's secret too),
    and a key's beginning left at its end by a cut."""
    for pattern, replacement in KEY_SHAPES:
        text = pattern.sub(replacement, text)
    if "Q~" in text:
        text = _AZURE_SECRET.sub(REDACTED, text)
    text = _redact_discord_bots(text)
    cut = _CUT_KEY.search(text, max(0, len(text) - CUT_TAIL))
    return text if cut is None else text[: cut.start()] + REDACTED
