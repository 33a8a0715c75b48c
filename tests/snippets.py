"""The preamble of the docs' Python blocks: what a snippet on a docs page assumes it has.

tests/test_snippets.py starts each page of docs/ with the public names of this module (README.md
starts with nothing: a newcomer's copy-paste has only what the README shows). Keep it small and
plain: a page's reader should be able to guess each name from the page alone.

- ``accord``, ``models``, ``openai``, ``tenacity``, ``Literal``, ``BaseModel``, ``Field``,
  ``smallest_key``: the imports a page leaves out;
- ``Review`` and ``Invoice``: the schemas the pages ask for;
- ``my_llm_call``: "your model", a function of the prompt; it answers the schema the prompt asks
  for (an invoice when the prompt mentions a vendor, else a review), as a well-behaved model would;
- ``model``: ``accord.models.function(my_llm_call)``, named;
- ``prompt`` and ``prompts``: one review to decide, and a batch of them.

A page whose block needs a real server or the embedded model gets it from the test, not from here
(the address ``http://127.0.0.1:8000/v1`` on a page stands for the suite's server).
"""

from __future__ import annotations

import json
from typing import Literal

import openai
import tenacity
from pydantic import BaseModel, Field

import accord
from accord import models, smallest_key

__all__ = [
    "BaseModel", "Field", "Invoice", "Literal", "Review", "accord", "model", "models", "my_llm_call", "openai", "prompt",
    "prompts", "smallest_key", "tenacity",
]


class Review(BaseModel):
    stars: int = Field(ge=1, le=5)
    sentiment: Literal["positive", "negative", "neutral"]


class Invoice(BaseModel):
    vendor: str
    total: float
    currency: Literal["EUR", "USD"]


def my_llm_call(prompt: str) -> str:
    """A model that reads the prompt: an invoice when it asks for a vendor, else a review."""
    if "vendor" in prompt:
        return json.dumps({"vendor": "ACME GmbH", "total": 1250.0, "currency": "EUR"})
    good = any(word in prompt for word in ("Great", "great", "Love", "love"))
    return json.dumps({"stars": 5, "sentiment": "positive"} if good else {"stars": 2, "sentiment": "negative"})


model = accord.models.function(my_llm_call, name="my-model")
prompt = "Review: 'Great pen, writes smoothly.'"
prompts = ["Review: 'Great pen, writes smoothly.'", "Review: 'Broke after two days. Awful.'"]
