"""The schemas of the malformed-output corpus that are not in benchmarks/tasks.py.

``Profile`` is the schema of issue 14 (``P(name: str, age: int, tags: list[str])``); ``Contact``
exercises keys written another way, a nullable field, an enum and a union.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel


class Profile(BaseModel):
    name: str
    age: int
    tags: list[str]


class Contact(BaseModel):
    first_name: str
    last_name: str
    email: Optional[str]  # required, but may be null  # noqa: UP045 - the corpus runs on Python 3.10 too
    kind: Literal["person", "company"]
    phone: Union[int, str] = ""  # noqa: UP007


# Issue 29: what a word or a number says, the whole answer or a field (negations, hedges, number forms, null-likes).
Flag = bool
Amount = float
Count = int


class Verdict(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    ok: bool


class Labels(BaseModel):
    labels: list[Literal["positive", "negative", "neutral"]]


class Price(BaseModel):
    unit_price: float
    quantity: int
    discount: Optional[float]  # noqa: UP045
