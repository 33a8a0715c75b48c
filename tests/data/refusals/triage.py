"""The schemas of the refusal corpus: a support desk's ticket triage and its invoices.

``Ticket`` is the shape of issue 33's examples (a category, a priority on a 1-5 scale where 5 is
urgent, a yes/no, tags); ``Invoice`` holds an amount as a ``Decimal``; the scalars are the same
fields asked as the whole answer; ``Answer`` is an object of one field.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel

Category = Literal["billing", "bug", "feature", "account", "other"]
Urgent = bool
Priority = int
Amount = Decimal


class Ticket(BaseModel):
    category: Category
    priority: int
    urgent: bool
    tags: list[str]


class Invoice(BaseModel):
    total: Decimal
    currency: Literal["USD", "EUR", "GBP"]
    paid: bool


class Answer(BaseModel):
    answer: int


class Queue(BaseModel):
    tickets: list[Ticket]
