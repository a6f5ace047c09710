"""The README and the docs pages: short enough to read, and every relative link and picture resolves; the layout
they describe: a `topo/` whose top level stays small and modules that stay one idea each."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens kept), spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, flags=re.M)}


def broken_links(page: Path) -> list[str]:
    """The relative links and pictures of a Markdown page that do not resolve (file, or heading in it)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^(https?:|mailto:)", target):
            continue
        path, _, fragment = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(target)
        elif fragment and where.suffix == ".md" and fragment not in _anchors(where):
            broken.append(target)
    return broken


def test_the_link_checker_finds_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n[ok](b.md) [ok too](#top) [gone](c.md) [no heading](b.md#nope)\n")
    (tmp_path / "b.md").write_text("# B\n")
    assert broken_links(tmp_path / "a.md") == ["c.md", "b.md#nope"]


def test_every_relative_link_in_the_readme_and_docs_resolves():
    assert len(_pages()) >= 5  # the README and at least four pages
    assert {str(p.relative_to(ROOT)): broken_links(p) for p in _pages() if broken_links(p)} == {}


def test_the_readme_fits_on_a_few_pages_and_shows_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make run" in text and "make test" in text


def test_topo_shows_its_design_in_its_folders():
    top = sorted(p.name for p in (ROOT / "topo").glob("*.py"))
    assert len(top) <= 12, top
    for package in ("model", "sim", "ray_engine", "data", "results", "cli"):
        assert (ROOT / "topo" / package / "__init__.py").exists(), package


def test_no_module_of_groupings_or_topo_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for folder in ("groupings", "topo") for p in (ROOT / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
