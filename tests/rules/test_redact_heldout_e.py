"""Redaction judged on a fifth set of text: configuration files of application frameworks and
deployment tools (Ansible, Spring, Rails, Django, PHP, .NET, Go), the command lines of stores'
and certificates' clients, vendors' DSNs and webhooks, and HTTP exchanges, as an agent's tools
print them, beside the hashes, ids, placeholders, references and identifiers that fill the same
output and must stay."""

from __future__ import annotations

from tests.support.redaction_cases import b64, case, held_out_tests

PW = "Qm7#vR2pLz9x"
TOK = "f3Kq9Lm2Xp7Rt4Vw8Yz1Bc6Dn5"
HEX32 = "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e"
SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
UUID = "8d3e2f1a-5b7c-4e9d-a1f0-2c6b8e4d7a93"

SECRETS = [
    case(
        "an Ansible inventory's connection variables",
        "[web]\n10.0.0.5 ansible_user=deploy ansible_password=" + PW + "a\n"
        "10.0.0.6 ansible_ssh_pass=" + PW + "b ansible_become_pass=" + PW + "c\n",
        [PW],
        ["10.0.0.5 ansible_user=deploy", "[web]"],
    ),
    case(
        "Ansible group vars in YAML",
        "---\nansible_become_password: " + PW + "a\nvault_db_password: '" + PW + "b'\n"
        "db_host: db.internal\n",
        [PW],
        ["db_host: db.internal"],
    ),
    case(
        "a Spring application.properties",
        "spring.datasource.url=jdbc:postgresql://db:5432/app\n"
        "spring.datasource.username=app\nspring.datasource.password=" + PW + "\n"
        "spring.mail.password=" + PW + "m\nserver.port=8080\n",
        [PW],
        ["spring.datasource.username=app", "server.port=8080", "jdbc:postgresql://db:5432/app"],
    ),
    case(
        "a Spring application.yml",
        "spring:\n  datasource:\n    url: jdbc:mysql://db:3306/app\n    username: root\n"
        "    password: " + PW + "\n  security:\n    oauth2:\n      client:\n        registration:\n"
        "          github:\n            client-id: Iv1.8a61f9b3a7aba766\n"
        "            client-secret: " + HEX32 + "\n",
        [PW, HEX32],
        ["client-id: Iv1.8a61f9b3a7aba766", "username: root"],
    ),
    case(
        "a Rails database.yml",
        "production:\n  adapter: postgresql\n  database: app_production\n  username: app\n"
        "  password: " + PW + "\n  host: db.internal\n",
        [PW],
        ["adapter: postgresql", "host: db.internal"],
    ),
    case(
        "Rails credentials shown decrypted",
        "secret_key_base: " + SHA + HEX32 + "\naws:\n  access_key_id: AKIAQ3EGRYBZ7EXAMPLF\n"
        "  secret_access_key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        [SHA + HEX32, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
        ["aws:"],
    ),
    case(
        "a Django settings module",
        "DEBUG = False\nSECRET_KEY = 'django-insecure-7h#k2$w!q9z@x3v8n^m5b&p1r6t0y4u'\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.postgresql', 'NAME': 'app',"
        " 'USER': 'app', 'PASSWORD': '" + PW + "', 'HOST': 'db'}}\n"
        "EMAIL_HOST_PASSWORD = '" + PW + "e'\n",
        ["django-insecure-7h#k2$w!q9z@x3v8n^m5b&p1r6t0y4u", PW],
        ["'ENGINE': 'django.db.backends.postgresql'", "DEBUG = False"],
    ),
    case(
        "a .env with export and quotes",
        'export DATABASE_PASSWORD="' + PW + "\"\nexport STRIPE_SECRET_KEY='sk_live_"
        '51HqLyjWDarjtT1zdp7dcXYZ0123456789abcdefABCDEF\'\nexport REDIS_HOST="cache"\n',
        [PW, "51HqLyjWDarjtT1zdp7dc"],
        ['export REDIS_HOST="cache"'],
    ),
    case(
        "keytool's store and key passwords",
        "keytool -genkeypair -alias app -keystore app.jks -storepass "
        + PW
        + "s -keypass "
        + PW
        + "k -dname CN=app\nkeytool -importcert -file ca.crt -keystore truststore.jks "
        "-storepass:env STORE_PASS -noprompt\n",
        [PW],
        ["-alias app -keystore app.jks", "-storepass:env STORE_PASS"],
    ),
    case(
        "openssl's pass phrases",
        "openssl pkcs12 -export -in cert.pem -inkey key.pem -out app.p12 -passout pass:"
        + PW
        + "\nopenssl rsa -in enc.key -out dec.key -passin pass:"
        + PW
        + "2\n",
        [PW],
        ["-in cert.pem -inkey key.pem", "-out dec.key"],
    ),
    case(
        "htpasswd given the password",
        "htpasswd -b -c /etc/nginx/.htpasswd admin "
        + PW
        + "\nhtpasswd -bB users.txt bob "
        + PW
        + "2\n",
        [PW],
        ["/etc/nginx/.htpasswd admin"],
    ),
    case(
        "a wp-config.php",
        "define( 'DB_NAME', 'wordpress' );\ndefine( 'DB_USER', 'wp' );\n"
        "define( 'DB_PASSWORD', '" + PW + "' );\n"
        "define( 'AUTH_KEY',         'Xk#9p@L2!vQ7z&M4r^T1w*Y6b$N3c%H8' );\n"
        "define( 'SECURE_AUTH_SALT', 'a0B^c1D&e2F*g3H(i4J)k5L-m6N_o7P+' );\n",
        [PW, "Xk#9p@L2!vQ7z&M4r^T1w*Y6b$N3c%H8", "a0B^c1D&e2F*g3H(i4J)k5L-m6N_o7P+"],
        ["define( 'DB_NAME', 'wordpress' );", "define( 'DB_USER', 'wp' );"],
    ),
    case(
        "a PHP config array",
        "return [\n    'host' => '127.0.0.1',\n    'username' => 'forge',\n"
        "    'password' => '" + PW + "',\n    'api_secret' => \"" + TOK + '",\n];\n',
        [PW, TOK],
        ["'host' => '127.0.0.1'", "'username' => 'forge'"],
    ),
    case(
        "Go literals",
        'cfg := Config{\n\tHost:     "db",\n\tPassword: "'
        + PW
        + '",\n\tAPIKey:   "'
        + TOK
        + '",\n}\nconst webhookSecret = "'
        + TOK
        + 'w"\n',
        [PW, TOK],
        ['Host:     "db"'],
    ),
    case(
        "C# connection strings",
        'var cs = "Server=tcp:sql.example.net,1433;Database=app;User ID=sa;Password='
        + PW
        + ';Encrypt=True;";\n"ConnectionStrings": {"Default": "Host=db;Username=app;Password='
        + PW
        + '2;Database=app"}\n',
        [PW],
        ["Server=tcp:sql.example.net,1433;Database=app;User ID=sa;", "Encrypt=True"],
    ),
    case(
        "JDBC URLs with the password in the query",
        "jdbc:mysql://db:3306/app?user=app&password=" + PW + "&useSSL=false\n"
        "jdbc:sqlserver://sql:1433;databaseName=app;user=sa;password=" + PW + "2;\n",
        [PW],
        ["&useSSL=false", "databaseName=app;user=sa;"],
    ),
    case(
        "SMTP and AMQP URLs",
        "EMAIL_URL=smtp://apikey:" + PW + "@smtp.sendgrid.net:587\n"
        "CELERY_BROKER_URL=amqps://worker:" + PW + "2@mq.example.com:5671/vhost\n",
        [PW],
        ["@smtp.sendgrid.net:587", "@mq.example.com:5671/vhost"],
    ),
    case(
        "an LDAP bind",
        "ldapsearch -x -H ldap://ldap.example.com -D 'cn=admin,dc=example,dc=com' -w "
        + PW
        + " -b 'dc=example,dc=com' '(uid=bob)'\n",
        [PW],
        ["-D 'cn=admin,dc=example,dc=com'", "(uid=bob)"],
    ),
    case(
        "redis-cli and mongosh",
        "redis-cli -h cache -p 6379 -a " + PW + " --no-auth-warning PING\n"
        "mongosh 'mongodb://db:27017/admin' --username root --password " + PW + "2\n",
        [PW],
        ["-h cache -p 6379", "--username root"],
    ),
    case(
        "an Azure storage connection string and a SAS",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCD"
        "XJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core."
        "windows.net\nBlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature="
        "sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&sig=a1B2c3D4e5F6g7H8i9J0k1L2m3"
        "N4o5P6q7R8s9T0u%3D\n",
        ["Eby8vdM02xNOcqFlqUwJPLlmEtlCD", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u"],
        ["AccountName=acct", "EndpointSuffix=core.windows.net"],
    ),
    case(
        "an AWS credentials file",
        "[default]\naws_access_key_id = AKIAQ3EGRYBZ7EXAMPLF\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n"
        "[prod]\nregion = eu-west-1\naws_session_token = IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVh"
        "c3QtMSJHMEUCIQDexample1234567890abcdef\n",
        ["wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "IQoJb3JpZ2luX2VjEJr"],
        ["region = eu-west-1", "[prod]"],
    ),
    case(
        "vendors' tokens in environment lines",
        "TWILIO_AUTH_TOKEN=" + HEX32 + "\nSHOPIFY_ACCESS_TOKEN=shpat_" + HEX32 + "\n"
        "DD_API_KEY=" + HEX32.upper().lower()[::-1] + "\nDD_APP_KEY=" + "9c" + HEX32 + "ab12cd\n",
        [HEX32, "shpat_", HEX32[::-1], "9c" + HEX32],
        ["TWILIO_AUTH_TOKEN=", "DD_API_KEY="],
    ),
    case(
        "a Sentry DSN",
        "SENTRY_DSN=https://" + HEX32 + "@o123456.ingest.sentry.io/4504123456789\n"
        'sentry_sdk.init(dsn="https://' + HEX32[::-1] + '@o1.ingest.us.sentry.io/42")\n',
        [HEX32, HEX32[::-1]],
        ["@o123456.ingest.sentry.io/4504123456789", "sentry_sdk.init(dsn="],
    ),
    case(
        "a Bearer token in a curl command",
        "curl -sS -H 'Authorization: Bearer " + TOK + "' -H 'Accept: application/json' "
        'https://api.example.com/v2/items\ncurl -H "X-Api-Key: ' + TOK + 'k" https://x.io\n',
        [TOK],
        ["-H 'Accept: application/json'", "https://api.example.com/v2/items"],
    ),
    case(
        "cookies in an HTTP exchange",
        "< HTTP/1.1 302 Found\n< Set-Cookie: session=" + TOK + "; Path=/; HttpOnly; Secure\n"
        "> Cookie: csrftoken=" + HEX32 + "; sessionid=" + TOK + "2\n",
        [TOK, HEX32],
        ["Path=/; HttpOnly; Secure", "302 Found"],
    ),
    case(
        "basic auth in a header and a client's output",
        "> Authorization: Basic " + b64("admin:" + PW) + "\n"
        'proxy_set_header Authorization "Basic ' + b64("svc:" + PW + "2") + '";\n',
        [b64("admin:" + PW), b64("svc:" + PW + "2")],
        ["proxy_set_header Authorization"],
    ),
    case(
        "a Kafka JAAS config",
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="svc" password="' + PW + '";\nsasl.mechanism=PLAIN\n',
        [PW],
        ["sasl.mechanism=PLAIN", 'username="svc"'],
    ),
    case(
        "a docker-compose environment list",
        "services:\n  db:\n    image: postgres:16\n    environment:\n"
        "      - POSTGRES_PASSWORD=" + PW + "\n      - POSTGRES_USER=app\n"
        "  api:\n    environment:\n      JWT_SECRET: " + TOK + "\n",
        [PW, TOK],
        ["POSTGRES_USER=app", "image: postgres:16"],
    ),
    case(
        "a Terraform tfvars",
        'db_password    = "'
        + PW
        + '"\ngithub_token   = "ghp_'
        + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
        + '"\nregion         = "us-east-1"\n',
        [PW, "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"],
        ['region         = "us-east-1"'],
    ),
    case(
        "a Java properties file with a datasource and mail",
        "db.password=" + PW + "\nmail.smtp.password = " + PW + "2\njwt.secret=" + TOK + "\n"
        "db.url=jdbc:postgresql://db/app\n",
        [PW, TOK],
        ["db.url=jdbc:postgresql://db/app"],
    ),
    case(
        "a Helm install setting secrets",
        "helm upgrade --install app ./chart --set postgresql.auth.password="
        + PW
        + " --set image.tag=1.4.2 --set-string api.token="
        + TOK
        + "\n",
        [PW, TOK],
        ["--set image.tag=1.4.2", "./chart"],
    ),
    case(
        "a psql line with PGPASSWORD and a URI",
        "PGPASSWORD='" + PW + "' psql -h db -U app -c 'select 1'\n"
        'psql "postgresql://app:' + PW + '2@db:5432/app?sslmode=require"\n',
        [PW],
        ["psql -h db -U app -c 'select 1'", "@db:5432/app?sslmode=require"],
    ),
    case(
        "a Slack webhook and a Discord one",
        "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T024BE7LD/B01ABCDEF12/"
        "aB3dE5fG7hJ9kL1mN3pQ5rS7\n",
        ["aB3dE5fG7hJ9kL1mN3pQ5rS7"],
        ["SLACK_WEBHOOK_URL="],
    ),
    case(
        "a Digest authorization seen in curl -v",
        '> GET /api HTTP/1.1\n> Authorization: Digest username="admin", realm="api", '
        'nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", uri="/api", '
        'response="' + HEX32 + '", qop=auth, nc=00000001, cnonce="0a4f113b"\n> Host: x\n',
        [HEX32],
        ["> GET /api HTTP/1.1", "> Host: x"],
    ),
    case(
        "Rust constants and a Go typed constant",
        'const API_KEY: &str = "' + TOK + '";\nstatic DB_PASSWORD: &\'static str = "' + PW + '";\n'
        'const apiKey string = "' + TOK + 'g"\nvar dbPassword string = "' + PW + 'g"\n',
        [TOK, PW],
        ["const API_KEY: &str = ", "const apiKey string = "],
    ),
    case(
        "a C header's defines",
        '#define API_TOKEN "' + TOK + '"\n#define WIFI_PASSWORD "' + PW + '"\n#define PORT 8080\n',
        [TOK, PW],
        ["#define PORT 8080", "#define API_TOKEN "],
    ),
    case(
        "a Makefile's conditional and appended assignments",
        "DB_PASSWORD ?= " + PW + "\nAPI_TOKEN += " + TOK + "\nREGISTRY_PASSWORD ::= " + PW + "2\n",
        [PW, TOK],
        ["DB_PASSWORD ?= ", "API_TOKEN += "],
    ),
    case(
        "a password piped into a secret store's command",
        "printf '" + PW + "' | gh secret set DB_PASSWORD --repo o/r\n"
        "echo -n " + PW + "2 | gcloud secrets create db-pass --data-file=-\n"
        "echo " + PW + "3 | wrangler secret put DB_PASSWORD\n"
        "echo '" + PW + "4' | docker secret create db_pass -\n",
        [PW],
        ["| gh secret set DB_PASSWORD --repo o/r", "| docker secret create db_pass -"],
    ),
    case(
        "a password given as a here-string",
        'chpasswd <<< "bob:' + PW + "\"\nsudo -S apt-get update <<< '" + PW + "2'\n"
        "passwd --stdin bob <<< " + PW + "3\n",
        [PW],
        ["sudo -S apt-get update <<< ", "chpasswd <<< "],
    ),
    case(
        "package managers' repository credentials",
        "poetry config http-basic.private bob " + PW + "\n"
        "composer config --global http-basic.repo.example.com bob " + PW + "2\n"
        "poetry config pypi-token.pypi pypi-" + TOK + "\ncargo login " + TOK + "c\n",
        [PW, TOK],
        ["poetry config http-basic.private bob", "http-basic.repo.example.com bob"],
    ),
    case(
        "a .NET user secret and a macOS keychain item",
        'dotnet user-secrets set "Db:Password" "' + PW + '"\n'
        "security add-generic-password -a bob -s svc -w " + PW + "2\n",
        [PW],
        ['dotnet user-secrets set "Db:Password"', "-a bob -s svc -w"],
    ),
    case(
        "an archive's and a Wi-Fi's passwords",
        "unrar x -p" + PW + " backup.rar\nnmcli dev wifi connect HomeNet password " + PW + "2\n"
        "nmcli con modify HomeNet wifi-sec.psk " + PW + "3\n",
        [PW],
        ["backup.rar", "nmcli dev wifi connect HomeNet password"],
    ),
    case(
        "SNMP communities and v3 pass phrases",
        "snmpwalk -v2c -c " + PW + " 10.0.0.1 system\n"
        "snmpget -v3 -u admin -l authPriv -a SHA -A " + PW + "2 -x AES -X " + PW + "3 10.0.0.1\n",
        [PW],
        ["snmpwalk -v2c -c", "10.0.0.1 system", "-x AES"],
    ),
    case(
        "command-line logins given their token",
        "wandb login "
        + HEX32
        + "00aa11bb\nngrok config add-authtoken 2Nd8PqR4sT6vW8yZ0aB3cD5eF7g_"
        + TOK
        + "\nngrok authtoken "
        + TOK
        + "n\nsnyk auth "
        + UUID
        + "\ncf auth admin "
        + PW
        + "\ncodecov -t "
        + TOK
        + "c -f coverage.xml\n",
        [HEX32, TOK, UUID, PW],
        ["ngrok config add-authtoken", "cf auth admin", "-f coverage.xml"],
    ),
    case(
        "a secret's name and its value set from a command line",
        "netlify env:set API_SECRET "
        + TOK
        + "\ndoppler secrets set DB_PASSWORD "
        + PW
        + " --project app\nsetx API_TOKEN "
        + TOK
        + "x\n",
        [TOK, PW],
        ["netlify env:set API_SECRET", "--project app", "setx API_TOKEN"],
    ),
    case(
        "a secret created from its name and value flags",
        "eas secret:create --scope project --name API_KEY --value " + TOK + " --type string\n"
        "aws ssm put-parameter --name DB_PASSWORD --type SecureString --value '" + PW + "'\n",
        [TOK, PW],
        ["--name API_KEY --value", "--type string"],
    ),
    case(
        "a password given to what changes or stores it",
        'db.changeUserPassword("app", "'
        + PW
        + '")\nkeyring.set_password("svc", "bob", "'
        + PW
        + '2")\nuser.setPassword("'
        + PW
        + '3");\n',
        [PW],
        ['db.changeUserPassword("app", ', 'keyring.set_password("svc", "bob", '],
    ),
    case(
        "an expect script answering a password's prompt",
        'spawn ssh admin@10.0.0.5\nexpect "assword:"\nsend "' + PW + '\\r"\n'
        'expect -exact "Enter passphrase: " { send -- "' + PW + '2\\n" }\ninteract\n',
        [PW],
        ["spawn ssh admin@10.0.0.5", 'expect "assword:"', "interact"],
    ),
]

LOOKALIKES = [
    case("a lock file's hashes", f'"integrity": "sha512-{b64("x" * 48)}",\n"sha256": "{SHA}"', []),
    case("a UUID and a commit", f"request_id={UUID} commit {HEX32[:7]} build {SHA[:40]}", []),
    case(
        "code that reads a password",
        "password_hash = make_password(raw_password)\nif not check_password(password, user.pw):\n",
        [],
    ),
    case("a Spring property reference", "spring.datasource.password=${DB_PASSWORD}\n", []),
    case("an Ansible vault reference", 'ansible_become_pass: "{{ vault_become_pass }}"\n', []),
    case("an Ansible vault block header", "db_password: !vault |\n", []),
    case("a Rails credentials reference", "password: <%= ENV['DATABASE_PASSWORD'] %>\n", []),
    case(
        "a Django setting read from the environment",
        "SECRET_KEY = os.environ['DJANGO_SECRET_KEY']\n",
        [],
    ),
    case("a PHP env() call", "'password' => env('DB_PASSWORD', ''),\n", []),
    case("a .env example", "DATABASE_PASSWORD=\nSTRIPE_SECRET_KEY=your-stripe-secret-key\n", []),
    case("keytool asking", "keytool -list -keystore app.jks\nEnter keystore password:\n", []),
    case("openssl reading an env", "openssl rsa -in enc.key -passin env:KEY_PASS\n", []),
    case(
        "a Go struct's fields", 'type Config struct {\n\tPassword string `json:"password"`\n}\n', []
    ),
    case("a C# property", "public string Password { get; set; }\n", []),
    case(
        "a docs sentence",
        "Set the password in the admin panel; tokens expire after 24 hours.\n",
        [],
    ),
    case("a YAML schema", "password:\n  type: string\n  minLength: 12\n", []),
    case("a YAML key with an empty value", "password:\nusername: admin\n", []),
    case(
        "an OpenAPI security scheme",
        "securitySchemes:\n  bearerAuth:\n    type: http\n    scheme: bearer\n",
        [],
    ),
    case("a test's look-alike token", "token = 'test-token'\napi_key = 'dummy_api_key'\n", []),
    case(
        "a URL with a port and an @ in its path", "https://registry.npmjs.org:443/@types/node\n", []
    ),
    case(
        "a Git SSH remote", "git@github.com:org/repo.git\nssh://git@gitlab.com:2222/o/r.git\n", []
    ),
    case("a cookie's name in code", "raw_cookie = request.cookies.get('session')\n", []),
    case("a max-tokens setting", "max_tokens: 4096\nprompt_tokens=1234\n", []),
    case(
        "a WWW-Authenticate challenge",
        'WWW-Authenticate: Digest realm="api", qop="auth", nonce="7ypf/xlj9XXwfDPEoM4"\n',
        [],
    ),
    case(
        "echo into an ordinary file",
        "echo 'node_modules/' >> .gitignore\necho $HOME > out.txt\n",
        [],
    ),
    case(
        "Rust and Go declarations with no secret",
        'const API_KEY_HEADER: &str = "x-api-key";\nvar tokenType string = "bearer"\n',
        [],
    ),
    case("C defines of names", '#define TOKEN_MAX 64\n#define PASSWORD_PROMPT "Password: "\n', []),
    case("Makefile references", "DB_PASSWORD ?= $(shell cat .pw)\nAPI_TOKEN ?= ${API_TOKEN}\n", []),
    case("a pipe into grep", "echo $out | grep secret\necho hello | gh secret list\n", []),
    case(
        "here-strings of variables",
        'chpasswd <<< "bob:$NEW_PW"\nsudo -S true <<< "$SUDO_PASS"\n',
        [],
    ),
    case(
        "package managers' settings", "poetry config virtualenvs.in-project true\ncargo login\n", []
    ),
    case("macOS keychain lookup", "security find-generic-password -s svc -w\n", []),
    case("nmcli listing", "nmcli dev wifi list\nnmcli -f wifi-sec.psk con show HomeNet\n", []),
    case("SNMP with a default port", "snmpwalk -v2c -c public 10.0.0.1\n", ["snmpwalk -v2c -c"]),
    case("logins with no token", "wandb login\nngrok config check\nsnyk auth\ncf auth\n", []),
    case("a setting of no secret", "netlify env:set NODE_VERSION 20\nsetx PATH C:\\bin\n", []),
    case(
        "a docstring's arguments and types",
        "    Args:\n        password:\n            str\n        token:\n            Optional\n"
        "- password:\n    required\n",
        [],
    ),
    case(
        "code and data echoed into files named for secrets",
        "echo \"import os\" > password_utils.py\necho '{}' > secrets.json\n",
        [],
    ),
    case("prose with an equals sign", "the password field = 'abc' in the form\n", []),
    case(
        "a password asked for or checked from variables",
        'keyring.get_password("svc", "bob")\ncheck_password(raw, user.password)\n',
        [],
    ),
    case(
        "an expect script sending a variable or a command",
        'expect "Password:"\nsend "$env(PW)\\r"\nexpect "$ "\nsend "ls -la\\r"\n',
        [],
    ),
]

ADVERSARIAL = [
    'expect "password' + "x" * 60 + '" ' * 2000,
    "password:\n  " + "a" * 20000 + "\n",
    "password:\n" * 10000,
    "https://u:" + "a/" * 30000 + "@h",
    "https://u:" + "@a" * 30000 + "/x",
    "Authorization: Digest " + 'a="b", ' * 20000,
    "echo " + "x " * 3 + "> " + "pw" * 20000,
    "--password-file=<(echo " * 4000,
    "npmAuthIdent: " * 8000,
]

test_secrets_go, test_lookalikes_stay, test_linear = held_out_tests(
    SECRETS, LOOKALIKES, ADVERSARIAL
)
