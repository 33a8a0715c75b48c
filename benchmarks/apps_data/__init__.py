"""The application schemas of benchmarks/apps.py, and their inputs, written for this repo.

Frozen before the benchmark was first run (see git history): inputs and gold are not edited to
make a policy look better. Four schemas as applications write them (pydantic models, with the
types and ``Field`` constraints their authors would use), each with 10 or more inputs of 40-150
words. Each input: ``id``, ``text`` (what the application received) and ``gold``: the expected
value of the decisive fields the text settles, by path (dotted keys, ``[]`` for the items of an
array, as ``accord.Schema.describe()["roles"]`` names them). A path under ``[]`` holds the list
of its values, compared as a multiset; paths under the same array are compared as a multiset of
tuples (one per item). A field the text does not settle has no gold.

    python benchmarks/apps_data/__init__.py     # every input as JSON lines (id, schema, prompt, gold)
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the benchmarks folder on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apps_data import invoices, meetings, profiles, tickets


@dataclass(frozen=True)
class App:
    """One application schema and its inputs."""

    name: str
    model: type
    instruction: str  # what the application puts before the input text
    items: tuple[dict[str, Any], ...]

    def prompt(self, item: dict[str, Any]) -> str:
        return self.instruction + item["text"]


APPS = (
    App("tickets", tickets.TicketTriage, tickets.INSTRUCTION, tuple(tickets.ITEMS)),
    App("invoices", invoices.Invoice, invoices.INSTRUCTION, tuple(invoices.ITEMS)),
    App("profiles", profiles.Profile, profiles.INSTRUCTION, tuple(profiles.ITEMS)),
    App("meetings", meetings.MeetingNotes, meetings.INSTRUCTION, tuple(meetings.ITEMS)),
)


if __name__ == "__main__":
    for app in APPS:
        for item in app.items:
            sys.stdout.write(json.dumps({"id": item["id"], "schema": app.model.__name__, "prompt": app.prompt(item),
                                         "gold": item["gold"]}, ensure_ascii=False) + "\n")
