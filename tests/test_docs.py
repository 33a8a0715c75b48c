"""The docs stay true to the code.

- every name in ``accord.__all__`` and ``accord.models.__all__`` has an entry in docs/api.md, and
  every parameter of its signature is mentioned in that entry;
- the ``>>>`` examples in the docs pages run and print what the pages say (doctest);
- relative links between docs pages, examples and the README resolve, anchors included.
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import inspect
import io
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import cast

import pytest

import accord
import accord.models

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = DOCS / "api.md"
# The pages whose examples are doctests (other pages may hold examples that need a model).
DOCTEST_PAGES = ["concepts.md", "vote.md", "retry.md", "budget.md", "normalize.md", "parsing.md", "prompting.md", "result.md", "service.md", "ledger.md",
                 "api.md"]
LINKED_PAGES = ["index.md", "tutorial.md", "figures.md", "architecture.md", *DOCTEST_PAGES]


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


def test_each_entry_and_each_parameter_is_listed_once() -> None:
    """No public name has two entries, and no entry lists a parameter twice (``extract`` once was)."""
    text = API.read_text(encoding="utf-8")
    headings = re.findall(r"^### (.*)$", text, flags=re.M)
    assert sorted({h for h in headings if headings.count(h) > 1}) == []
    for heading, body in sections(text).items():
        bullets = re.findall(r"^- `(\w+)`", body, flags=re.M)
        assert sorted({b for b in bullets if bullets.count(b) > 1}) == [], f"docs/api.md, {heading}: listed twice"


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


# -- documented signatures against inspect.signature ----------------------------------------------

# Factories whose **kwargs go straight to a backend class: their documented options are that class's.
FORWARDED = {
    "accord.models.openai": ("accord.backends.openai._backend", "OpenAIBackend"),
    "accord.models.transformers": ("accord.backends.local._backend", "TransformersBackend"),
}
# The SDK client options a factory's **client_options takes by name (any other is a ConfigError).
CLIENT_OPTIONS = {
    "accord.models.openai": "accord.backends.openai._options",
    "accord.models.anthropic": "accord.backends.anthropic._clients",
}
_HEADING = re.compile(r"^#{1,6} `(accord(?:\.models)?(?:\.\w+)?)`\s*$", re.M)
_CALL = re.compile(r"^(?P<name>(?:accord\.)?(?:models\.)?[A-Za-z_]\w*(?:\.\w+)*)\((?P<args>.*)\)(?:\s*->.*)?$")
_ITEM = re.compile(r"^(?:\*|\.\.\.|\*\*?[A-Za-z_]\w*|[A-Za-z_]\w*(?:=.+)?)$")


def _code(text: str) -> tuple[list[list[str]], str]:
    """The lines of each python (or plain) fenced block, and the prose outside blocks."""
    found: list[list[str]] = []
    prose: list[str] = []
    lines: list[str] | None = None
    for line in text.splitlines():
        fence = re.match(r"^\s*```(\w*)", line)
        if fence and lines is None:
            lines = [] if fence.group(1) in ("", "python") else None
            if lines is None:
                lines = ["<skip>"]
            continue
        if fence and lines is not None:
            if lines[:1] != ["<skip>"]:
                found.append(lines)
            lines = None
            continue
        (lines if lines is not None else prose).append(line)
    return found, "\n".join(prose)


def _statements(lines: list[str]) -> list[str]:
    """Statements of a code block (continuation lines joined), doctest lines left out."""
    out, buffer = [], ""
    for line in lines:
        stripped = line.strip()
        if not buffer and (not stripped or stripped.startswith((">>>", "...", "#"))):
            continue
        buffer += (" " if buffer else "") + re.sub(r"\s+#.*$", "", stripped)
        if buffer.count("(") <= buffer.count(")"):
            out.append(buffer)
            buffer = ""
    return out


def _split(args: str) -> list[str]:
    """Top-level comma-separated items of an argument list."""
    items, depth, current, quote = [], 0, "", ""
    for char in args:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        current += char
    return [*items, current.strip()] if current.strip() else items


def _one_call(args: str) -> bool:
    """Whether ``args`` is the whole argument list of one call (its parentheses balance inside)."""
    depth = 0
    for char in args:
        depth += (char in "([{") - (char in ")]}")
        if depth < 0:
            return False
    return depth == 0


def _resolve(name: str, section: str | None) -> tuple[str, object] | None:
    """The qualified name and object a documented name stands for (None: not a public name)."""
    if section is not None and not name.startswith(("accord.", "models.")):
        base = section.rsplit(".", 1)[-1]
        head, _, rest = name.partition(".")
        if head != base:
            return None
        name = section + (f".{rest}" if rest else "")
    name = "accord." + name if name.startswith("models.") else name
    if not name.startswith("accord."):
        return None
    obj: object = accord
    for part in name.split(".")[1:]:
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return name, obj


def documented_signatures() -> list[tuple[str, str, object, list[str], bool]]:
    """(where, qualified name, object, items, signature-shaped) for every documented call form.

    api.md: the first code block of each entry and its method bullets are signatures. Other
    pages: code statements and code spans that start with ``accord.`` or ``models.``; a
    signature when every item looks like a parameter and it has a bare ``*`` or a ``**name``,
    or it is a code statement of at least three items without ``...`` (else it is a call
    example, checked only for names that exist).
    """
    found = []
    for path in sorted(DOCS.rglob("*.md")):  # docs/providers/ too
        page = path.relative_to(DOCS).as_posix()
        text = path.read_text(encoding="utf-8")
        if page == "api.md":
            parts = _HEADING.split(text)
            for qualified, body in zip(parts[1::2], parts[2::2], strict=True):
                blocks, _ = _code(body)
                for statement in _statements(blocks[0]) if blocks else []:
                    found.append((page, statement, qualified, True))  # the entry's signature
                base = qualified.rsplit(".", 1)[-1]
                for span in re.findall(r"`(?:async )?([^`\n]+)`", _code(body)[1]):
                    head = span.split("(", 1)[0]
                    if head == base or (re.fullmatch(r"[a-z_]\w*", head) and head != base and not head.startswith("_")):
                        found.append((page, span if head == base else f"{base}.{span}", qualified, False))
            continue
        blocks, prose = _code(text)
        statements = [(s, True) for lines in blocks for s in _statements(lines)]
        spans = [(s, False) for s in re.findall(r"`([^`\n]+)`", prose)]
        found += [(page, t, None, block) for t, block in statements + spans if t.startswith(("accord.", "models."))]
    out: list[tuple[str, str, object, list[str], bool]] = []
    for where, statement, section, first_block in found:
        in_api = section is not None and first_block  # api.md: an entry's signature block
        block = first_block
        match = _CALL.match(statement)
        if match is not None and not _one_call(match["args"]):
            continue  # ``Stabilizer(model, Review).run(...)``: an expression, not a signature
        resolved = _resolve(match["name"], section) if match else None
        if match is None or resolved is None or not callable(resolved[1]):
            continue
        obj: object = resolved[1]
        items = _split(match["args"])
        shaped = all(_ITEM.match(i) for i in items)
        marked = any(i == "*" or i.startswith("**") for i in items) or (block and "..." not in items and len(items) >= 3)
        api_span = section is not None and not first_block  # a method or form named in an api.md entry's text
        out.append((where, resolved[0], obj, items, in_api or (shaped and (marked or api_span))))
    return out


def real_parameters(qualified: str, obj: object, forwarded: bool = False) -> list[inspect.Parameter]:
    """The parameters as inspect.signature reports them (a dataclass field's default factory
    called); with ``forwarded``, a forwarding factory's options, and the client options it
    takes by name, as keyword-only parameters."""
    assert callable(obj), qualified
    params = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
    obj = cast(object, obj)  # is_dataclass below narrows a plain object, not a callable
    if dataclasses.is_dataclass(obj):
        factories = {f.name: f.default_factory for f in dataclasses.fields(obj) if f.default_factory is not dataclasses.MISSING}
        params = [p.replace(default=factories[p.name]()) if p.name in factories else p for p in params]
    if forwarded and qualified in FORWARDED:
        module, name = FORWARDED[qualified]
        target = getattr(__import__(module, fromlist=[name]), name)
        named = {p.name for p in params}
        extra = [p.replace(kind=p.KEYWORD_ONLY) for p in inspect.signature(target).parameters.values() if p.name not in named]
        params = [p for p in params if p.kind is not p.VAR_KEYWORD] + extra
    if forwarded and qualified in CLIENT_OPTIONS:
        named = {p.name for p in params}
        taken = __import__(CLIENT_OPTIONS[qualified], fromlist=["CLIENT_OPTIONS"]).CLIENT_OPTIONS
        params = [p for p in params if p.kind is not p.VAR_KEYWORD]
        params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in taken if name not in named]
    return params


def signature_problems(qualified: str, obj: object, items: list[str], signature: bool) -> list[str]:
    """What the documented items get wrong about the real signature (a forwarding factory's
    documented options may be its target's)."""
    problems = _problems(real_parameters(qualified, obj), items, signature)
    if problems and qualified in {*FORWARDED, *CLIENT_OPTIONS} and not _problems(real_parameters(qualified, obj, forwarded=True), items, signature):
        return []
    return problems


def _problems(params: list[inspect.Parameter], items: list[str], signature: bool) -> list[str]:
    by_name = {p.name: p for p in params}
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    problems = []
    keywords = [i.split("=", 1)[0].strip() for i in items if "=" in i and not i.startswith("*")]
    for name in keywords:
        if name not in by_name or by_name[name].kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            problems.append(f"no parameter {name!r}" + (" (it would only be swallowed by **kwargs)" if takes_kwargs else ""))
    if not signature:
        return problems
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    real_names = [p.name for p in named]
    # Each run of names between "..." must appear in order; the ends are anchored unless elided.
    runs: list[list[str]] = []
    current: list[str] = []
    for item in items:
        if item == "...":
            runs.append(current)
            current = []
        elif item != "*" and not item.startswith("*"):
            current.append(item.split("=", 1)[0].strip())
    runs.append(current)
    position = 0
    for index, run in enumerate(runs):
        if not run:
            continue
        spots = [i for i in range(position, len(real_names) - len(run) + 1) if real_names[i : i + len(run)] == run]
        if not spots or (index == 0 and spots[0] != 0):
            problems.append(f"documents {run}, the signature has {real_names}")
            break
        position = spots[0] + len(run)
        if index == len(runs) - 1 and position != len(real_names):
            problems.append(f"omits {real_names[position:]} (end the list with ... if that is meant)")
    if any(i.startswith("**") for i in items) != takes_kwargs and "..." not in items:
        problems.append("**kwargs documented but not taken" if not takes_kwargs else "takes **kwargs, not documented")
    star = items.index("*") if "*" in items else next((i for i, item in enumerate(items) if re.match(r"^\*\w", item)), None)
    for i, item in enumerate(items):
        name = item.split("=", 1)[0].strip()
        if name not in by_name:
            continue
        param = by_name[name]
        keyword_only = star is not None and i > star
        if keyword_only != (param.kind is param.KEYWORD_ONLY):
            problems.append(f"{name!r} is {'keyword-only' if param.kind is param.KEYWORD_ONLY else 'positional'} in the signature")
        default = item.split("=", 1)[1].strip() if "=" in item else None
        if default is None:
            if param.default is not param.empty and param.kind is not param.KEYWORD_ONLY:
                problems.append(f"{name!r} has a default ({param.default!r}), not documented")
            continue
        if param.default is param.empty:
            problems.append(f"{name!r} is required, documented with a default {default}")
            continue
        try:
            value = ast.literal_eval(default)
        except (ValueError, SyntaxError):
            label = getattr(param.default, "__name__", None)
            if label is not None and default.rsplit(".", 1)[-1] != label:
                problems.append(f"{name!r} defaults to {label}, documented {default}")
            continue
        if value != param.default or type(value) is not type(param.default):
            problems.append(f"{name!r} defaults to {param.default!r}, documented {default}")
    return problems


@pytest.mark.parametrize(
    "where,qualified,obj,items,signature", documented_signatures(), ids=[f"{w}:{q}" for w, q, *_ in documented_signatures()]
)
def test_documented_signatures_match_the_code(where: str, qualified: str, obj: object, items: list[str], signature: bool) -> None:
    problems = signature_problems(qualified, obj, items, signature)
    assert not problems, f"docs/{where}, `{qualified}({', '.join(items)})`: " + "; ".join(problems)


def test_the_signature_check_catches_what_drifted() -> None:
    """The check itself: the drift issue #15 found would fail it."""
    assert signature_problems("accord.models.local", accord.models.local, ['dtype="float32"', "threads=None", "bogus=None"], True)
    retry = ['attempts=3', 'transport_attempts=4', 'wait=...', 'grow_max_tokens=2.0', 'stop=None', 'transport_stop=None', 'grow_loops=False']
    assert any("max_wait" in p for p in signature_problems("accord.Retry", accord.Retry, retry, True))
    assert signature_problems("accord.Budget", accord.Budget, ["max_seconds=1", "max_calls=None", "max_tokens=None"], True)
    assert not signature_problems("accord.Budget", accord.Budget, ["max_seconds=300.0", "max_calls=None", "max_total_tokens=None", "max_cost=None", "max_tokens=None"], True)
    # a client option the factory takes by name is documented; a misspelt one is not
    assert not signature_problems("accord.models.openai", accord.models.openai, ['base_url="u"', 'api_key="k"'], False)
    assert signature_problems("accord.models.openai", accord.models.openai, ['base_url="u"', 'apikey="k"'], False)
    assert not signature_problems("accord.models.anthropic", accord.models.anthropic, ['model="m"', 'auth_token="t"'], False)
