"""The README and the docs pages hold together without a server: the README opens with its two commands, every docs
page is in the site's nav, not-run markers are well placed and give a reason, and every relative link names a file
that exists and an anchor that one of its headings makes, the same on a code host and on the docs site."""

from __future__ import annotations

from pathlib import Path

from tests.docs.documents import DOCS, ROOT, blocks, documents, headings, links, site_slug, slug


def test_the_readme_opens_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first = blocks(ROOT / "README.md")[0]
    assert lines[0] == "# identity-service"
    assert first.line <= 3, "the two commands must come right after the title"
    commands = [line.split("#")[0].strip() for line in first.text.splitlines()]
    assert commands == ["scripts/run", "scripts/test"]


def test_every_docs_page_is_in_the_nav_once() -> None:
    listed = documents()
    assert len(listed) == len(set(listed))
    assert set(DOCS.glob("*.md")) == set(listed[1:]), "a docs page missing from mkdocs.yml's nav (or one too many)"


def test_blocks_left_out_say_why() -> None:
    not_run = [block for path in documents() for block in blocks(path) if block.not_run is not None]
    assert not_run, "no not-run markers found: the marker syntax changed?"
    for block in not_run:
        assert block.runnable, f"{block.where}: a not-run marker on a block that is never run"
        assert len(block.not_run or "") >= 10, f"{block.where}: say why the block is not run"


def _anchors(path: Path) -> set[str]:
    return {slug(text) for _, text in headings(path)}


def test_headings_have_the_same_anchor_on_a_code_host_and_on_the_site() -> None:
    for path in documents():
        for line, text in headings(path):
            assert slug(text) == site_slug(text), f"{path.relative_to(ROOT)}:{line}: {text!r} anchors differ"


def test_relative_links_name_existing_files_and_anchors() -> None:
    broken = []
    for path in documents():
        for line, target in links(path):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{line}: {target}"
            if not linked.exists():
                broken.append(f"{where}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{where}: no heading makes #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_readme_links_to_the_pages_that_hold_the_reference() -> None:
    targets = {target.partition("#")[0] for _, target in links(ROOT / "README.md")}
    for page in documents()[1:]:
        assert f"docs/{page.name}" in targets, f"the README does not link to docs/{page.name}"
