"""Things beyond files a command makes on the system and in the cloud, read from its words or
what it printed: system packages, users, groups and database roles, tmux and screen sessions,
systemd services, git remotes, releases, cloud instances, functions, topics and buckets, and
exported environment variables. A rule with ``requires`` applies only with one of its options
given, one with ``max_args`` only with at most that many words that are no option."""

from __future__ import annotations

import pytest

from rules.activity.entity_commands import command_entities
from rules.activity.entity_pack import load_entity_pack
from rules.activity.shell_parse import load_verbs

PACK = load_entity_pack()
GCE = "https://www.googleapis.com/compute/v1/projects/acme/zones/europe-west1-b/instances"


def _made(command: str, output: str = "") -> set[tuple[str, str, str]]:
    facts = command_entities(PACK, load_verbs(), command, output, "/w", {})
    return {(m.kind, m.id, m.action) for m in facts.made}


@pytest.mark.parametrize(
    ("command", "output", "want"),
    [
        (
            "apt-get update -qq && apt-get install -y redis-server",
            "",
            {("package", "redis-server", "create")},
        ),
        ("sudo apt install -y libpq-dev=16.1-1", "", {("package", "libpq-dev", "create")}),
        ("apt-get purge -y nginx", "", {("package", "nginx", "delete")}),
        (
            "brew install jq node@20",
            "",
            {("package", "jq", "create"), ("package", "node", "create")},
        ),
        ("apk add --no-cache -t .build gcc", "", {("package", "gcc", "create")}),
        ("useradd -m -s /bin/bash deploy", "", {("user", "deploy", "create")}),
        ("adduser --disabled-password --gecos '' ci", "", {("user", "ci", "create")}),
        ("adduser deploy docker", "", set()),  # a user put in a group: nothing made
        (
            "groupadd ci && useradd -m -g ci runner",
            "",
            {("group", "ci", "create"), ("user", "runner", "create")},
        ),
        (
            "psql -c \"CREATE USER app_ro WITH PASSWORD 'x'\"",
            "CREATE ROLE",
            {("user", "app_ro", "create"), ("role", "app_ro", "create")},
        ),
        # a drop ends a user or a role of the name (MySQL's DROP USER drops roles too)
        (
            "mysql -e \"DROP USER IF EXISTS 'old'@'%'\"",
            "",
            {("user", "old", "delete"), ("role", "old", "delete")},
        ),
        ('psql -c "CREATE ROLE readers NOLOGIN"', "CREATE ROLE", {("role", "readers", "create")}),
        (
            "aws iam create-role --role-name deploy --assume-role-policy-document file://t.json",
            "",
            {("role", "deploy", "create")},
        ),
        (
            "kubectl create clusterrole viewer --verb=get --resource=pods",
            "",
            {("role", "viewer", "create")},
        ),
        ("kubectl create sa builder -n ci", "", {("service_account", "builder", "create")}),
        (
            "gcloud iam service-accounts create ci-runner --display-name CI",
            "",
            {("service_account", "ci-runner", "create")},
        ),
        ("tmux new-session -d -s dev 'npm run dev'", "", {("session", "dev", "create")}),
        ("tmux kill-session -t dev", "", {("session", "dev", "delete")}),
        ("screen -dmS worker python worker.py", "", {("session", "worker", "create")}),
        ("screen -S worker -X quit", "", {("session", "worker", "delete")}),
        ("screen -S worker -X stuff 'reload'", "", set()),  # a command sent: it goes on
        ("docker network rm backend-net", "", {("network", "backend-net", "delete")}),
        ("docker volume rm -f pgdata", "", {("volume", "pgdata", "delete")}),
        (
            "gcloud storage buckets create gs://acme-ml --location=us-central1",
            "",
            {("bucket", "acme-ml", "create")},
        ),
        (
            "az group create --name rg-demo --location eastus",
            "",
            {("resource_group", "rg-demo", "create")},
        ),
        ("kind create cluster", 'Creating cluster "kind" ...', {("cluster", "kind", "create")}),
        ("k3d cluster create dev --agents 2", "", {("cluster", "dev", "create")}),
        ("eksctl delete cluster --name prod", "", {("cluster", "prod", "delete")}),
        ("sudo systemctl enable --now myapp.service", "", {("service", "myapp", "modify")}),
        ("systemctl stop myapp", "", {("service", "myapp", "modify")}),
        (
            "git remote add upstream https://github.com/o/r.git",
            "",
            {("remote", "upstream", "create")},
        ),
        ("git remote remove upstream", "", {("remote", "upstream", "delete")}),
        (
            "helm install cache bitnami/redis -n cache --create-namespace",
            "",
            {("release", "cache", "create")},
        ),
        ("helm upgrade --install web ./chart -f values.yaml", "", {("release", "web", "create")}),
        ("helm upgrade web ./chart", "", set()),  # `requires`: no --install, nothing made
        ("helm uninstall web -n apps", "", {("release", "web", "delete")}),
        (
            "aws ec2 run-instances --image-id ami-1 --count 1",
            '{\n  "Instances": [\n    {\n      "InstanceId": "i-0a1b2c3d4e5f67890",',
            {("instance", "i-0a1b2c3d4e5f67890", "create")},
        ),
        (
            "aws ec2 terminate-instances --instance-ids i-0a1b2c3d --region eu-west-1",
            "",
            {("instance", "i-0a1b2c3d", "delete")},
        ),
        (
            "gcloud compute instances create b1 --zone=europe-west1-b",
            f"Created [{GCE}/b1].",
            {("instance", "b1", "create")},
        ),
        (
            "gcloud compute instances delete b1 --quiet",
            f"Deleted [{GCE}/b1].",
            {("instance", "b1", "delete")},
        ),
        (
            "gcloud pubsub topics create orders",
            "Created topic [projects/acme/topics/orders].",
            {("topic", "orders", "create")},
        ),
        (
            "aws lambda create-function --function-name thumbs --runtime python3.12",
            "{}",
            {("function", "thumbs", "create")},
        ),
        ("aws s3api create-bucket --bucket logs-eu", "{}", {("bucket", "logs-eu", "create")}),
        (
            "export DATABASE_URL=postgres://localhost/dev",
            "",
            {("env_var", "DATABASE_URL", "create")},
        ),
        ("export PATH", "", set()),  # exported as it was: nothing set
        ("unset DATABASE_URL", "", {("env_var", "DATABASE_URL", "delete")}),
    ],
)
def test_system_and_cloud_things_made_and_ended(
    command: str, output: str, want: set[tuple[str, str, str]]
) -> None:
    assert _made(command, output) == want


def test_a_gcloud_line_naming_no_known_collection_makes_nothing() -> None:
    assert _made("gcloud beta widgets create w", "Created [projects/acme/widgets/w].") == set()


@pytest.mark.parametrize(
    ("command", "want"),
    [
        (
            "(crontab -l 2>/dev/null; echo '0 3 * * * /bin/backup.sh') | crontab -",
            {("cron_job", "0 3 * * * /bin/backup.sh", "create")},
        ),
        (
            'crontab -l | { cat; echo "@daily /srv/app/rotate.sh"; } | crontab -',
            {("cron_job", "@daily /srv/app/rotate.sh", "create")},
        ),
        ("echo '0 3 * * * /bin/backup.sh' > jobs.txt", set()),  # not installed
        ("(crontab -l; echo 'MAILTO=ops@example.com') | crontab -", set()),  # no cron line
        ("crontab -l", set()),
    ],
)
def test_a_cron_line_piped_into_crontab_is_a_cron_job(
    command: str, want: set[tuple[str, str, str]]
) -> None:
    assert _made(command) == want


_ALL_CRON = ("cron_job", "*", "delete")  # every cron job known ends


@pytest.mark.parametrize(
    ("command", "want"),
    [
        ("crontab -r", {_ALL_CRON}),
        ("crontab -ri", {_ALL_CRON}),
        ("crontab -u deploy jobs.txt", {_ALL_CRON}),  # the table replaced by a file's
        ("crontab -l | grep -v poll.sh | crontab -", {_ALL_CRON}),  # filtered: what is left?
        (
            "echo '*/5 * * * * /bin/ping.sh' | crontab -",  # no `crontab -l`: replaced
            {_ALL_CRON, ("cron_job", "*/5 * * * * /bin/ping.sh", "create")},
        ),
        (
            "(crontab -l | sed '/prune/d'; echo '0 1 * * * /bin/a.sh') | crontab -",
            {_ALL_CRON, ("cron_job", "0 1 * * * /bin/a.sh", "create")},
        ),
        ("crontab -l", set()),
        ("crontab -u r -l", set()),  # a user named r lists
        ("crontab -e", set()),
        ("sudo crontab -u www-data -r", {_ALL_CRON}),
    ],
)
def test_a_crontab_removed_or_replaced_ends_every_cron_job(
    command: str, want: set[tuple[str, str, str]]
) -> None:
    assert _made(command) == want


def test_postgres_role_programs_behind_sudo_and_an_exposed_service() -> None:
    """`sudo -u postgres createdb shop` made nothing: the prefix's option was read as the
    program; PostgreSQL's `createuser` and `dropuser` were not read at all."""
    assert _made("sudo -u postgres createdb shop") == {("database", "shop", "create")}
    assert _made("sudo -u postgres createuser --no-superuser -c 5 reporter") == {
        ("user", "reporter", "create")
    }
    assert _made("dropuser -U admin reporter") == {("user", "reporter", "delete")}
    exposed = _made("kubectl expose deployment hello --port 80", "service/hello exposed")
    assert exposed == {("service", "hello", "create")}


def test_tmux_kill_server_and_a_merge_deleting_its_branch() -> None:
    assert _made("tmux kill-server") == {("session", "*", "delete")}
    merged = (
        "✓ Merged pull request #9 (x)\n✓ Deleted local branch fix/a and switched to branch main"
    )
    assert ("branch", "fix/a", "delete") in _made("gh pr merge 9 --delete-branch", merged)
    assert not any(k == "branch" for k, _, _ in _made("gh pr merge 9", "✓ Merged pull request #9"))


@pytest.mark.parametrize(
    ("command", "want"),
    [
        # an option's value is no name
        ("docker network create --driver bridge app-net", {("network", "app-net", "create")}),
        ("docker network create -d overlay --subnet 10.9.0.0/24 m", {("network", "m", "create")}),
        ("docker volume create --driver local pgdata", {("volume", "pgdata", "create")}),
        ("docker volume create --name uploads", {("volume", "uploads", "create")}),
        (
            "gcloud compute instances create runner-1 --provisioning-model SPOT --zone us-east1-b",
            {("instance", "runner-1", "create")},
        ),
        (
            "gcloud compute instances delete runner-1 --delete-disks all",
            {("instance", "runner-1", "delete")},
        ),
        ("conda install -y --file requirements.txt numpy", {("package", "numpy", "create")}),
        # a simulation, a download or a function's unset makes and ends nothing
        ("apt-get install --dry-run nginx", set()),
        ("sudo apt-get install -s postgresql-15", set()),
        ("apt install --download-only curl", set()),
        ("conda install --dry-run scipy", set()),
        ("unset -f deploy", set()),
    ],
)
def test_option_values_and_simulations_name_nothing(
    command: str, want: set[tuple[str, str, str]]
) -> None:
    assert _made(command) == want


@pytest.mark.parametrize(
    ("command", "output", "want"),
    [
        ('psql -c "CREATE USER MAPPING FOR app SERVER films"', "CREATE USER MAPPING", set()),
        ('psql -c "-- create role later\nSELECT 1"', "", set()),
        # a shell's `--` ends options: what follows it is no comment
        (
            'git checkout -- db/schema.sql && psql -c "CREATE ROLE audit LOGIN"',
            "CREATE ROLE",
            {("role", "audit", "create"), ("user", "audit", "create")},
        ),
        (
            'psql --dbname app -c "CREATE ROLE reporter LOGIN; -- then grant\nGRANT x TO y"',
            "CREATE ROLE",
            {("role", "reporter", "create"), ("user", "reporter", "create")},
        ),
    ],
)
def test_sql_comments_and_user_mappings_make_no_user(
    command: str, output: str, want: set[tuple[str, str, str]]
) -> None:
    assert _made(command, output) == want
