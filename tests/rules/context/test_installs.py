"""A "No module named X" failure closes when X is installed: the agent rarely reruns the very
command that failed, and the failure stayed open, the next repair target pointing at it (70 such
in the corpus)."""

from __future__ import annotations

import pytest

from rules.context import working_set
from rules.context.installs import installed
from tests.rules.context.test_working_set import TASK, ledger_of
from tests.support.factories import assistant, result, shell

MISSING = """Traceback (most recent call last):
  File "/testbed/setup.py", line 67, in <module>
    import extension_helpers
ModuleNotFoundError: No module named 'extension_helpers'
"""


def _after(install: str, said: str) -> list:
    return working_set.open_diagnostics(
        ledger_of(
            TASK,
            *[assistant(None, shell("a", "python setup.py build")), result("a", MISSING)],
            *[assistant(None, shell("b", install)), result("b", said)],
        )
    )


@pytest.mark.parametrize(
    "install",
    [
        "pip install extension_helpers",
        "cd /testbed && python -m pip install -q extension-helpers==1.1",
        "uv pip install 'extension-helpers>=1' numpy",
    ],
)
def test_an_install_closes_the_missing_module(install: str) -> None:
    assert _after(install, "Successfully installed extension-helpers-1.1\nExit code: 0") == []


def test_a_failed_install_or_another_package_leaves_it_open() -> None:
    failed = "ERROR: No matching distribution\nExit code: 1"
    assert len(_after("pip install extension_helpers", failed)) == 1
    assert len(_after("pip install numpy", "Successfully installed numpy\nExit code: 0")) == 1


def test_install_names() -> None:
    assert installed("pip3 install -U Foo-Bar[extra]==2 baz; pip list") == {"foo_bar", "baz"}
    assert installed("poetry add requests") == {"requests"}
    assert installed("pip install -r requirements.txt -e . x.whl") == frozenset()
