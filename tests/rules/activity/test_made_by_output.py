"""Things a command made that its words alone do not say where: an archive (`tar czf out.tgz
src`, `zip -r out.zip src`), a temporary folder kept in a variable and echoed (`d=$(mktemp -d)
&& echo $d`), Terraform's resources (`… Creation complete after 2s [id=…]`), a MongoDB
shell's inserted documents (`insertedId: ObjectId('…')`, of the collection the command names)
and an instance id printed alone (`aws ec2 run-instances … --output text`)."""

from __future__ import annotations

import pytest

from rules.activity.entity_commands import command_entities
from rules.activity.entity_pack import load_entity_pack
from rules.activity.printed_paths import printed_effects
from rules.activity.shell_parse import Effect, analyse, load_verbs

PACK = load_entity_pack()


def _made(command: str, output: str = "") -> set[tuple[str, str, str]]:
    facts = command_entities(PACK, load_verbs(), command, output, "/w", {})
    return {(m.kind, m.id, m.action) for m in facts.made}


@pytest.mark.parametrize(
    ("command", "made"),
    [
        ("tar czf backup-q3.tar.gz src/ docs/", ["/w/backup-q3.tar.gz"]),
        ("tar -cJvf /srv/out/site.tar.xz -C public .", ["/srv/out/site.tar.xz"]),
        ("tar --create --gzip --file=dist.tgz dist", ["/w/dist.tgz"]),
        ("tar cvf snap.tar data", ["/w/snap.tar"]),
        ("zip -qr site.zip public", ["/w/site.zip"]),
        ("tar xzf vendor.tgz", []),  # extracted, not made
        ("tar -xjf vendor.tar.bz2 -C third_party", []),
        ("tar -tzf vendor.tgz", []),  # listed
        ("tar -czf - src | ssh host 'cat > x.tgz'", []),  # to standard output
    ],
)
def test_an_archiver_made_its_archive(command: str, made: list[str]) -> None:
    effects = analyse(command, "/w", load_verbs()).effects
    assert [e.path for e in effects if e.action == "create" and e.type == "file"] == made


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        (
            "scratch=$(mktemp -d) && echo $scratch",
            "/tmp/tmp.Qw3rTy8uIo\n",
            [Effect("create", "folder", "/tmp/tmp.Qw3rTy8uIo")],
        ),
        (
            'ls; OUT="$(mktemp -d -t run.XXXXXX)"; echo "${OUT}"',
            "/w/notes.md\n/tmp/run.a1B2c3\n",  # ls's line first: not mktemp's name
            [Effect("create", "folder", "/tmp/run.a1B2c3")],
        ),
        (
            "export LOG=$(mktemp); echo $LOG",
            "/tmp/tmp.0123456789\n",
            [Effect("create", "file", "/tmp/tmp.0123456789")],
        ),
        ("d=$(mktemp -d); echo $HOME", "/home/dev\n", []),  # another variable
        ("d=$(mktemp -u); echo $d", "/tmp/tmp.0123456789\n", []),  # a name only
        ("d=$(mktemp -d); pwd", "/w\n", []),  # not echoed
    ],
)
def test_a_temporary_path_kept_in_a_variable_and_echoed(
    command: str, output: str, expected: list[Effect]
) -> None:
    assert list(printed_effects(command, output, "/w")) == expected


@pytest.mark.parametrize(
    ("command", "output", "want"),
    [
        (
            "terraform apply -auto-approve",
            "aws_s3_bucket.logs: Creating...\n"
            "aws_s3_bucket.logs: Creation complete after 3s [id=acme-audit-logs]\n"
            "aws_iam_role.ci: Creation complete after 1s [id=ci-role]\n"
            "aws_iam_policy.ci: Creation complete after 1s [id=arn:aws:iam::1:policy/ci]\n"
            "module.vm.google_compute_instance.web[0]: Creation complete after 21s [id=web-0]\n"
            "\nApply complete! Resources: 4 added, 0 changed, 0 destroyed.",
            {  # a policy: no kind known
                ("bucket", "acme-audit-logs", "create"),
                ("role", "ci-role", "create"),
                ("instance", "web-0", "create"),
            },
        ),
        (
            "terraform destroy -auto-approve",
            "aws_sqs_queue.jobs: Destroying... [id=https://sqs.eu-west-1.amazonaws.com/1/jobs]\n"
            "aws_sqs_queue.jobs: Destruction complete after 0s\n",
            {("queue", "https://sqs.eu-west-1.amazonaws.com/1/jobs", "delete")},
        ),
        (
            "mongosh shop --quiet --eval 'db.orders.insertOne({total: 12})'",
            "{\n  acknowledged: true,\n  insertedId: ObjectId('65a1b2c3d4e5f60718293a4b')\n}",
            {("order", "65a1b2c3d4e5f60718293a4b", "create")},
        ),
        (
            "mongosh crm --eval 'db.getCollection(\"companies\").insertMany([{a:1},{a:2}])'",
            "{\n  acknowledged: true,\n  insertedIds: {\n"
            "    '0': ObjectId('65a1b2c3d4e5f60718293a01'),\n"
            "    '1': ObjectId('65a1b2c3d4e5f60718293a02')\n  }\n}",
            {
                ("company", "65a1b2c3d4e5f60718293a01", "create"),
                ("company", "65a1b2c3d4e5f60718293a02", "create"),
            },
        ),
        (
            "mongosh crm --eval 'db.orders.find()'",
            "[ { _id: ObjectId('65a1b2c3d4e5f60718293a4b') } ]",
            set(),
        ),
        (
            "aws ec2 run-instances --image-id ami-1 --query Instances[0].InstanceId --output text",
            "i-0a1b2c3d4e5f60718\n",
            {("instance", "i-0a1b2c3d4e5f60718", "create")},
        ),
    ],
)
def test_what_a_tool_printed_names_what_it_made(
    command: str, output: str, want: set[tuple[str, str, str]]
) -> None:
    assert _made(command, output) == want
