"""The Redis key layout is documented once: the table in backends/README.md, which `backends/redis/keys.py` names."""

from __future__ import annotations

import re
from pathlib import Path

import backends.redis.keys

README = Path(__file__).resolve().parents[2] / "backends" / "README.md"
TABLE = re.compile(r"^=+  =+  =+  =+$.*?^=+  =+  =+  =+$.*?^=+  =+  =+  =+$", re.M | re.S)


def test_the_key_layout_table_is_in_the_readme_only() -> None:
    assert TABLE.search(README.read_text()) is not None, "backends/README.md lost its key-layout table"
    doc = backends.redis.keys.__doc__ or ""
    assert "backends/README.md" in doc, "backends/redis/keys.py no longer names where its key layout is"
    assert TABLE.search(doc) is None, "backends/redis/keys.py has a copy of the key-layout table again"
