"""Redaction judged on a third set of text: secrets printed alone by the command that read them
from a store, servers' own config directives (Redis, wpa_supplicant, WordPress), and the
placeholders and Markdown beside them that must reach the store as they were."""

from __future__ import annotations

import pytest

from tests.support.redaction_cases import (
    case,
    held_out_tests,
)

PW = "Zq8#vLp2mWx4"
SALT = "x7#Lq!m2@Vz$9pR&kT^wB*3nF(eH)jY+uC-sG=dN[aK]"

# (text, what must not survive, what must)
SECRETS = [
    case(
        "redis.conf and redis-cli",
        f"# requirepass foobared\nrequirepass {PW}\nmasterauth  '{PW}x'\nport 6379\n"
        f"127.0.0.1:6379> AUTH {PW}y\nOK\n127.0.0.1:6379> AUTH default {PW}z\nOK\n"
        f"127.0.0.1:6379> CONFIG SET requirepass \"{PW}w\"\nOK\n",
        [PW],
        ["port 6379", "AUTH default", "CONFIG SET requirepass"],
    ),
    case(
        "wpa_supplicant.conf",
        f'network={{\n    ssid="home"\n    psk="{PW}"\n    key_mgmt=WPA-PSK\n}}\n'
        "network={\n    ssid=\"lab\"\n"
        "    psk=8f2a6c1b9d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c\n}\n",
        [PW, "8f2a6c1b9d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"],
        ['ssid="home"', "key_mgmt=WPA-PSK"],
    ),
    case(
        "wp-config.php's salts",
        f"define( 'AUTH_SALT',        '{SALT}1' );\n"
        f"define( 'SECURE_AUTH_SALT', '{SALT}2' );\n"
        f"define( 'LOGGED_IN_SALT',   '{SALT}3' );\n"
        f"define( 'NONCE_SALT',       '{SALT}4' );\n"
        f"SECURITY_PASSWORD_SALT = '{SALT}5'\n",
        [SALT],
        ["define( 'NONCE_SALT',"],
    ),
    case(
        "a Markdown hard break after a redacted value",
        f"Your password is {PW}\\\nRestart the server afterwards.\n"
        f"password: {PW}\\\n---\\\nnext step\n",
        [PW],
        ["Restart the server afterwards.", "---\\\nnext step"],
    ),
    case(
        "an OpenVPN profile",
        "client\nremote vpn.example.com 1194\n<auth-user-pass>\nalice\n"
        f"{PW}\n</auth-user-pass>\n<tls-crypt>\n-----BEGIN OpenVPN Static key V1-----\n"
        "6acef03f62675b4b1bbd03e53b187727\n423a8e1b9f0d7c6a5b4e3d2c1f0a9b8c\n"
        "-----END OpenVPN Static key V1-----\n</tls-crypt>\n",
        [PW, "6acef03f62675b4b1bbd03e53b187727", "423a8e1b9f0d7c6a5b4e3d2c1f0a9b8c"],
        ["remote vpn.example.com 1194", "<tls-crypt>", "</auth-user-pass>"],
    ),
    case(
        "a Google refresh token as firebase login:ci prints it",
        "✔  Success! Use this token to login on a CI server:\n\n"
        "1//0gZq8vLp2mWx4abcdefghijklmnopqrstuvwxyzABCDEF-_12\n",
        ["1//0gZq8vLp2mWx4abcdefghijklmnopqrstuvwxyzABCDEF-_12"],
    ),
    case(
        "logins given a user and a password in order",
        f"smtp.login('bot@example.com', '{PW}')\nftp.login(\"deploy\", \"{PW}\")\n"
        f"imaplib.IMAP4_SSL('imap.x').login(user, '{PW}')\n"
        f"ldap_bind($conn, 'cn=admin,dc=example,dc=com', '{PW}');\n"
        f"conn.simple_bind_s('cn=admin,dc=x', '{PW}')\n"
        f"db = pymysql.connect('db', 'root', '{PW}', 'app')\n",
        [PW],
        ["smtp.login('bot@example.com', ", "'cn=admin,dc=example,dc=com'", "'app')"],
    ),
    case(
        "a password given to what sets or checks it",
        f"mysql> SET PASSWORD FOR 'root'@'localhost' = PASSWORD('{PW}');\n"
        f"SELECT OLD_PASSWORD(\"{PW}\");\nuser.set_password('{PW}')\n"
        f"assert user.check_password('{PW}')\n",
        [PW],
        ["SET PASSWORD FOR 'root'@'localhost' = PASSWORD('", "user.set_password('"],
    ),
    case(
        "an answer's Markdown labels",
        f"**Password:** {PW}a\n- **DB password**: {PW}b\n__Password:__ {PW}c\n"
        f"*Password:* {PW}d\n`password`: {PW}e\n**Token**: abcd1234efgh5678\n",
        [PW, "abcd1234efgh5678"],
        ["**Password:** ", "- **DB password**: ", "__Password:__ ", "`password`: "],
    ),
]

# (text, what must stay)
LOOKALIKES = [
    case(
        "placeholders in a README's setup",
        "export OPENAI_API_KEY=your-api-key-here\n"
        'api_key = "YOUR_API_KEY"\n'
        "Authorization: Bearer YOUR_TOKEN\n"
        "GITHUB_TOKEN=xxxxxxxxxxxxxxxxxxxx\n"
        '"password": "your_password"\n'
        "export HF_TOKEN=paste-your-token-here\n",
        [],
    ),
    case(
        "a test's settings that say they are one",
        "settings.configure(SECRET_KEY='test-secret-key', DEBUG=True)\n"
        'SECRET_KEY = "django_tests_secret_key"\n'
        "User.objects.create_user(username='test', password='test')\n"
        "API_TOKEN=dummy-token\n",
        [],
    ),
    case(
        "code computing a secret-named value",
        "        hash_key = self.hash_key(cleaned_name)\n"
        "        token = token_generator.make_token(user)\n"
        "    password = models.CharField(_('password'), max_length=128)\n"
        "            lookup_key = (_make_id(receiver), _make_id(sender))\n"
        "        related_key = (app_label, self.new_name_lower)\n"
        "        request_csrf_token = request.META.get(settings.CSRF_HEADER_NAME, '')\n"
        "    return {'csrf_token': SimpleLazyObject(_get_val)}\n",
        [],
    ),
    case(
        "a form's labels and a salt that names a namespace",
        "<label for=\"id_password\">Password:</label>\n"
        "'title': _('Change password: %s') % escape(user.get_username())\n"
        "msg = 'token: {}'.format(t)\n"
        '    key_salt = "django.contrib.auth.tokens.PasswordResetTokenGenerator"\n',
        [],
    ),
    case(
        "strings encoded in base64 that hold a colon",
        'base64.b64encode(b"data:image/png")\nbase64.b64encode(b"http://example.com/a")\n'
        'b64encode(b"key:value").decode()\nbtoa("a:b")\nbase64.b64encode(b"Time: 12:30")\n'
        'base64.b64encode(b\'<svg xmlns:xlink="x">\')\n',
        [],
    ),
    case(
        "Redis and Wi-Fi named in prose and code",
        "Set requirepass in redis.conf, then restart; masterauth must match it.\n"
        "> AUTH is required before any command\n"
        "key_mgmt=WPA-PSK\nThe salt is stored beside the hash: salt = os.urandom(16)\n"
        "psk_identity_hint: server1\n",
        [],
    ),
]

# adversarial inputs, each redacted in linear time
ADVERSARIAL: list[object] = [
    pytest.param("api_key=your-" + "a-" * 50_000, id="a placeholder's words repeated"),
    pytest.param("password=" + "x" * 100_000 + "1", id="an x-run that is not all x"),
    pytest.param("requirepass " * 8_000, id="directives in a row"),
    pytest.param("password=" + "ab-" * 40_000 + "test", id="words before a test's word"),
    pytest.param("token=" + "a." * 60_000 + "(", id="a call's long chain"),
    pytest.param("token=(" * 30_000, id="tuples opened in a row"),
    pytest.param("x.login('" + "a" * 127 + "', " * 5_000, id="logins with no password"),
    pytest.param("ldap_bind(" * 20_000, id="binds opened in a row"),
    pytest.param("<auth-user-pass>" + "a" * 2_000 + "\n" * 50_000, id="a VPN login not closed"),
    pytest.param(("a" * 60 + "> AUTH a b c\n") * 2_000, id="prompts not a prompt's"),
    pytest.param("x> AUTH " + "u " * 50_000, id="an AUTH with many words"),
]


test_secrets_go, test_lookalikes_stay, test_linear = held_out_tests(
    SECRETS, LOOKALIKES, ADVERSARIAL
)
