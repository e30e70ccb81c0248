"""The contract suite is exported to a third store: `IDENTITY_CONTRACT_STORE=module:factory` runs it against that
store as `external` (tests/contract/conftest.py). Here the suite runs in a child pytest against a store made by a
factory outside the suite's own list: it passes on a working store and fails on one that does nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from backends.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[2]


def working_store() -> MemoryStore:
    """A third store that keeps what it is told (the memory store under another name)."""
    return MemoryStore()


class _Refusing:
    def apply(self, effect: object) -> object:
        raise NotImplementedError(type(effect).__name__)

    def close(self) -> None:
        pass


def refusing_store() -> _Refusing:
    """A third store that performs nothing."""
    return _Refusing()


def _run_suite(factory: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IDENTITY_CONTRACT_STORE": f"tests.contract.test_third_store:{factory}"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "external",
            "tests/contract/test_commit_contract.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_suite_runs_against_a_third_store_and_passes_on_a_working_one() -> None:
    done = _run_suite("working_store")
    assert done.returncode == 0, done.stdout[-2000:]
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None, done.stdout[-500:]
    assert int(passed.group(1)) >= 10, done.stdout[-500:]


def test_the_suite_fails_on_a_third_store_that_does_nothing() -> None:
    done = _run_suite("refusing_store")
    assert done.returncode == 1, done.stdout[-2000:]
    assert re.search(r"(\d+) failed", done.stdout), done.stdout[-500:]
