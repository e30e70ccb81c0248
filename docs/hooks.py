"""MkDocs hooks (mkdocs.yml `hooks:`): the README, which lives at the repository's root, is the site's home page.

The Markdown keeps links that work on a code host, relative to each file: the README links to `docs/<page>.md`, the
pages link back to `../README.md`. On the site the README is `README.md` beside the pages, so those links are
rewritten for the build only; the README's links to other files of the repository, which are not part of the site,
become plain text, and the images it shows are copied in. `mkdocs build --strict` then checks every link and anchor.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"(?P<image>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#)")


def _readme_images() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [m["target"] for m in _LINK.finditer(text) if m["image"] and not _EXTERNAL.match(m["target"])]


def on_files(files: Files, config: Any) -> Files:
    """Add the README (as the home page) and the images it shows, from the repository's root."""
    site_dir, urls = config["site_dir"], config["use_directory_urls"]
    files.append(File("README.md", src_dir=str(ROOT), dest_dir=site_dir, use_directory_urls=urls))
    for image in _readme_images():
        files.append(File(image, src_dir=str(ROOT), dest_dir=site_dir, use_directory_urls=urls))
    return files


def _readme_link(match: re.Match[str]) -> str:
    target = match["target"]
    if _EXTERNAL.match(target) or match["image"]:
        return match[0]
    if target.startswith("docs/"):
        return f"[{match['text']}]({target.removeprefix('docs/')})"
    return match["text"]  # another file of the repository: not on the site


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point the README's and the pages' links at the files as the site lays them out."""
    if page.file.src_uri == "README.md" and Path(page.file.abs_src_path) == ROOT / "README.md":
        return _LINK.sub(_readme_link, markdown)
    return markdown.replace("](../README.md", "](README.md")
