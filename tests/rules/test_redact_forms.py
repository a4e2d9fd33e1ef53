"""Secrets in the forms a plain ``NAME=value`` net misses: a subscript or a setter's arguments,
a name given as another field's value (Kubernetes env lists, ``{"name":…, "value":…}``, .NET
``<add key value>``, CloudFormation parameters), a secret store's command line, a name whose
trigger word is not its last word, a token as a URL's user, newer vendors' key shapes, and a
secret as a JSON object's key. Each form's lookalikes in ordinary code stay, and a text dense in
secret names is redacted in bounded time."""

from __future__ import annotations

import pytest

from rules.redact import REDACTED, redact, redact_text
from tests.support.cpu_clock import cpu_timer

SECRET = "Zq8vT2mW9xLk4pR7"  # 16 characters: long enough for a key or token name


FORMS = {
    # a subscript, or a setter's two arguments
    "subscript": f'os.environ["OPENAI_API_KEY"] = "{SECRET}"',
    "subscript-sq": f"config['password'] = '{SECRET}'",
    "ruby-env": f'ENV["DB_PASSWORD"]="{SECRET}"',
    "setenv": f'os.Setenv("DB_PASSWORD", "{SECRET}")',
    "setdefault": f"os.environ.setdefault('GITHUB_TOKEN', '{SECRET}')",
    "setitem": f"localStorage.setItem('auth_token', '{SECRET}')",
    "putenv": f'putenv("API_SECRET", "{SECRET}");',
    # a secret name given as a field's value, then the object's value field
    "k8s": f"env:\n  - name: DB_PASSWORD\n    value: {SECRET}\n  - name: PORT\n    value: '80'",
    "json": f'{{"name": "API_TOKEN", "value": "{SECRET}"}}',
    "json-typed": f'[{{"Name": "db_password", "Type": "String", "Value": "{SECRET}"}}]',
    "dotnet": f'<add key="ApiSecret" value="{SECRET}" />',
    "cloudformation": f"ParameterKey=DbPassword,ParameterValue={SECRET}",
    "hcl": f'{{ name = "STRIPE_SECRET_KEY"\n  value = "{SECRET}" }}',
    "flags": f"--name=db-password --value={SECRET}",
    # a secret store set from a command line
    "ssm": f"aws ssm put-parameter --name /prod/db --value {SECRET} --type SecureString",
    "ssm-attached": f"aws ssm put-parameter --name /prod/db --value='{SECRET}'",
    "keyvault": f"az keyvault secret set --vault-name v --name db --value {SECRET}",
    "gh-body": f"gh secret set DEPLOY_HOOK --body {SECRET}",
    "gh-b": f'gh secret set DEPLOY_HOOK -b "{SECRET}" --repo o/r',
    "sshpass": f"SSHPASS={SECRET} sshpass -e ssh deploy@host",
}


@pytest.mark.parametrize("text", list(FORMS.values()), ids=list(FORMS))
def test_each_form_loses_the_value(text: str) -> None:
    out = redact_text(text)
    assert SECRET not in out and REDACTED in out
    if "PORT" in text:
        assert "value: '80'" in out  # the next item of the list is not the secret's


@pytest.mark.parametrize(
    "text",
    [
        f"SECRET_KEY_BASE={SECRET}",
        f"DB_TOKEN_SECRET={SECRET}",
        f'"api_key_secret" = "{SECRET}"',
    ],
)
def test_a_name_is_judged_by_its_last_word(text: str) -> None:
    assert SECRET not in redact_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "hashed_files[hash_key] = hashed_name",
        "request.session[CSRF_SESSION_KEY] = request.META['CSRF_COOKIE']",
        "PASSWORD_RESET_TIMEOUT=60*60*24*3",
        "DEFAULT_PASSWORD_LIST_PATH = Path(__file__).resolve().parent",
        "fields = ['password', 'email']",
        "t('password', 'Password')",
        "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db\n      key: pw",
        "git clone https://github.com/octo/repo.git",
        "ssh://git@example.com:2222/repo.git",
    ],
)
def test_lookalikes_in_code_stay(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "secret",
    [
        "GOCSPX-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9s",  # Google OAuth client secret
        "sbp_" + "0123456789abcdef" * 2 + "01234567",  # Supabase
        "HRKU-" + "AAbCdEf0123456789_abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJK",  # Heroku
        "dp.pt." + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4C",  # Doppler
        "nfp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",  # Netlify
        "fo1_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4C",  # Fly.io
        "dckr_pat_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9",  # Docker Hub
        "pscale_tkn_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",  # PlanetScale
        "rnd_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1",  # Render
        "nvapi-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7Ij8Kl9Mn0Op",  # NVIDIA
        "tvly-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv",  # Tavily
        "glc_" + "eyJvIjoiMTIzNDU2IiwibiI6InN0YWNrIiwiayI6IjEyMyJ9",  # Grafana Cloud
    ],
)
def test_newer_vendors_key_shapes(secret: str) -> None:
    text = f"export X={secret} # set"
    out = redact_text(text)
    assert secret not in out and out == f"export X={REDACTED} # set"


@pytest.mark.parametrize(
    "url",
    [
        "https://0123456789abcdef0123456789abcdef01234567@github.com/o/r.git",
        "https://Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4@gitlab.example.com/o/r.git",
    ],
)
def test_a_token_given_as_a_urls_user_is_redacted(url: str) -> None:
    out = redact_text(f"git clone {url}")
    assert out.startswith(f"git clone https://{REDACTED}@") and out.endswith("/o/r.git")


def test_a_secret_as_an_objects_key_is_redacted() -> None:
    key = "sk-ant-api03-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"
    out = redact({"usage": {key: {"requests": 3}}, "short": 1, "password": "x"})
    assert key not in str(out)
    assert out == {"usage": {REDACTED: {"requests": 3}}, "short": 1, "password": REDACTED}


@pytest.mark.parametrize(
    "block",
    [
        *("Key", "key ", "password ", "--password ", "key=a ", "token token=", "basic "),
        *("- name: DB_PASSWORD\n  ", 'setenv("password", ', 'x["password"]', "name=password "),
        "gh secret set X --body ",
    ],
)
def test_a_text_dense_in_secret_names_is_redacted_in_bounded_time(block: str) -> None:
    """64 KiB of one trigger word, repeated: ``KeyKeyKey…`` took 1.3 s, each word walking back
    over the identifier it is part of; a name is now judged once, whole. (0.1–0.15 s on a quiet
    machine; the bound leaves room for two test workers sharing two cores.)"""
    text = (block * (64 * 1024 // len(block) + 1))[: 64 * 1024]
    with cpu_timer() as took:
        redact_text(text)
    assert took.seconds < 0.5
