"""The hand-written part of the corpus: each malformation class of issue 14, over several values.

    python tests/data/malformed/handwritten.py      # rewrites handwritten.jsonl beside this file

Each case is written from a known value, so its label is the value it was written from, or
``null`` (unrecoverable) when the text no longer says that value: a string or number cut off, a
list cut off, the schema echoed back, prose without the answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

PROFILES = [
    {"name": "Ann", "age": 31, "tags": ["admin", "ops"]},
    {"name": "Bo Li", "age": 45, "tags": ["dev"]},
    {"name": "Carla Diaz", "age": 27, "tags": ["design", "ux", "research"]},
    {"name": "Dev Patel", "age": 38, "tags": ["sales"]},
    {"name": "Eva Novak", "age": 52, "tags": ["finance", "audit"]},
    {"name": "Femi Ade", "age": 19, "tags": ["intern"]},
    {"name": "Greta Berg", "age": 64, "tags": ["board", "legal"]},
    {"name": "Hiro Sato", "age": 23, "tags": ["support"]},
]
PEOPLE = [  # benchmarks/tasks.py's Person: nested object
    {"name": "Maria Lopez", "age": 34, "home": {"city": "Madrid", "country": "Spain"}},
    {"name": "John Smith", "age": 52, "home": {"city": "London", "country": "United Kingdom"}},
    {"name": "Yuki Tanaka", "age": 28, "home": {"city": "Osaka", "country": "Japan"}},
    {"name": "Pierre Martin", "age": 41, "home": {"city": "Lyon", "country": "France"}},
]
CONTACTS = [
    {"first_name": "Ann", "last_name": "Lee", "email": None, "kind": "person", "phone": ""},
    {"first_name": "Acme", "last_name": "Corp", "email": "info@acme.test", "kind": "company", "phone": 5550100},
    {"first_name": "Raj", "last_name": "Iyer", "email": "raj@iyer.test", "kind": "person", "phone": "+44 20 7946 0000"},
]


def py(value: Any) -> str:
    """A Python repr of JSON data (single quotes, True/None)."""
    return repr(value)


def unquoted(value: dict[str, Any]) -> str:
    parts = []
    for key, item in value.items():
        inner = unquoted(item) if isinstance(item, dict) else json.dumps(item)
        parts.append(f"{key}: {inner}")
    return "{" + ", ".join(parts) + "}"


def yaml(value: dict[str, Any], indent: str = "") -> str:
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines.append(f"{indent}{key}:")
            lines.append(yaml(item, indent + "  "))
        elif isinstance(item, list):
            lines.append(f"{indent}{key}:")
            lines.extend(f"{indent}  - {v}" for v in item)
        else:
            lines.append(f"{indent}{key}: {item}")
    return "\n".join(lines)


def cut_after_last_field(value: dict[str, Any]) -> str:
    return json.dumps(value)[:-1]


def cut_mid_string(value: dict[str, Any]) -> str:
    text = json.dumps(value)
    last = text.rfind('"', 0, len(text) - 2)
    return text[: last - 1]  # inside the last string


def cut_mid_number(value: dict[str, Any]) -> str:
    text = json.dumps({k: v for k, v in value.items() if k != "age"} | {"age": value["age"]})
    return text[: text.rfind(str(value["age"])) + 1]  # the first digit of the age only


CLASSES: dict[str, tuple[Callable[[dict[str, Any]], str], bool]] = {
    # class: (how the text is written from the value, does it still say the value)
    "unquoted keys": (unquoted, True),
    "single quotes": (lambda v: py(v).replace("True", "true").replace("None", "null"), True),
    "python literals": (py, True),
    "trailing commas": (lambda v: re.sub(r'([^\s{\[,])\n(\s*[}\]])', r"\1,\n\2", json.dumps(v, indent=2)), True),
    "line comment": (lambda v: json.dumps(v, indent=2).replace("\n", "  // field\n", 1), True),
    "block and hash comments": (lambda v: "/* answer */ " + json.dumps(v, indent=1).replace("\n", "  # note\n", 1), True),
    "fenced with prose": (lambda v: f"Sure! Here is the JSON:\n```json\n{json.dumps(v, indent=2)}\n```\nLet me know.", True),
    "yaml-like lines": (yaml, True),
    "cut after the last complete field": (cut_after_last_field, True),
    "cut mid-string": (cut_mid_string, False),
    "cut mid-number": (cut_mid_number, False),
    "keys in another case": (lambda v: json.dumps({k.upper() if len(k) < 5 else k.title(): x for k, x in v.items()}), True),
    "wrong object quoted first": (lambda v: 'The example {"name": "Example", "age": "unknown"} is not it. '
                                  f"The answer is {json.dumps(v)}", True),
    "raw newline in a string": (lambda v: json.dumps(v).replace(" ", "\n", 1) if " " in json.dumps(v)[10:] else json.dumps(v), True),
    "echoed JSON Schema": (lambda v: '{"properties": {"name": {"title": "Name", "type": "string"}, "age": {"title": "Age", '
                           '"type": "integer"}}, "required": ["name", "age"], "type": "object"}', False),
    "echoed type signature": (lambda v: '{\n  "name": string,\n  "age": int,\n  "tags": string[],\n}', False),
    "prose without the value": (lambda v: f"I found a person named {v['name']} but I am not sure about the rest.", False),
}


def profile_cases() -> list[dict[str, Any]]:
    cases = []
    for name, (write, says) in CLASSES.items():
        for value in PROFILES:
            meant = value
            if name == "raw newline in a string":
                junior = {**value, "name": value["name"] + " Jr"}
                text = json.dumps(junior).replace(" Jr", "\nJr")
                meant = {**value, "name": value["name"] + "\nJr"}
            else:
                text = write(value)
            cases.append({"class": name, "schema": "schemas:Profile", "text": text, "label": meant if says else None})
    # a scalar where the schema wants a list: "tags": "a"
    for value in PROFILES:
        one = {**value, "tags": value["tags"][:1]}
        text = json.dumps({**value, "tags": value["tags"][0]})
        cases.append({"class": "scalar for a list", "schema": "schemas:Profile", "text": text, "label": one})
    # a tuple for the list
    for value in PROFILES[:4]:
        text = "{" + f"'name': {value['name']!r}, 'age': {value['age']}, 'tags': {tuple(value['tags'])!r}" + "}"
        cases.append({"class": "python tuple", "schema": "schemas:Profile", "text": text, "label": value})
    # a list cut off: its length is unknown
    for value in PROFILES[:4]:
        text = json.dumps({"name": value["name"], "age": value["age"], "tags": value["tags"]})[:-2]
        cases.append({"class": "list cut off", "schema": "schemas:Profile", "text": text, "label": None})
    return cases


def person_cases() -> list[dict[str, Any]]:
    cases = []
    for value in PEOPLE:
        cases.append({"class": "unquoted keys", "schema": "tasks:Person", "text": unquoted(value), "label": value})
        cases.append({"class": "yaml-like lines", "schema": "tasks:Person", "text": yaml(value), "label": value})
        cases.append({"class": "python literals", "schema": "tasks:Person", "text": py(value), "label": value})
        text = json.dumps(value)[:-2]  # the inner object closed, the outer cut off
        cases.append({"class": "cut after the last complete field", "schema": "tasks:Person", "text": text + "}", "label": value})
        cases.append({"class": "cut mid-string", "schema": "tasks:Person", "text": text[:-4], "label": None})
        camel = {"Name": value["name"], "AGE": value["age"], "Home": {"City": value["home"]["city"], "country": value["home"]["country"]}}
        cases.append({"class": "keys in another case", "schema": "tasks:Person", "text": json.dumps(camel), "label": value})
        wrong = {"name": value["name"], "age": {"title": "Age", "type": "integer"}, "home": value["home"]}
        cases.append({"class": "echoed JSON Schema", "schema": "tasks:Person", "text": json.dumps(wrong), "label": None})
    return cases


def contact_cases() -> list[dict[str, Any]]:
    cases = []
    for value in CONTACTS:
        snake = json.dumps(value)
        camel = json.dumps({"firstName": value["first_name"], "lastName": value["last_name"], "email": value["email"],
                            "kind": value["kind"].upper(), "phone": value["phone"]})
        cases.append({"class": "keys in another case", "schema": "schemas:Contact", "text": camel, "label": value})
        spaced = "\n".join(f"{k.replace('_', ' ').title()}: {'null' if v is None else v}" for k, v in value.items() if v != "")
        cases.append({"class": "yaml-like lines", "schema": "schemas:Contact", "text": spaced, "label": value})
        missing = {k: v for k, v in value.items() if k != "email" or v is not None}
        if value["email"] is None:
            cases.append({"class": "missing nullable field", "schema": "schemas:Contact", "text": json.dumps(missing), "label": value})
        cases.append({"class": "python literals", "schema": "schemas:Contact", "text": py(value), "label": value})
        cases.append({"class": "fenced with prose", "schema": "schemas:Contact", "text": f"```\n{snake}\n```", "label": value})
    return cases


def bare_answer_cases() -> list[dict[str, Any]]:
    out = []
    for text, label in (("Yes.", True), ("No.", False), ("Yes, it is.", True), ("TRUE", True), ("no", False)):
        out.append({"class": "bare answer for a one-field object", "schema": "tasks:YesNo", "text": text, "label": {"answer": label}})
    for text, label in (("5", 5), ("12.", 12), ("The answer is 7.", 7), ("2 + 3 = 5", 5), ("**24**", 24)):
        out.append({"class": "bare answer for a one-field object", "schema": "tasks:Number", "text": text, "label": {"answer": label}})
    for text in ("Maybe.", "It depends on the day.", "Let me think about 2 + 3."):
        out.append({"class": "prose without the value", "schema": "tasks:YesNo" if "day" not in text else "tasks:Number",
                    "text": text, "label": None})
    return out


# Issue 29: a word or a number that says one value is read (its coercion recorded); one that
# negates, hedges, contradicts itself or has two readings says no value (null), the whole answer
# or a field, a list item, a value under Optional.
REFUSED_CHOICES = ["not positive", "Not negative.", "definitely not neutral", "It isn't positive.", "maybe positive",
                   "probably negative", "positive?", "positive or negative", "neither", "Neither positive nor negative."]
READ_CHOICES = [("Positive.", "positive"), ("**Negative**", "negative"), ("'neutral'", "neutral"), ("Positive!", "positive"),
                ("Sentiment: positive", "positive")]
REFUSED_FLAGS = ["not true", "yes and no", "Yes and no.", "maybe yes", "Not false.", "yes or no"]
READ_FLAGS = [("Yes.", True), ("No!", False), ("**True**", True), ("No, it is not.", False)]
READ_AMOUNTS = [("$1.50", 1.5), ("1/2", 0.5), ("3/4", 0.75), ("45%", 45), ("1,234.5", 1234.5), ("3x10^8", 300000000),
                ("The total is 12.5.", 12.5)]
REFUSED_AMOUNTS = ["0,5", "3,14", "1,234", "1.234,5", "about 4.5", "4.5-5", "~4.5", "not 4.5", "between 4 and 5"]
READ_COUNTS = [("2^10", 1024), ("10^6", 1000000), ("$12", 12), ("1,234", 1234), ("12 items", 12), ("The answer is 42.", 42)]
REFUSED_COUNTS = ["40-45", "about 40", "about 40-45", "~40", "3/4", "40+", "between 40 and 45", "3 or 4", "2 + 3 = 5 or 6"]
NULL_LIKES = ["", "N/A", "null", "None", "n/a"]


def reading_cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(cls: str, ref: str, text: str, label: Any) -> None:
        out.append({"class": cls, "schema": ref, "text": text, "label": label})

    for text in REFUSED_CHOICES:
        cls = "negated choice" if "not" in text.lower() or "n't" in text else "hedged choice"
        add(cls, "tasks:Sentiment", text, None)
        add(cls + " (field)", "schemas:Verdict", json.dumps({"sentiment": text, "ok": True}), None)
        add(cls + " (list item)", "schemas:Labels", json.dumps({"labels": ["neutral", text]}), None)
    for text, member in READ_CHOICES:
        add("choice written another way", "tasks:Sentiment", text, member)
        add("choice written another way (field)", "schemas:Verdict", json.dumps({"sentiment": text, "ok": True}),
            {"sentiment": member, "ok": True})
        add("choice written another way (list item)", "schemas:Labels", json.dumps({"labels": [text, "neutral"]}),
            {"labels": [member, "neutral"]})
    for text in REFUSED_FLAGS:
        add("contradicting yes/no", "schemas:Flag", text, None)
        add("contradicting yes/no (field)", "schemas:Verdict", json.dumps({"sentiment": "neutral", "ok": text}), None)
    for text, value in READ_FLAGS:
        add("yes/no written another way", "schemas:Flag", text, value)
        add("yes/no written another way (field)", "schemas:Verdict", json.dumps({"sentiment": "neutral", "ok": text}),
            {"sentiment": "neutral", "ok": value})
    for text, value in READ_AMOUNTS:
        add("number form with one reading", "schemas:Amount", text, value)
        add("number form with one reading (field)", "schemas:Price",
            json.dumps({"unit_price": text, "quantity": 1, "discount": None}), {"unit_price": value, "quantity": 1, "discount": None})
        add("number form with one reading (under Optional)", "schemas:Price",
            json.dumps({"unit_price": 1, "quantity": 1, "discount": text}), {"unit_price": 1, "quantity": 1, "discount": value})
    for text in REFUSED_AMOUNTS:
        add("number form with two readings", "schemas:Amount", text, None)
        add("number form with two readings (field)", "schemas:Price",
            json.dumps({"unit_price": text, "quantity": 1, "discount": None}), None)
        add("number form with two readings (under Optional)", "schemas:Price",
            json.dumps({"unit_price": 1, "quantity": 1, "discount": text}), None)
    for text, value in READ_COUNTS:
        add("number form with one reading", "schemas:Count", text, value)
        add("number form with one reading (field)", "schemas:Price",
            json.dumps({"unit_price": 2.5, "quantity": text, "discount": 0.1}), {"unit_price": 2.5, "quantity": value, "discount": 0.1})
    for text in REFUSED_COUNTS:
        add("number form with two readings", "schemas:Count", text, None)
        add("number form with two readings (field)", "schemas:Price",
            json.dumps({"unit_price": 2.5, "quantity": text, "discount": 0.1}), None)
    for text in NULL_LIKES:
        add("null-like (under Optional)", "schemas:Price", json.dumps({"unit_price": 2.5, "quantity": 3, "discount": text}),
            {"unit_price": 2.5, "quantity": 3, "discount": None})
    return out


def main() -> None:
    cases = profile_cases() + person_cases() + contact_cases() + bare_answer_cases() + reading_cases()
    with (HERE / "handwritten.jsonl").open("w") as out:
        for n, case in enumerate(cases):
            out.write(json.dumps({"id": f"hand-{n:03d}", "source": "hand-written", **case}, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases")


if __name__ == "__main__":
    main()
