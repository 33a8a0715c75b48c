"""mkdocs hooks: the pages link to the README and the examples, which live outside docs/.

On GitHub those links (``../README.md``, ``../examples/quickstart.py``) resolve as they are. On the
site the README becomes the page ``readme.md`` and each example a page under ``examples/`` that
shows its source, and every link that leaves docs/ is pointed at those pages. A link that leaves
docs/ for anything else is left as it is, so ``mkdocs build --strict`` reports it.
"""

from __future__ import annotations

import ast
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _examples(root: Path) -> list[Path]:
    return sorted((root / "examples").glob("*.py"))


def _summary(script: Path) -> str:
    """The first line of a script's docstring."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def on_files(files: Files, config: Any) -> Files:
    root = _root(config)
    files.append(File.generated(config, "readme.md", content=(root / "README.md").read_text(encoding="utf-8")))
    rows = []
    for script in _examples(root):
        source = script.read_text(encoding="utf-8")
        page = f"# `examples/{script.name}`\n\n````python\n{source}````\n"
        files.append(File.generated(config, f"examples/{script.stem}.md", content=page))
        rows.append(f"| [{script.name}]({script.stem}.md) | {_summary(script)} |")
    index = (
        "# Examples\n\nRunnable scripts, no network and no model download: `.venv/bin/python examples/NAME.py`"
        " (`tests/test_examples.py` runs each).\n\n| script | shows |\n|---|---|\n" + "\n".join(rows) + "\n"
    )
    files.append(File.generated(config, "examples/index.md", content=index))
    return files


def _site_path(repo_path: str) -> str | None:
    """Where a file of the repository is on the site (None: it is not there)."""
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    if repo_path == "README.md":
        return "readme.md"
    if repo_path == "examples":
        return "examples/index.md"
    if repo_path.startswith("examples/") and repo_path.endswith(".py"):
        return repo_path.removesuffix(".py") + ".md"
    return None


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    src_uri = page.file.src_uri
    if src_uri.startswith("examples/"):
        return markdown  # an example's page is its source, in a code block
    source = "README.md" if src_uri == "readme.md" else f"docs/{src_uri}"  # where the page lives in the repository
    here = posixpath.dirname(src_uri) or "."

    def relink(match: re.Match[str]) -> str:
        path, hash_, anchor = match.group(2).partition("#")
        if not path or re.match(r"[a-z][a-z0-9+.-]*:", path):
            return match.group(0)  # an anchor on this page, or a URL
        site = _site_path(posixpath.normpath(posixpath.join(posixpath.dirname(source), path)))
        if site is None:
            return match.group(0)
        return f"{match.group(1)}{posixpath.relpath(site, here)}{hash_}{anchor}{match.group(3)}"

    # Links inside fenced code are code, not links: leave them.
    out, last = [], 0
    for fence in _FENCE.finditer(markdown):
        out.append(_LINK.sub(relink, markdown[last : fence.start()]))
        out.append(fence.group(0))
        last = fence.end()
    out.append(_LINK.sub(relink, markdown[last:]))
    return "".join(out)
