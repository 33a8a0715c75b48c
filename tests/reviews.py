"""What the run tests share: a small schema and its scripted answers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Review(BaseModel):
    stars: int = Field(ge=1, le=5)
    sentiment: Literal["positive", "negative", "neutral"]


GOOD = '{"stars": 4, "sentiment": "positive"}'
OTHER = GOOD.replace('"stars": 4', '"stars": 2')
