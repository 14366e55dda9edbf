"""The README and the docs pages: every relative link resolves, every page is
in the README's docs index, and none carries run-log phrasing.

Links are Markdown links and images, ``[text](target)`` and
``![alt](target)``, outside fenced code blocks and inline code; a target
with a scheme (``https:``, ``mailto:``) or only an anchor is not checked, and
an anchor or query after a path is dropped before the path is resolved
against the linking file's folder.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# The phrases the docs must not carry (written with [ ] so that this file
# does not match a plain search for them).
BANNED = re.compile(r"this[ ]stop|ad[ ]hoc|issue[ ][0-9]", re.I)


def relative_links(text: str) -> List[str]:
    """The relative link targets of a Markdown text, code left out."""
    text = INLINE_CODE.sub("", FENCE.sub("", text))
    targets = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if SCHEME.match(target) or target.startswith("#"):
            continue
        targets.append(target)
    return targets


def broken_links(page: Path) -> List[Tuple[str, str]]:
    """``(page, target)`` for each relative link of ``page`` to no file or folder."""
    broken = []
    for target in relative_links(page.read_text(encoding="utf8")):
        path = re.split(r"[#?]", target, maxsplit=1)[0]
        if not path or not (page.parent / path).exists():
            broken.append((page.relative_to(ROOT).as_posix(), target))
    return broken


def test_the_link_finder_reads_links_and_skips_code_and_urls():
    text = ("See [training](docs/training.md#rebuild), ![pic](img/a.png) and "
            "[site](https://spacy.io).\n`[not](a-link.md)`\n```\n[neither](b.md)\n```\n"
            "[anchor](#here) [titled](c.md \"title\")\n")
    assert relative_links(text) == ["docs/training.md#rebuild", "img/a.png", "c.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_run_log_phrasing(page):
    found = BANNED.findall(page.read_text(encoding="utf8"))
    assert found == [], f"{page.name}: {found}"


def test_every_docs_page_is_in_the_readme():
    linked = {re.split(r"[#?]", t, maxsplit=1)[0] for t in relative_links((ROOT / "README.md").read_text(encoding="utf8"))}
    pages = {p.relative_to(ROOT).as_posix() for p in PAGES if p.parent.name == "docs"}
    assert sorted(pages - linked) == []
