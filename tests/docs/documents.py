"""The project's documents as the docs tests read them: the README, then the pages of the docs site in the order of
`mkdocs.yml`'s nav; their fenced code blocks, the `<!-- not run: reason -->` markers, headings and links."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = ROOT / "mkdocs.yml"
DOCS = ROOT / "docs"

#: Fence languages the tests execute, and the session each runs in.
SHELL = frozenset({"sh", "bash", "shell"})
PYTHON = frozenset({"python", "py"})

_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
_MARKER = re.compile(r"^<!-- not run: (?P<reason>.*?) -->$")
_NAV_PAGE = re.compile(r"^\s*-\s*(?:[^:]+:\s*)?(?P<page>[\w./-]+\.md)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text, and why it is not run (None: it is run)."""

    path: Path
    line: int  # the fence's line, 1-based
    language: str
    text: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.language in SHELL | PYTHON


def documents() -> list[Path]:
    """README.md, then every page of mkdocs.yml's nav, in nav order (README.md is the site's home page there)."""
    pages = []
    in_nav = False
    for line in MKDOCS.read_text(encoding="utf-8").splitlines():
        if re.match(r"^nav:\s*$", line):
            in_nav = True
            continue
        if in_nav and line and not line[0].isspace() and not line.startswith("-"):
            break
        match = _NAV_PAGE.match(line) if in_nav else None
        if match:
            pages.append(match.group("page"))
    assert pages[:1] == ["README.md"], "mkdocs.yml's nav must start with the README (the site's home page)"
    return [ROOT / "README.md"] + [DOCS / page for page in pages[1:]]


def _lines_outside_fences(path: Path) -> list[tuple[int, str]]:
    found = []
    fence: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            found.append((number, line))
    return found


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a document, in order. A marker line right before a fence says why it is not run."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            marker = _MARKER.match(lines[index])
            following = _FENCE.match(lines[index + 1]) if marker and index + 1 < len(lines) else None
            if marker and (following is None or following.group(2) not in SHELL | PYTHON):
                raise AssertionError(f"{path.name}:{index + 1}: a not-run marker not followed by a sh/python block")
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2)
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        assert end < len(lines), f"{path.name}:{index + 1}: a fence that is never closed"
        marker = _MARKER.match(lines[index - 1]) if index > 0 else None
        reason = marker.group("reason").strip() if marker else None
        assert reason != "", f"{path.name}:{index}: a not-run marker without a reason"
        found.append(Block(path, index + 1, language, "\n".join(lines[index + 1 : end]) + "\n", reason))
        index = end + 1
    return found


def slug(heading: str) -> str:
    """A heading's anchor as a code host makes it: lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def site_slug(heading: str) -> str:
    """The same heading's anchor as the docs site (Python-Markdown's toc) makes it."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading).strip()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def headings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every heading outside code blocks."""
    found = []
    for number, line in _lines_outside_fences(path):
        match = _HEADING.match(line)
        if match:
            found.append((number, match.group(2)))
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code blocks (images excluded)."""
    found = []
    for number, line in _lines_outside_fences(path):
        code_free = re.sub(r"`[^`]*`", "", line)
        found.extend((number, match.group("target")) for match in _LINK.finditer(code_free))
    return found
