"""Lists that run away: the invoice schema with unbounded line items, and with bounds, on the
embedded model.

    python benchmarks/runaway.py [--quick] [--limit N] [--seconds S]

Each shipped invoice (benchmarks/apps_data/invoices.py: ten, 40-150 words each) is decided by
``Stabilizer(accord.models.local(), schema)`` with the default policy, one at a time, under two
schemas:

  unbounded   ``line_items: list[LineItem]``, as a new user writes it (the one apps.py measures)
  bounded     ``line_items: list[LineItem] = Field(max_length=5)``, the quantity and the prices
              with ranges (docs/retry.md, "Bound your schema")

Printed per schema and invoice: seconds to a valid value or a typed error, calls, tokens written
and the model's forward passes (fewer than tokens where forced text was fed in, docs/local.md,
"Forced text"; ``ACCORD_JUMP_FORWARD=0`` asks the model for every token), whether any call
asked for more ``max_tokens`` than the first (a grown call: the runaway this guards against), the
runaways caught (``error["loop"]["runaway"]``), and right on gold (apps_fields.right_on_gold).
Then the targets of issue 45: unbounded, a valid value or a typed runaway error within 30 s and
never a grown ``max_tokens``; bounded, valid within 10 s. Seconds are wall-clock on this machine:
run it quiet. ``--quick`` (the suite): invoice-3, unbounded only (its line items run away alike but for a number).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accord
from apps_data.invoices import INSTRUCTION, ITEMS, Invoice
from apps_fields import right_on_gold

UNBOUNDED_SECONDS = 30.0
BOUNDED_SECONDS = 10.0


class BoundedLineItem(BaseModel):
    description: str
    quantity: int = Field(ge=0, le=1_000_000)
    unit_price: Decimal = Field(ge=0, le=1_000_000)


class BoundedInvoice(Invoice):
    line_items: list[BoundedLineItem] = Field(max_length=5)  # type: ignore[assignment]
    total: Decimal = Field(ge=0, le=100_000_000)


SCHEMAS: dict[str, type[BaseModel]] = {"unbounded": Invoice, "bounded": BoundedInvoice}


def decide(model: Any, schema: type[BaseModel], item: dict[str, Any], seconds: float) -> dict[str, Any]:
    """One invoice under one schema: what it took and what came out."""
    passes: list[int] = []
    hook = model.model.register_forward_pre_hook(lambda *_: passes.append(1))
    started = time.perf_counter()
    stabilizer = accord.Stabilizer(model, schema=schema, budget=accord.Budget(max_seconds=seconds))
    try:
        result = stabilizer.run(INSTRUCTION + item["text"])
        error = None
    except accord.AccordError as exc:
        result, error = exc.result, type(exc).__name__
    took = time.perf_counter() - started
    hook.remove()
    ballots = list(result.ballots) if result is not None else []
    tokens = sum(b.usage.completion_tokens or 0 for b in ballots)
    runaways = [b.error["loop"]["runaway"] for b in ballots if b.error and (b.error.get("loop") or {}).get("runaway")]
    # a call cut off with no loop or runaway found is asked again with more max_tokens: grown
    grown = any(b.error and b.error.get("stage") == "truncated" and any(a.slot == b.slot and a.attempt > b.attempt for a in ballots)
                for b in ballots)
    schema_ = accord.Schema.of(schema)
    right = bool(result is not None and result.value is not None and right_on_gold(schema_, item["gold"], schema_.dump(result.value)))
    return {"id": item["id"], "seconds": round(took, 1), "calls": len(ballots), "tokens": tokens, "passes": len(passes), "error": error, "valid": error is None and result is not None,
            "grown": grown, "runaways": runaways, "right": right}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="invoice-3, unbounded (the test suite)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N invoices")
    parser.add_argument("--seconds", type=float, default=300.0, help="each run's time bound (default 300, accord's)")
    args = parser.parse_args()
    items = ITEMS[3:4] if args.quick else ITEMS[: args.limit or len(ITEMS)]
    model = accord.models.local()
    model.generate  # noqa: B018 - loaded before the clock starts
    model.describe()
    jump = os.environ.get("ACCORD_JUMP_FORWARD", "1") != "0"
    print(f"embedded: {model.fingerprint}, layout {getattr(model, 'layout', '?')}, forced text {'fed in' if jump else 'asked for'}; "
          f"{len(items)} invoices, quiet, one at a time")
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, schema in SCHEMAS.items() if not args.quick else [("unbounded", Invoice)]:
        rows[name] = [decide(model, schema, item, args.seconds) for item in items]
        for row in rows[name]:
            outcome = "valid" if row["valid"] else row["error"]
            print(f"  {name:9} {row['id']:10} {row['seconds']:6.1f} s  {row['calls']} calls  {row['tokens']:4} tokens  "
                  f"{row['passes']:4} passes  {outcome:15} "
                  f"right={'yes' if row['right'] else 'no':3}  grown={'yes' if row['grown'] else 'no':3}  runaways={row['runaways']}")
    if args.quick:
        report_quick(rows["unbounded"])
    else:
        report(rows)


def report_quick(free: list[dict[str, Any]]) -> None:
    row = free[0]
    print(f"unbounded, {row['id']}: {'valid' if row['valid'] else row['error']} in {row['seconds']:.1f} s, {row['calls']} calls, "
          f"{row['tokens']} tokens in {row['passes']} forward passes, "
          f"grown {'yes' if row['grown'] else 'no'}, runaways caught {len(row['runaways'])}")


def report(rows: dict[str, list[dict[str, Any]]]) -> None:
    free, bound = rows["unbounded"], rows["bounded"]
    typed = ("InvalidOutput", "NoConsensus")
    ok_free = [r for r in free if (r["valid"] or r["error"] in typed) and r["seconds"] <= UNBOUNDED_SECONDS and not r["grown"]]
    ok_bound = [r for r in bound if r["valid"] and r["seconds"] <= BOUNDED_SECONDS]
    for name, group in rows.items():
        n = len(group)
        print(f"{name}: valid {sum(r['valid'] for r in group)}/{n}, right {sum(r['right'] for r in group)}/{n}, "
              f"tokens {sum(r['tokens'] for r in group)}, passes {sum(r['passes'] for r in group)}, "
              f"calls {sum(r['calls'] for r in group) / n:.2f} per invoice, seconds max {max(r['seconds'] for r in group):.1f}, "
              f"grown {sum(r['grown'] for r in group)}, runaways caught {sum(len(r['runaways']) for r in group)}")
    print(f"target (unbounded): valid or a typed error within {UNBOUNDED_SECONDS:.0f} s, never grown: "
          f"{len(ok_free)}/{len(free)} {'met' if len(ok_free) == len(free) else 'NOT met'}")
    print(f"target (bounded): valid within {BOUNDED_SECONDS:.0f} s: {len(ok_bound)}/{len(bound)} {'met' if len(ok_bound) == len(bound) else 'NOT met'}")


if __name__ == "__main__":
    main()
