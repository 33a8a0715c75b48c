"""The task set the stability and gating benchmarks share: 62 items, 5 kinds, with gold answers.

Frozen before any tuning (see git history): items are not edited to make a policy look better.
Each item: ``id``, ``kind``, ``prompt``, ``schema`` (a ``module:Name`` that ``accord audit``
can import too), ``gold`` (the expected value as JSON data).

    python benchmarks/tasks.py > tasks.jsonl      # the same items as PROMPTS.jsonl for `accord audit`
"""

from __future__ import annotations

import json
import sys
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel

Sentiment = Literal["positive", "negative", "neutral"]


class City(BaseModel):
    city: str
    country: str


class Person(BaseModel):
    name: str
    age: int
    home: City


class YesNo(BaseModel):
    answer: bool


class Number(BaseModel):
    answer: int


class Day(BaseModel):
    date: date


SENTIMENT = [
    ("I absolutely loved this movie, the acting was wonderful.", "positive"),
    ("The food was cold and the waiter was rude.", "negative"),
    ("The package arrived on Tuesday.", "neutral"),
    ("Best purchase I have made all year!", "positive"),
    ("This phone stopped working after two days. Terrible.", "negative"),
    ("The meeting is scheduled for 3 pm.", "neutral"),
    ("What a delightful little cafe, I will come back.", "positive"),
    ("I want a refund, this is the worst service ever.", "negative"),
    ("The book has 300 pages.", "neutral"),
    ("The concert was amazing and the crowd was friendly.", "positive"),
    ("My flight was delayed for six hours and nobody helped.", "negative"),
    ("The store opens at nine in the morning.", "neutral"),
    ("Great value, works perfectly, highly recommended.", "positive"),
    ("The hotel room was dirty and smelled bad.", "negative"),
    ("The train leaves from platform four.", "neutral"),
    ("I am so happy with my new bike, it rides beautifully.", "positive"),
]

YES_NO = [
    ("Is Paris the capital of France?", True),
    ("Is the sun cold?", False),
    ("Do fish live in water?", True),
    ("Is 10 greater than 100?", False),
    ("Is water wet?", True),
    ("Can a dog fly without help?", False),
    ("Is ice frozen water?", True),
    ("Is the moon made of cheese?", False),
    ("Do humans need oxygen to live?", True),
    ("Is 3 an even number?", False),
    ("Is Tokyo in Japan?", True),
    ("Does a triangle have four sides?", False),
]

NUMBERS = [
    ("What is 2 + 3?", 5),
    ("What is 7 + 5?", 12),
    ("What is 10 - 4?", 6),
    ("How many legs does a dog have?", 4),
    ("What is 3 times 3?", 9),
    ("How many days are in a week?", 7),
    ("What is 20 divided by 4?", 5),
    ("How many months are in a year?", 12),
    ("What is 8 + 8?", 16),
    ("How many sides does a triangle have?", 3),
    ("What is 100 - 1?", 99),
    ("How many hours are in a day?", 24),
]

DATES = [
    ("The meeting is on March 3, 2021. On what date is the meeting?", "2021-03-03"),
    ("Alice was born on 14 July 1990. What is her date of birth?", "1990-07-14"),
    ("The invoice is due on 2023-11-30. When is the invoice due?", "2023-11-30"),
    ("We launched the product on January 15, 2020. When did we launch?", "2020-01-15"),
    ("The concert takes place on 5 May 2024. What is the date of the concert?", "2024-05-05"),
    ("The store reopened on December 1, 2022. When did the store reopen?", "2022-12-01"),
    ("Her last day at work was 2019-08-31. What was her last day?", "2019-08-31"),
    ("The bridge opened on June 21, 1998. When did the bridge open?", "1998-06-21"),
    ("The exam is on 10 February 2025. When is the exam?", "2025-02-10"),
    ("The treaty was signed on April 2, 1975. When was it signed?", "1975-04-02"),
]

PEOPLE = [
    ("Maria Lopez is 34 years old and lives in Madrid, Spain.", ("Maria Lopez", 34, "Madrid", "Spain")),
    ("John Smith, aged 52, lives in London, United Kingdom.", ("John Smith", 52, "London", "United Kingdom")),
    ("Yuki Tanaka is a 28-year-old engineer from Osaka, Japan.", ("Yuki Tanaka", 28, "Osaka", "Japan")),
    ("Pierre Martin (41) lives in Lyon, France.", ("Pierre Martin", 41, "Lyon", "France")),
    ("Anna Schmidt is 19 and lives in Berlin, Germany.", ("Anna Schmidt", 19, "Berlin", "Germany")),
    ("Carlos Silva, 63 years old, lives in Lisbon, Portugal.", ("Carlos Silva", 63, "Lisbon", "Portugal")),
    ("Emma Johnson is 25 years old and lives in Toronto, Canada.", ("Emma Johnson", 25, "Toronto", "Canada")),
    ("Li Wei, aged 47, lives in Shanghai, China.", ("Li Wei", 47, "Shanghai", "China")),
    ("Sofia Rossi is 30 and lives in Rome, Italy.", ("Sofia Rossi", 30, "Rome", "Italy")),
    ("Ahmed Hassan is 38 years old and lives in Cairo, Egypt.", ("Ahmed Hassan", 38, "Cairo", "Egypt")),
    ("Olga Petrova, 55, lives in Moscow, Russia.", ("Olga Petrova", 55, "Moscow", "Russia")),
    ("Lucas Oliveira is 22 and lives in Sao Paulo, Brazil.", ("Lucas Oliveira", 22, "Sao Paulo", "Brazil")),
]


def items() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (text, gold) in enumerate(SENTIMENT):
        out.append({"id": f"sentiment-{i}", "kind": "classification", "schema": "tasks:Sentiment",
                    "prompt": f"Classify the sentiment of this text as positive, negative or neutral.\nText: {text}", "gold": gold})
    for i, (question, yes) in enumerate(YES_NO):
        out.append({"id": f"yesno-{i}", "kind": "yes/no", "schema": "tasks:YesNo",
                    "prompt": f"Answer yes or no. {question}", "gold": {"answer": yes}})
    for i, (question, number) in enumerate(NUMBERS):
        out.append({"id": f"integer-{i}", "kind": "integer", "schema": "tasks:Number",
                    "prompt": f"Answer with a number. {question}", "gold": {"answer": number}})
    for i, (text, day) in enumerate(DATES):
        out.append({"id": f"date-{i}", "kind": "date", "schema": "tasks:Day", "prompt": text, "gold": {"date": day}})
    for i, (text, (name, age, city, country)) in enumerate(PEOPLE):
        out.append({"id": f"person-{i}", "kind": "extraction", "schema": "tasks:Person",
                    "prompt": f"Extract the person's name, age and home city and country.\nText: {text}",
                    "gold": {"name": name, "age": age, "home": {"city": city, "country": country}}})
    return out


if __name__ == "__main__":
    for item in items():
        sys.stdout.write(json.dumps(item) + "\n")
