"""The docs stay true to the code.

- every name in ``accord.__all__`` and ``accord.models.__all__`` has an entry in docs/api.md, and
  every parameter of its signature is mentioned in that entry;
- the ``>>>`` examples in the docs pages run and print what the pages say (doctest);
- relative links between docs pages, examples and the README resolve, anchors included.
"""

from __future__ import annotations

import doctest
import inspect
import io
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import accord
import accord.models

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = DOCS / "api.md"
# The pages whose examples are doctests (other pages may hold examples that need a model).
DOCTEST_PAGES = ["concepts.md", "vote.md", "retry.md", "budget.md", "normalize.md", "parsing.md", "api.md"]
LINKED_PAGES = ["index.md", *DOCTEST_PAGES]


def public_names() -> list[tuple[str, object]]:
    names = [(f"accord.{name}", getattr(accord, name)) for name in accord.__all__]
    names += [(f"accord.models.{name}", getattr(accord.models, name)) for name in accord.models.__all__]
    return names


def sections(text: str) -> dict[str, str]:
    """Heading text -> the section under it (up to the next heading of any level)."""
    out: dict[str, str] = {}
    parts = re.split(r"^(#{1,6} .*)$", text, flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        out[heading.lstrip("#").strip()] = body
    return out


def entry(qualified: str) -> str | None:
    """The api.md section whose heading is exactly `qualified` (in backticks)."""
    return sections(API.read_text(encoding="utf-8")).get(f"`{qualified}`")


@pytest.mark.parametrize("qualified", [q for q, _ in public_names()])
def test_every_public_name_has_an_entry_in_the_api_reference(qualified: str) -> None:
    assert entry(qualified) is not None, f"docs/api.md has no '### `{qualified}`' entry"


def documented_parameters(obj: object) -> list[str]:
    """Parameter names of a public class or function (not of instances such as stop rules)."""
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return []
    if inspect.isclass(obj) and issubclass(obj, BaseException) and "__init__" not in vars(obj):
        return []  # an exception that inherits its constructor is documented by its parent
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize("qualified,obj", public_names(), ids=[q for q, _ in public_names()])
def test_every_parameter_is_mentioned_in_its_entry(qualified: str, obj: object) -> None:
    body = entry(qualified)
    if body is None:
        pytest.fail(f"docs/api.md has no '### `{qualified}`' entry")
    missing = [name for name in documented_parameters(obj) if not re.search(rf"\b{re.escape(name)}\b", body)]
    assert not missing, f"docs/api.md, `{qualified}`: parameters not mentioned: {missing}"


@pytest.mark.parametrize("page", DOCTEST_PAGES)
def test_the_examples_in_the_page_run(page: str) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        failed, attempted = doctest.testfile(
            str(DOCS / page), module_relative=False, optionflags=doctest.ELLIPSIS, report=True, verbose=False
        )
    assert failed == 0, f"docs/{page}: {failed} of {attempted} examples failed\n{out.getvalue()}"
    if page != "api.md":
        assert attempted > 0, f"docs/{page} has no runnable examples"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def links() -> list[tuple[str, str]]:
    found = []
    for page in LINKED_PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # not inside code blocks
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+:", target) and (page, target) not in found:
                found.append((page, target))
    return found


@pytest.mark.parametrize("page,target", links(), ids=[f"{p}->{t}" for p, t in links()])
def test_relative_links_resolve(page: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (DOCS / path).resolve() if path else DOCS / page
    assert file.exists(), f"docs/{page} links to {target}, which does not exist"
    if anchor and file.suffix == ".md":
        headings = list(sections(file.read_text(encoding="utf-8")))
        assert anchor in {slug(h) for h in headings}, f"docs/{page} links to {target}: no such heading"
