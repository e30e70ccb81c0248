"""The README's configuration table names exactly the IDENTITY_* variables the settings read.

The variables read are found in the source of `identity_hosting/settings.py`: every string literal that is exactly
an `IDENTITY_*` name (`env.get("IDENTITY_...")`, the key names it checks), outside the module docstring, which
points at the README instead of repeating the table. Error messages that merely mention a variable are longer
literals and do not count. A variable added to the settings and not to the README fails this test, and so does a
README row for a variable the settings do not read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SETTINGS = ROOT / "identity_hosting" / "settings.py"

_NAME = re.compile(r"IDENTITY_[A-Z0-9_]+")
_ROW = re.compile(r"^\|\s*`?(IDENTITY_[A-Z0-9_]+)`?\s*\|")


def variables_read_by_settings() -> set[str]:
    """Every IDENTITY_* variable name that appears as a whole string literal in the settings module's code."""
    tree = ast.parse(SETTINGS.read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree, clean=False)
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value != docstring
        and _NAME.fullmatch(node.value)
    }


def readme_configuration_rows() -> list[str]:
    """The variable of each row of the table in the README's `## Configuration` section, in order."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Configuration\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert match is not None, "the README has no '## Configuration' section"
    rows = []
    for line in match.group(1).splitlines():
        row = _ROW.match(line)
        if row is not None:
            rows.append(row.group(1))
    return rows


def test_the_settings_read_identity_variables() -> None:
    found = variables_read_by_settings()

    assert {"IDENTITY_BACKEND", "IDENTITY_PROJECT_ID", "IDENTITY_MAIL"} <= found  # the scan sees the source


def test_the_readme_configuration_table_names_every_variable_the_settings_read() -> None:
    in_settings = variables_read_by_settings()
    in_readme = set(readme_configuration_rows())

    missing = sorted(in_settings - in_readme)
    extra = sorted(in_readme - in_settings)
    assert not missing, f"read by identity_hosting/settings.py but not in the README's configuration table: {missing}"
    assert not extra, f"in the README's configuration table but not read by identity_hosting/settings.py: {extra}"


def test_the_readme_configuration_table_names_each_variable_once() -> None:
    rows = readme_configuration_rows()

    assert len(rows) == len(set(rows)), f"repeated rows: {sorted({name for name in rows if rows.count(name) > 1})}"


def test_the_settings_docstring_points_at_the_readme_instead_of_repeating_the_table() -> None:
    docstring = ast.get_docstring(ast.parse(SETTINGS.read_text(encoding="utf-8"))) or ""

    assert "README" in docstring
    assert not re.search(r"^\|\s*`?IDENTITY_", docstring, re.MULTILINE), "a variable table in the docstring"
