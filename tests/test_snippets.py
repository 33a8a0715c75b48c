"""Every ```python block of README.md and docs/**/*.md runs, and prints what its page says.

How a page is run:

- Its blocks run in page order in one namespace: a block may use what an earlier block of the
  same page defined. One test per block (``page:line``); a block whose earlier block failed fails
  too. ```pycon blocks are doctests (tests/test_docs.py, ``DOCTEST_PAGES``), not run here.
- README.md starts from an empty namespace: what a newcomer copies is all there is. A docs page
  starts from the preamble, tests/snippets.py (``accord``, ``Review``, ``my_llm_call``,
  ``model``, ``prompt``, ``prompts``, ...).
- Output: a statement whose line ends in ``# -> TEXT`` is an expression whose ``repr`` must be
  TEXT; ``...`` in TEXT matches anything (doctest's ELLIPSIS). Other comments are prose.
- Real parts: ``accord.models.local()`` (float32, no other option) is the session's embedded model
  (the ``local_model`` fixture, loaded once). The address ``http://127.0.0.1:8000/v1`` is a
  server the suite starts (``SERVERS``): on the proxy's pages, ``accord serve`` taking the client
  key ``client-key-1234``, in front of the scripted upstream (``fake_upstream``: it answers a
  schema with its smallest instance, fast); where the answer depends on the model's numerics
  (determinism.md's reference deployment), the ``transformers serve`` of the embedded model
  (``openai_server``); on the provider pages (docs/providers/), whose snippets show what a real
  engine does with the schema, logprobs and the Messages and Responses APIs, the session's vLLM
  (``vllm_server``; a page shows its provider's own address in a comment or a "not run" block);
  elsewhere the scripted upstream itself. ``http://127.0.0.1:8000`` (the same
  server's root, an Anthropic client's base URL) stands for that server's root. A page that shows a
  server and ``accord serve`` in front of it (tutorial.md) names a second address,
  ``http://127.0.0.1:8001/v1``, for the proxy (``PROXIES``: ``docs_proxy``, which stands in front
  of the scripted upstream, so the page's first address is that upstream). Each page runs in its own empty
  folder, with its own user data folder (``accord.Ledger()``'s default file).
- A page is named by its path under docs/ (``providers/ollama.md``); README.md by its own name.
- Markers, an HTML comment on the line before the fence:
  ``<!-- not run: REASON -->`` for a block that cannot run here (a cloud service, a GPU): skipped
  with the reason, and at most ``MAX_NOT_RUN`` of them in all;
  ``<!-- signature -->`` for a block that shows a signature, not code (test_docs.py checks it
  against ``inspect.signature``), as is the first block of every entry of docs/api.md;
  ``<!-- from examples/NAME.py -->`` for a block quoted from an example, which
  tests/test_examples.py runs: each of its statements must be one of the example's.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import os
import random
import re
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import accord

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
# What http://127.0.0.1:8000/v1 stands for on a page (a fixture's name); fake_upstream elsewhere.
SERVERS = {
    "README.md": "docs_proxy", "serve.md": "docs_proxy", "determinism.md": "openai_server",
    **{f"providers/{name}.md": "vllm_server" for name in ("claude", "openai-responses", "gemini", "ollama", "llama-cpp")},
}
PAGE_URL = "http://127.0.0.1:8000/v1"
PAGE_ROOT = PAGE_URL.removesuffix("/v1")  # the same server's root: an Anthropic client's base URL
# What http://127.0.0.1:8001/v1 stands for on a page that shows a proxy in front of its server.
PROXIES = {"tutorial.md": "docs_proxy"}
PROXY_URL = "http://127.0.0.1:8001/v1"
CLIENT_KEY = "client-key-1234"
MAX_NOT_RUN = 3
_FENCE = re.compile(r"^```(\w*)")
_MARKER = re.compile(r"^<!--\s*(not run|signature|from)\s*:?\s*(.*?)\s*-->\s*$")
_ENTRY = re.compile(r"^#{1,6} `accord(?:\.models)?(?:\.\w+)?`\s*$")


def page_name(path: Path) -> str:
    """README.md, or a docs page's path under docs/ (``vote.md``, ``providers/ollama.md``)."""
    return path.relative_to(DOCS).as_posix() if path.is_relative_to(DOCS) else path.name


@dataclass(frozen=True)
class Block:
    page: str  # README.md, or a docs page's path under docs/ (page_name)
    line: int  # the line of its opening fence
    source: str
    marker: str = ""  # "not run", "signature", "from" or ""
    detail: str = ""  # the marker's reason or example


def blocks(path: Path) -> list[Block]:
    """The ```python blocks of a page, with the marker on the line before each; in api.md, the
    first block under an entry's heading is a signature."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    start, kind, entry_open = -1, "", False
    for number, line in enumerate(lines, 1):
        fence = _FENCE.match(line)
        if start < 0 and _ENTRY.match(line):
            entry_open = page_name(path) == "api.md"
        if fence and start < 0:
            start, kind = number, fence.group(1)
        elif line.startswith("```") and start >= 0:
            if kind == "python":
                marker = _MARKER.match(lines[start - 2].strip()) if start >= 2 else None
                name, detail = (marker.group(1), marker.group(2)) if marker else ("", "")
                if not name and entry_open:
                    name, detail = "signature", "the entry's signature"
                found.append(Block(page_name(path), start, "\n".join(lines[start : number - 1]), name, detail))
            entry_open = False if kind == "python" else entry_open
            start = -1
    return found


ALL = [block for page in PAGES for block in blocks(page)]


# -- running a block -------------------------------------------------------------------------------


def _expected(source: str) -> dict[int, str]:
    """Line number -> the TEXT of a ``# -> TEXT`` comment on it."""
    found = {}
    readline = iter(source.splitlines(keepends=True)).__next__
    for token in tokenize.generate_tokens(readline):
        if token.type == tokenize.COMMENT and token.string.startswith("# -> "):
            found[token.start[0]] = token.string[5:].strip()
    return found


def run_block(source: str, namespace: dict[str, Any], where: str) -> None:
    """Run a block statement by statement; check each ``# -> TEXT`` against the value's repr."""
    tree = ast.parse(source, where)
    wanted = _expected(source)
    checker = doctest.OutputChecker()
    for statement in tree.body:
        want = wanted.get(statement.end_lineno or statement.lineno)
        if want is None:
            exec(compile(ast.Module([statement], []), where, "exec", dont_inherit=True), namespace)
            continue
        assert isinstance(statement, ast.Expr), f"{where}:{statement.lineno}: a '# ->' comment on a statement that is not an expression"
        got = repr(eval(compile(ast.Expression(statement.value), where, "eval", dont_inherit=True), namespace))
        assert checker.check_output(want + "\n", got + "\n", doctest.ELLIPSIS), (
            f"{where}:{statement.lineno}: the page says {want}, the code gives {got}"
        )


def from_example(block: Block) -> list[str]:
    """The statements of a block quoted from an example that the example does not hold."""
    example = ast.parse((ROOT / block.detail).read_text(encoding="utf-8"))
    held = {ast.dump(node) for node in ast.walk(example) if isinstance(node, ast.stmt)}
    return [ast.unparse(s) for s in ast.parse(block.source).body if ast.dump(s) not in held]


# -- the real parts a page needs -------------------------------------------------------------------


@dataclass
class PageRun:
    namespace: dict[str, Any]
    folder: Path
    done: int = 0  # how many of the page's blocks have run
    failed: str = ""  # the first block that failed
    local: Any = None  # the session's embedded model, when the page loads it
    urls: dict[str, str] = field(default_factory=dict)


RUNS: dict[str, PageRun] = {}


@pytest.fixture(scope="session")
def docs_proxy(fake_upstream: Any) -> Iterator[str]:
    """``accord serve`` in front of the suite's scripted upstream, taking the docs' client key."""
    from serving import accord_serve

    with accord_serve([fake_upstream.url], env={"ACCORD_API_KEYS": CLIENT_KEY}) as served:
        yield served.url


def server_url(page: str, request: pytest.FixtureRequest) -> str:
    """The real server that ``http://127.0.0.1:8000/v1`` stands for on a page."""
    name = SERVERS.get(page, "fake_upstream")
    value = request.getfixturevalue(name)
    return value if isinstance(value, str) else str(value.url)


def page_run(page: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PageRun:
    if page not in RUNS:
        import snippets

        namespace = {} if page == "README.md" else {name: getattr(snippets, name) for name in snippets.__all__}
        stem = page.removesuffix(".md").replace("/", "_")  # a folder of its own under the session's temp root
        RUNS[page] = PageRun({"__name__": f"snippets_{stem}", **namespace}, tmp_path_factory.mktemp(stem))
    run = RUNS[page]
    text = "\n".join(b.source for b in ALL if b.page == page and not b.marker)
    if PAGE_ROOT in text and PAGE_URL not in run.urls:  # the /v1 URL replaced first, then the root
        run.urls[PAGE_URL] = server_url(page, request)
        run.urls[PAGE_ROOT] = run.urls[PAGE_URL].removesuffix("/v1")
    if PROXY_URL in text and PROXY_URL not in run.urls:
        assert page in PROXIES, f"{page} uses {PROXY_URL}: name the proxy it stands for in PROXIES"
        run.urls[PROXY_URL] = request.getfixturevalue(PROXIES[page])
    if "models.local(" in text and run.local is None:
        run.local = request.getfixturevalue("local_model")  # before models.local is patched: the fixture calls it
    return run


@contextlib.contextmanager
def page_world(run: PageRun, source: str) -> Iterator[None]:
    """The page's folder and data folder, and the session's embedded model for ``models.local()``."""
    real_local = accord.models.local

    def local(dtype: str = "float32", **options: Any) -> Any:
        return run.local if dtype == "float32" and not options else real_local(dtype, **options)

    with pytest.MonkeyPatch.context() as patch, _seeds_kept():
        patch.chdir(run.folder)
        patch.setenv("XDG_DATA_HOME", str(run.folder / "data"))
        patch.setenv("PYTHONHASHSEED", os.environ.get("PYTHONHASHSEED", "random"))  # seed_everything sets it
        if "models.local(" in source:
            patch.setattr(accord.models, "local", local)
        yield


@contextlib.contextmanager
def _seeds_kept() -> Iterator[None]:
    """The random generators as they were (a block may call accord.determinism.seed_everything)."""
    import numpy

    kept = random.getstate(), numpy.random.get_state()
    torch = sys.modules.get("torch")
    torch_state = torch.get_rng_state() if torch is not None else None
    try:
        yield
    finally:
        random.setstate(kept[0])
        numpy.random.set_state(kept[1])
        if torch is not None:
            torch.set_rng_state(torch_state)


def _marks(page: str) -> list[pytest.MarkDecorator]:
    """``model`` / ``server`` (so ``slow``) for a page that loads the embedded model or asks a server;
    ``vllm`` for a page whose address stands for the session's vLLM."""
    text = "\n".join(b.source for b in ALL if b.page == page and not b.marker)
    server = pytest.mark.vllm if SERVERS.get(page) == "vllm_server" else pytest.mark.server
    wants = ((pytest.mark.model, ("models.local(",)), (server, (PAGE_ROOT, PROXY_URL)))
    return [mark for mark, needs in wants if any(need in text for need in needs)]


@pytest.mark.parametrize("block", [pytest.param(b, id=f"{b.page}:{b.line}", marks=_marks(b.page)) for b in ALL])
def test_the_block_runs(block: Block, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    if block.marker == "not run":
        pytest.skip(f"{block.page}:{block.line}: not run: {block.detail}")
    if block.marker == "signature":
        return  # checked by tests/test_docs.py::test_documented_signatures_match_the_code
    if block.marker == "from":
        assert not from_example(block), f"{block.page}:{block.line}: not in {block.detail}: {from_example(block)}"
        return
    run = page_run(block.page, request, tmp_path_factory)
    page_blocks = [b for b in ALL if b.page == block.page and not b.marker]
    for earlier in page_blocks[run.done : page_blocks.index(block) + 1]:
        assert not run.failed, f"{block.page}: an earlier block failed ({run.failed})"
        source = earlier.source
        for written, real in run.urls.items():
            source = source.replace(written, real)
        where = f"{block.page}:{earlier.line}"
        try:
            with page_world(run, source):
                run_block(source, run.namespace, where)
        except BaseException:
            run.failed = where
            raise
        finally:
            run.done += 1


def test_few_blocks_are_not_run() -> None:
    skipped = [f"{b.page}:{b.line} ({b.detail})" for b in ALL if b.marker == "not run"]
    assert len(skipped) <= MAX_NOT_RUN, f"{len(skipped)} blocks are not run, at most {MAX_NOT_RUN}: {skipped}"
    assert all(b.detail for b in ALL if b.marker == "not run"), "a '<!-- not run: REASON -->' says why"


def test_the_pages_under_providers_name_their_server() -> None:
    """A provider page shows a real engine's answers: its address must not fall back to the scripted upstream."""
    pages = {b.page for b in ALL if b.page.startswith("providers/") and not b.marker and PAGE_ROOT in b.source}
    assert sorted(pages - set(SERVERS)) == [], "add the page to SERVERS"


def test_every_doctest_block_is_on_a_doctest_page() -> None:
    """A ```pycon block is run by test_docs.py, which runs only the pages it names."""
    from test_docs import DOCTEST_PAGES

    pages = {page_name(page) for page in PAGES if re.search(r"^```pycon", page.read_text(encoding="utf-8"), re.M)}
    assert pages <= set(DOCTEST_PAGES), f"pycon blocks on pages test_docs.py does not run: {sorted(pages - set(DOCTEST_PAGES))}"


def test_the_reader_finds_the_blocks_and_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# page\n\n```python\nx = 1\n```\n\n<!-- not run: needs a GPU -->\n```python\nimport cuda\n```\n\n"
        "```pycon\n>>> 1\n1\n```\n\n<!-- signature -->\n```python\nf(a, *, b=1)\n```\n",
        encoding="utf-8",
    )
    found = blocks(page)
    assert [(b.line, b.marker, b.detail, b.source) for b in found] == [
        (3, "", "", "x = 1"), (8, "not run", "needs a GPU", "import cuda"), (18, "signature", "", "f(a, *, b=1)"),
    ]


def test_an_output_that_differs_fails() -> None:
    namespace: dict[str, Any] = {}
    run_block("x = [1, 2]\nx  # -> [1, ...]\nlen(x)  # -> 2", namespace, "page.md:1")
    with pytest.raises(AssertionError, match="the page says 3, the code gives 2"):
        run_block("len(x)  # -> 3", namespace, "page.md:5")
    assert os.getcwd()  # nothing above changed the folder


def test_a_quoted_block_must_be_the_examples() -> None:
    example = "examples/quickstart.py"
    quoted = ast.unparse(ast.parse((ROOT / example).read_text(encoding="utf-8")).body[-1])
    assert not from_example(Block("page.md", 1, quoted, "from", example))
    assert from_example(Block("page.md", 1, f"{quoted}\nx = 1", "from", example)) == ["x = 1"]
