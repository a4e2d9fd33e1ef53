"""Paths a command names only in what it printed: ``mktemp`` made the file or folder it printed,
``git clean -f`` removed the paths after "Removing". A dry run, a ``$(…)`` and a failed branch
(``||``) say nothing."""

from __future__ import annotations

import pytest

from rules.activity.printed_paths import printed_effects
from rules.activity.shell_parse import Effect, load_verbs


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        ("mktemp -d", "/tmp/tmp.Xa81kQ\n", [Effect("create", "folder", "/tmp/tmp.Xa81kQ")]),
        ("mktemp", "/tmp/tmp.b2\n", [Effect("create", "file", "/tmp/tmp.b2")]),
        ("mktemp -p /w x.XXXX", "/w/x.aB3d", [Effect("create", "file", "/w/x.aB3d")]),
        ("cd /w && mktemp --directory", "/tmp/tmp.q", [Effect("create", "folder", "/tmp/tmp.q")]),
        ("mktemp -u", "/tmp/tmp.Zz\n", []),  # only a name: nothing made
        ("echo $(mktemp -d)", "/tmp/tmp.Q\n", []),  # printed by echo
        ("false || mktemp -d", "/tmp/tmp.Q\n", []),
        (
            "git clean -fd",
            "Removing build/\nRemoving notes.txt\n",
            [Effect("delete", "folder", "/w/build"), Effect("delete", "file", "/w/notes.txt")],
        ),
        ("git clean -nd", "Would remove build/\n", []),
        ("git clean -fd --dry-run", "Removing build/\n", []),
        ("git status", "Removing build/\n", []),
    ],
)
def test_printed_effects(command: str, output: str, expected: list[Effect]) -> None:
    assert list(printed_effects(command, output, "/w")) == expected


def test_a_git_clean_is_read_for_a_bounded_number_of_paths() -> None:
    output = "".join(f"Removing f{i}.txt\n" for i in range(10_000))
    assert len(printed_effects("git clean -f", output, "/w")) == 256


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        (
            "ssh-keygen -t ed25519 -f ~/.ssh/deploy_key -N ''",
            "Your identification has been saved in /home/dev/.ssh/deploy_key\n"
            "Your public key has been saved in /home/dev/.ssh/deploy_key.pub.\n",
            [
                Effect("create", "file", "/home/dev/.ssh/deploy_key"),
                Effect("create", "file", "/home/dev/.ssh/deploy_key.pub"),
            ],
        ),
        (
            "python3 manage.py makemigrations inventory",
            "Migrations for 'inventory':\n  inventory/migrations/0004_stock.py\n"
            "    - Create model Stock\n",
            [Effect("create", "file", "/w/inventory/migrations/0004_stock.py")],
        ),
        (
            "alembic revision --autogenerate -m 'add invoices'",
            "INFO  [alembic] Detected added table 'invoices'\n"
            "  Generating /w/alembic/versions/3f2c_add_invoices.py ...  done\n",
            [Effect("create", "file", "/w/alembic/versions/3f2c_add_invoices.py")],
        ),
        (
            "bin/rails g model Coupon code:string",
            "      invoke  active_record\n      create    db/migrate/2024_create_coupons.rb\n"
            "      create    app/models/coupon.rb\n      create    test/models\n",
            [
                Effect("create", "file", "/w/db/migrate/2024_create_coupons.rb"),
                Effect("create", "file", "/w/app/models/coupon.rb"),
                Effect("create", "folder", "/w/test/models"),
            ],
        ),
        (
            "go mod init example.com/app",
            "go: creating new go.mod: module example.com/app",
            [Effect("create", "file", "/w/go.mod")],
        ),
        # the same words printed by another program: nothing
        ("cat notes.txt", "Your public key has been saved in /home/dev/.ssh/k.pub\n", []),
        ("ssh-keygen -lf key.pub", "256 SHA256:abc dev@host (ED25519)\n", []),
    ],
)
def test_files_a_generator_names_as_it_prints(
    command: str, output: str, expected: list[Effect]
) -> None:
    assert list(printed_effects(command, output, "/w", load_verbs().printed)) == expected


def test_a_generator_is_read_for_a_bounded_number_of_files() -> None:
    output = "".join(f"      create    app/f{i}.rb\n" for i in range(1_000))
    assert len(printed_effects("rails generate x", output, "/w", load_verbs().printed)) == 64


PRISMA_TREE = (
    "Applying migration `20261207061500_add_orders`\n\n"
    "The following migration(s) have been created and applied from new schema changes:\n\n"
    "migrations/\n  └─ 20261207061500_add_orders/\n    └─ migration.sql\n\n"
    "Your database is now in sync with your schema.\n"
)


@pytest.mark.parametrize(
    ("command", "folder"),
    [
        # under the schema's folder: prisma/ by default, the one --schema names else
        ("npx prisma migrate dev --name add_orders", "/w/prisma/migrations"),
        ("pnpm exec prisma migrate dev --schema db/schema.prisma", "/w/db/migrations"),
        ("yarn prisma migrate dev --schema=/srv/api/schema.prisma", "/srv/api/migrations"),
        ("prisma migrate dev", "/w/prisma/migrations"),
    ],
)
def test_a_generator_printing_names_under_another_folder(command: str, folder: str) -> None:
    made = f"{folder}/20261207061500_add_orders"
    assert list(printed_effects(command, PRISMA_TREE, "/w", load_verbs().printed)) == [
        Effect("create", "folder", made),
        Effect("create", "file", f"{made}/migration.sql"),
    ]
    # the same tree printed by a status command: nothing made
    status = "prisma migrate status"
    assert list(printed_effects(status, PRISMA_TREE, "/w", load_verbs().printed)) == []
