"""backends/README.md repeats the key-layout table of `backends/redis/keys.py`; they must not drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import backends.redis.keys

README = Path(__file__).resolve().parents[2] / "backends" / "README.md"
TABLE = re.compile(r"^=+  =+  =+  =+$.*?^=+  =+  =+  =+$.*?^=+  =+  =+  =+$", re.M | re.S)


def test_the_readme_key_table_is_the_one_beside_the_key_builders() -> None:
    documented = TABLE.search(backends.redis.keys.__doc__ or "")
    repeated = TABLE.search(README.read_text())
    assert documented is not None, "backends/redis/keys.py lost its key-layout table"
    assert repeated is not None, "backends/README.md lost its key-layout table"
    assert repeated.group(0) == documented.group(0), "backends/README.md and backends/redis/keys.py differ"
