"""Every benchmark's --quick mode runs in the suite: it must exit 0 and print its figures."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted(p for p in (Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py") if 'add_argument("--quick"' in p.read_text())  # scripts with a --quick mode, not their helper modules


@pytest.mark.parametrize("script", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_benchmark_quick_mode(script: Path) -> None:
    done = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a benchmark prints its figures"


def test_app_schemas_data_holds_its_promises() -> None:
    """benchmarks/apps.py's shipped inputs: 10+ per schema, 40-150 words, gold on real leaves that
    the gold matcher accepts (and refuses when a decisive value moves); invoice totals add up."""
    from datetime import date
    from decimal import Decimal

    import accord

    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        from apps_data import APPS
        from apps_fields import fallback_roles, leaves, normal_path, right_on_gold
    finally:
        sys.path.remove(folder)  # the benchmarks folder holds a vllm.py: off the path again

    assert [app.name for app in APPS] == ["tickets", "invoices", "profiles", "meetings"]
    ids = [item["id"] for app in APPS for item in app.items]
    assert len(ids) == len(set(ids))
    for app in APPS:
        assert len(app.items) >= 10, app.name
        known = leaves(accord.Schema.of(app.model).json_schema)
        for item in app.items:
            assert 40 <= len(item["text"].split()) <= 150, item["id"]
            for path, value in item["gold"].items():
                assert normal_path(path, known) in known, (item["id"], path)
                if "date" in path:
                    for day in value if isinstance(value, list) else [value]:
                        assert day is None or date.fromisoformat(day)
            if "total" in item["gold"]:
                lines = zip(item["gold"]["line_items[].quantity"], item["gold"]["line_items[].unit_price"], strict=True)
                assert sum(q * Decimal(p) for q, p in lines) == Decimal(item["gold"]["total"]), item["id"]
    invoice = accord.Schema.of(APPS[1].model)
    answer = {"vendor": "BRIGHTLINE OFFICE SUPPLY CO", "invoice_number": "INV-2024-0387", "issue_date": "2024-03-04", "due_date": "2024-04-03",
              "currency": "USD", "total": 750.5, "line_items": [{"description": "arm", "quantity": 5, "unit_price": "38.5"},
                                                                {"description": "chair", "quantity": 2, "unit_price": 249},
                                                                {"description": "delivery", "quantity": 1, "unit_price": "60.00"}]}
    assert right_on_gold(invoice, APPS[1].items[0]["gold"], invoice.dump(invoice.validate(answer)))
    answer["line_items"][0]["quantity"] = 4
    assert not right_on_gold(invoice, APPS[1].items[0]["gold"], invoice.dump(invoice.validate(answer)))
    roles = fallback_roles(accord.Schema.of(APPS[0].model).json_schema)
    assert roles["summary"] == "prose" and roles["category"] == "decisive" and roles["tags[]"] == "decisive"
