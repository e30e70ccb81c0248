"""The package as a user gets it: a wheel built from this checkout, installed with pip into a fresh virtual
environment outside the checkout (dependencies from the package index). Fixtures shared by the suites that use the
installed package (tests/e2e/test_installed_package.py, the API explorer's browser test); tests/conftest.py
registers them.

Building and installing takes a while the first time; the environment is kept in the pytest cache, keyed by the
wheel's contents, so later runs reuse it until the package changes."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.e2e.conftest import NOT_SOURCE, ROOT


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built by pip from a clean copy of the checkout (a build/ directory left in the checkout by an earlier
    build could otherwise slip stale modules into it)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(work / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = (work / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="session")
def installed(wheel: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` directory of a fresh virtual environment where pip installed the wheel (and pytest, for the
    downstream suite). Reused across runs while the wheel's contents are the same."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            digest.update(name.encode() + b"\0" + archive.read(name) + b"\0")
    key = digest.hexdigest()[:16]
    cache = getattr(request.config, "cache", None)
    root = cache.mkdir("installed-wheel") if cache is not None else tmp_path_factory.mktemp("installed-wheel")
    for old in root.iterdir():  # environments of earlier versions of the package
        if old.name != key:
            shutil.rmtree(old, ignore_errors=True)
    venv = root / key
    done = venv / ".installed"
    if not done.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel), "pytest"],
            check=True,
            capture_output=True,
            timeout=600,
        )
        done.touch()
    return venv / "bin"


def outside_environment() -> dict[str, str]:
    """This process's environment without the service's variables or anything that points back at the checkout."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}
    return {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_") and k not in drop}
