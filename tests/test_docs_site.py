"""The docs site (mkdocs.yml) builds with ``--strict`` and holds what it promises.

- the strict build passes: a broken link, a missing anchor, a ``::: accord.X`` that names nothing
  or a role naming a public object that does not exist (``:class:`~accord.Nope```) fails it;
- every page under docs/ is a chapter in the nav, the README and the examples are pages;
- the API pages generated from the docstrings document every public name (``accord.__all__``
  and ``accord.models.__all__``) under its public path, never a private module's.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import accord
import accord.models

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

Site = tuple[Path, "subprocess.CompletedProcess[str]"]


@pytest.fixture(scope="module")
def site(docs_site: Site) -> Path:
    path, build = docs_site
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}\n{build.stderr}"
    return path


def test_the_site_builds_strictly(docs_site: Site) -> None:
    _, build = docs_site
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}\n{build.stderr}"


def test_every_page_is_in_the_nav(site: Path) -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    missing = [page for page in pages if not re.search(rf"^\s*- (?:[^:\n]+: )?{re.escape(page)}\s*$", nav, re.M)]
    assert not missing, f"docs pages that are not chapters in mkdocs.yml's nav: {missing}"
    for page in pages:
        built = site / (page.removesuffix(".md").removesuffix("index") + "/index.html").lstrip("/")
        assert built.exists(), f"{page} was not built ({built})"


def test_links_out_of_docs_lead_to_the_readme_and_example_pages(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="readme/"' in home and 'href="examples/quickstart/"' in home and 'href="examples/"' in home
    quickstart = (site / "examples" / "quickstart" / "index.html").read_text(encoding="utf-8")
    assert "Stabilizer" in quickstart  # the script's source, highlighted
    readme = (site / "readme" / "index.html").read_text(encoding="utf-8")
    assert 'href="../parsing/"' in readme  # the README's docs/parsing.md, as a page of the site


def public_names() -> list[str]:
    return [f"accord.{name}" for name in accord.__all__ if name != "models"] + [
        f"accord.models.{name}" for name in accord.models.__all__
    ]


def test_the_api_pages_document_every_public_name_by_its_public_path(site: Path) -> None:
    pages = "".join(p.read_text(encoding="utf-8") for p in (site / "reference").rglob("index.html"))
    anchors = set(re.findall(r'id="(accord[\w.]*)"', pages))
    missing = [name for name in public_names() if name not in anchors]
    assert not missing, f"public names with no entry in the API pages (docs/reference/): {missing}"
    private = sorted(a for a in anchors if any(part.startswith("_") for part in a.split(".")))
    assert not private, f"the API pages expose private paths: {private[:10]}"


def test_sphinx_roles_become_links(site: Path) -> None:
    running = (site / "reference" / "running" / "index.html").read_text(encoding="utf-8")
    assert not re.search(r":(class|func|meth|attr|exc):", running)
    # ``:class:`~accord.OutputError``` in Stabilizer.run's docstring, linked to its entry
    assert re.search(r'<a [^>]*href="\.\./errors/#accord\.OutputError"[^>]*><code>OutputError</code>', running)
