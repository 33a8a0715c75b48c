"""What prompt caching saves on Claude's price table: repeated ballots billed as cached input.

    python benchmarks/cache_cost.py [--quick] [--check] [--base-url URL --model NAME]

Decides one long prompt (about 1,500 tokens: a document and a question) in k ballots through
``accord.models.anthropic``, against a real server that speaks the Messages API: by default vLLM
serving the embedded model (``POST /v1/messages``; inside the test suite, ``--quick`` reuses the
session's server, ``$ACCORD_TEST_VLLM_URL``), or any other given with ``--base-url`` (Anthropic's
API itself, with ``ANTHROPIC_API_KEY``). Every request goes through a recording proxy
(tests/fault_proxy.py), so what is printed as marked is what the server received.

For each run it prints the input tokens the server reported, where the requests carried
``cache_control``, the cache reads and writes the server reported, and the input cost on
Anthropic's price table (Claude Sonnet 4.5: $3 per million input tokens, a cache write 1.25x, a
read 0.1x) against the same ballots uncached. vLLM reports no cache fields here: the bill is then
computed from the marks accord sent, as Anthropic bills them (the first ballot writes the marked
prefix, each later one reads it), and the output says so. Target: at most 0.7x the uncached input
cost for 2 ballots. Then a short prompt, below the minimum cacheable length: never marked, billed
exactly as uncached (a mark there buys nothing: the prefix is not cached).

``--quick`` (the suite's): k = 2 only, in well under a minute on a running server. The full run
adds k = 3 and 5. ``--check`` exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # servers.py and fault_proxy.py: the test servers

import accord  # noqa: E402
from accord import Budget, Stabilizer, Vote, models  # noqa: E402
from accord.backends.anthropic._caps import Capabilities  # noqa: E402
from fault_proxy import FaultProxy, fault_proxy  # noqa: E402

REUSE_URL, REUSE_MODEL = "ACCORD_TEST_VLLM_URL", "ACCORD_TEST_VLLM_MODEL"  # set by tests/conftest.py
PRICED = "claude-sonnet-4-5"
PRICES = accord.Prices({PRICED: (3.00, 15.00, 0.30, 3.75)})  # per 1M: input, output, cache read, cache write
TARGET = 0.7
Sentiment = Literal["positive", "negative", "neutral"]
QUESTION = "Classify the sentiment of the last review as positive, negative or neutral.\nReview: I loved this movie, it was wonderful."
DOCUMENT = (
    "The committee met again on Thursday to review the quarterly figures, and the discussion ran long. ",
    "Rain had fallen all night over the valley, and by morning the river was high and brown. ",
    "Our records show that the shipment left the warehouse on time but was held at the border for a week. ",
    "The museum opened its new wing in the spring, and visitors came from every part of the region. ",
)


def long_prompt(tokens: int = 1500) -> str:
    """A document and the question, about ``tokens`` tokens by accord's estimate (characters / 4)."""
    text, turn = "", 0
    while len(text) < tokens * 4 - len(QUESTION):
        text += DOCUMENT[turn % len(DOCUMENT)]
        turn += 1
    return f"{text}\n\n{QUESTION}"


def marks(body: dict[str, Any]) -> list[str]:
    found = [f"system[{i}]" for i, block in enumerate(body.get("system") or []) if "cache_control" in block]
    for i, turn in enumerate(body["messages"]):
        found += [f"messages[{i}].content[{j}]" for j, block in enumerate(turn["content"]) if "cache_control" in block]
    return found


def decide(model: Any, prompt: str, k: int) -> accord.Result[Any]:
    stabilizer = Stabilizer(model, schema=Sentiment, vote=Vote(k=k, gate=None, early_stop=False), budget=Budget(max_seconds=300))
    try:
        return stabilizer.run(prompt)
    except accord.AccordError as exc:  # no consensus is still k ballots billed
        if exc.result is None:
            raise
        return exc.result


def bill(result: accord.Result[Any], bodies: list[dict[str, Any]]) -> tuple[float, float, str]:
    """(input cost as billed, uncached input cost, where the cache figures came from)."""
    ballots = [b for b in result.ballots if b.usage.prompt_tokens is not None]
    uncached = sum(PRICES.cost(b.usage.prompt_tokens, 0, PRICED) or 0.0 for b in ballots)
    if any(b.usage.cached_tokens is not None or b.usage.cache_write_tokens is not None for b in ballots):
        billed = sum(PRICES.cost(b.usage.prompt_tokens, 0, PRICED, cached=b.usage.cached_tokens, written=b.usage.cache_write_tokens)
                     or 0.0 for b in ballots)
        return billed, uncached, "the cache reads and writes the server reported"
    billed, written = 0.0, False
    for ballot, body in zip(ballots, bodies, strict=False):
        tokens = ballot.usage.prompt_tokens or 0  # the mark is on the prompt's last block: the whole input is the prefix
        if marks(body):
            billed += PRICES.cost(tokens, 0, PRICED, cached=tokens if written else 0, written=0 if written else tokens) or 0.0
            written = True
        else:
            billed += PRICES.cost(tokens, 0, PRICED) or 0.0
    return billed, uncached, ("the server reported no cache fields: billed as Anthropic bills the marks accord sent "
                              "(the first marked ballot writes the prefix at 1.25x, each later one reads it at 0.1x)")


def run(proxy: FaultProxy, model_name: str | None, prompt: str, k: int, label: str) -> float:
    proxy.clear()
    model = models.anthropic(base_url=proxy.url, model=model_name, max_tokens=16, structured="output_config",
                             capabilities=Capabilities())
    begin = time.perf_counter()
    result = decide(model, prompt, k)
    seconds = time.perf_counter() - begin
    bodies = proxy.bodies()
    cache = result.ballots[0].meta.get("cache", {})
    reported = [b.usage.prompt_tokens for b in result.ballots]
    print(f"{label}, k={k}: {len(prompt):,} characters, estimated {cache.get('estimated_tokens', 0):,} tokens "
          f"(minimum {cache.get('minimum', 0):,}), the server counted {reported[0]:,} input tokens per ballot; "
          f"{'marked cacheable' if cache.get('marked') else 'not marked'}; answer {result.value!r}, {seconds:.1f} s")
    for i, (ballot, body) in enumerate(zip(result.ballots, bodies, strict=False)):
        usage = ballot.usage
        print(f"  ballot {i + 1}: cache_control on {', '.join(marks(body)) or 'nothing'}; reported cache write "
              f"{_said(usage.cache_write_tokens)}, cache read {_said(usage.cached_tokens)}")
    billed, uncached, source = bill(result, bodies)
    ratio = billed / uncached if uncached else 1.0
    print(f"  input cost on {PRICED} ($3/M input, $3.75/M cache write, $0.30/M cache read): ${billed:.6f} billed vs "
          f"${uncached:.6f} uncached = {ratio:.2f}x")
    print(f"  from {source}")
    return ratio


def _said(tokens: int | None) -> str:
    return "not reported" if tokens is None else f"{tokens:,}"


def measure(upstream: str, model_name: str | None, quick: bool) -> float:
    with fault_proxy(upstream) as proxy:
        ratios = {k: run(proxy, model_name, long_prompt(), k, "long prompt") for k in ((2,) if quick else (2, 3, 5))}
        short = run(proxy, model_name, QUESTION, 2, "short prompt")
        never = all(not marks(body) for body in proxy.bodies())
    print(f"k=2 on the long prompt: {ratios[2]:.2f}x the uncached input cost (target <= {TARGET:.2f}x: "
          f"{'met' if ratios[2] <= TARGET else 'MISSED'})")
    print(f"short prompt: {'never marked' if never else 'MARKED'} (billed {short:.2f}x: below the minimum a mark buys nothing)")
    return ratios[2] if never else float("inf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="k = 2 only (the suite's)")
    parser.add_argument("--check", action="store_true", help=f"exit 1 unless 2 ballots cost at most {TARGET}x and the short prompt is never marked")
    parser.add_argument("--base-url", help="a Messages server (default: the session's vLLM in --quick, else a vLLM started here)")
    parser.add_argument("--model", help="the model name (default: the server's one model)")
    args = parser.parse_args(argv)
    url, model_name = args.base_url, args.model
    if url is None and args.quick and os.environ.get(REUSE_URL):
        url, model_name = os.environ[REUSE_URL], os.environ.get(REUSE_MODEL)
    if url is None and os.environ.get("ACCORD_SKIP_VLLM") == "1":  # as the vLLM tests are (tests/conftest.py)
        print("cache_cost: skipped, ACCORD_SKIP_VLLM=1")
        return 0
    if url is not None:
        print(f"cache cost through models.anthropic, server {url}")
        ratio = measure(url.rstrip("/").removesuffix("/v1"), model_name, args.quick)
    else:
        from servers import model_folder, serve_vllm

        try:
            folder = model_folder()
        except accord.ModelNotInstalled as exc:
            print(f"cache_cost: skipped, {exc}")
            return 0
        with serve_vllm(folder) as server:
            print(f"cache cost through models.anthropic, vLLM started in {server.started_in:.0f} s (POST /v1/messages)")
            ratio = measure(server.url.removesuffix("/v1"), server.model, args.quick)
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
