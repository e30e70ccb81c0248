"""The sync twins are generated from their asyncio sources (`scripts/generate_sync`): a checked-in twin that is not
what the script writes today (its source changed, or someone edited the twin) fails here."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("generate_sync", str(ROOT / "scripts" / "generate_sync"))
    spec = importlib.util.spec_from_loader("generate_sync", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_sync", module)  # its dataclasses look their module up there
    loader.exec_module(module)
    return module


GENERATOR = _generator()


@pytest.mark.parametrize("twin", GENERATOR.TWINS, ids=lambda twin: twin.target)
def test_the_checked_in_twin_is_what_the_generator_writes(twin: Any) -> None:
    expected = GENERATOR.generate(twin, (ROOT / twin.source).read_text(encoding="utf-8"))
    target = ROOT / twin.target
    assert target.exists(), f"{twin.target} is missing: run `python scripts/generate_sync`"
    assert target.read_text(encoding="utf-8") == expected, (
        f"{twin.target} is stale (or was edited by hand): edit {twin.source}, then run `python scripts/generate_sync`"
    )


@pytest.mark.parametrize("twin", GENERATOR.TWINS, ids=lambda twin: twin.target)
def test_a_twin_says_it_is_generated_and_has_no_async_left(twin: Any) -> None:
    text = (ROOT / twin.target).read_text(encoding="utf-8")
    assert text.splitlines()[0] == GENERATOR.HEADER.format(source=twin.source)
    for word in ("async def", "await ", "async with", "async for", "import asyncio", "redis.asyncio"):
        assert word not in text, f"{twin.target} still says {word!r}"


def test_an_edit_of_the_source_makes_the_twin_stale() -> None:
    twin = GENERATOR.TWINS[0]
    source = (ROOT / twin.source).read_text(encoding="utf-8")
    edited = source.replace("async def apply(", "async def apply_changed(")
    assert GENERATOR.generate(twin, edited) != (ROOT / twin.target).read_text(encoding="utf-8")


def test_async_only_blocks_are_left_out() -> None:
    twin = GENERATOR.Twin("example_async.py", "example.py")
    source = (
        "class AsyncThing:\n"
        "    async def aclose(self) -> None:\n"
        "        # async-only: begin\n"
        "        await self._pipeline.aclose()\n"
        "        # async-only: end\n"
        "        await self.client.aclose()\n"
    )
    generated = GENERATOR.generate(twin, source)
    assert "class Thing:" in generated
    assert "    def close(self) -> None:\n        self.client.close()\n" in generated
    assert "_pipeline" not in generated
