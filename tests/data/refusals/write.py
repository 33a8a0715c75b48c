"""The refusal corpus of issue 33: texts that say no one value, or say it in a form a rule reads.

    python tests/data/refusals/write.py      # rewrites cases.jsonl beside this file

Written for this repository by hand-made templates over a support desk's tickets and invoices
(``triage.py``): each class of issue 33 (hedges, unknowns, negations, ordinals, bools for numbers
and numbers for bools, lists spelled in strings, a draft, an example or a correction beside the
answer, several answers in prose, Decimal number forms, case folds) as the whole answer, a field,
a list item and a nested object. Each case is labelled "refuse", or with the exact value meant
where a stated rule of docs/parsing.md reads one (its ``rule``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REFUSE = "refuse"

TICKETS = [
    {"category": "billing", "priority": 4, "urgent": True, "tags": ["refund", "card"]},
    {"category": "bug", "priority": 2, "urgent": False, "tags": ["android", "crash"]},
    {"category": "feature", "priority": 1, "urgent": False, "tags": ["export"]},
    {"category": "account", "priority": 3, "urgent": True, "tags": ["login", "2fa"]},
    {"category": "other", "priority": 5, "urgent": False, "tags": ["question"]},
]
MEMBERS = ["billing", "bug", "feature", "account", "other"]
HEDGED = ["I think {m}", "Could be {m}", "Probably {m}", "Seems like {m}", "Maybe {m}", "It might be {m}", "Looks like {m}",
          "I'd say {m}", "Perhaps {m}", "{m}, I guess", "{m} (not sure)", "{m}, probably", "{m}?", "{m}, I think", "{m} maybe"]
UNKNOWN = ["no idea", "No clue", "no way to tell", "no information", "Unknown", "not sure", "Can't tell", "Hard to say",
           "I don't know", "No information given.", "It cannot be determined", "no way to know"]
NEGATED = ["not billing", "Not a bug.", "definitely not a feature", "It isn't billing", "never account", "not other"]
NEGATED_FLAGS = ["not true", "Not false.", "Yes, it isn't."]
ORDINALS = ["2nd highest", "3rd", "#1", "ranked 2", "1st priority", "4th", "the 2nd", "#5 (top)", "5th of 5", "placed 3rd"]
NOT_FLAGS: list[Any] = [1, 0, "1", "0", 1.0, "on", "off"]
SPELLED = [("android, crash, export", ["android", "crash", "export"]), ("['refund', 'card']", ["refund", "card"]),
           ("login; 2fa", ["login", "2fa"]), ("- export\n- csv", ["export", "csv"]), ('["question", "faq"]', ["question", "faq"]),
           ("(login, sso)", ["login", "sso"])]
SPELLED_NOT = ["crash and export, android", "refund, , card", "login or 2fa, account", "1,234, 5", "[refund, 'card"]
SEVERAL = [("schemas", "Category", "billing. Correction: bug"), ("schemas", "Category", "bug, or maybe billing"),
           ("schemas", "Category", "Category: feature. Final answer: account"), ("schemas", "Priority", "Priority 2, actually 3"),
           ("schemas", "Priority", "Final answer: 4. Earlier I said 2."), ("schemas", "Priority", "3 or 4"),
           ("schemas", "Urgent", "Yes. Let me check. No."), ("schemas", "Urgent", "true (correction: false)"),
           ("schemas", "Urgent", "No. Final answer: yes"), ("schemas", "Category", "other - no, billing"),
           ("schemas", "Amount", "$1,200.00, no: $1,250.00"), ("schemas", "Priority", "#2 or #3"),
           ("schemas", "Category", "bug\n\nCorrection: feature"), ("schemas", "Urgent", "Yes.\n\nOn reflection: no."),
           ("schemas", "Priority", "5\n\nCorrection: 4")]
AMOUNTS = [("$1,234.50", "1234.50"), ("€1234.50", "1234.50"), ("EUR 1234.5", "1234.5"), ("1234.50", "1234.50"),
           ("USD 99.99", "99.99"), ("£12.00", "12.00"), ("12345678901234567.89", "12345678901234567.89"),
           ("1,234.56 EUR", "1234.56"), ("$0.10", "0.10"), ("10000000.01", "10000000.01")]
AMOUNTS_NOT = ["1.234,50", "about $1,200", "$1,200-1,300", "1/3", "~99.99", "12,50 EUR"]
CASES = [("BUG", "bug"), ("Billing", "billing"), ("FEATURE.", "feature"), ("**Account**", "account"), ("Other", "other")]


def _cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(cls: str, rule: str, schema: str, text: str, label: Any) -> None:
        out.append({"class": cls, "rule": rule, "schema": f"triage:{schema}", "text": text, "label": label})

    def ticket(n: int, **changed: Any) -> str:
        return json.dumps({**TICKETS[n % len(TICKETS)], **changed})

    for n, form in enumerate(HEDGED):  # hedges: the whole answer, a field, a list item
        m = MEMBERS[n % 5]
        add("hedged member", "hedge", "Category", form.format(m=m), REFUSE)
        add("hedged member (field)", "hedge", "Ticket", ticket(n, category=form.format(m=m)), REFUSE)
        if n < 5:
            add("hedged member (list item)", "hedge", "Queue", '{"tickets": [' + ticket(n + 1) + ", " + ticket(n, category=form.format(m=m)) + "]}", REFUSE)
    for n, said in enumerate(UNKNOWN):  # unknowns: never a false
        add("unknown yes/no", "unknown", "Urgent", said, REFUSE)
        add("unknown yes/no (field)", "unknown", "Ticket", ticket(n, urgent=said), REFUSE)
        if n < 6:
            add("unknown yes/no (field)", "unknown", "Invoice", json.dumps({"total": "12.50", "currency": "EUR", "paid": said}), REFUSE)
    for n, said in enumerate(["no idea", "unknown", "not sure", "no clue", "can't tell"]):
        add("unknown member (field)", "unknown", "Ticket", ticket(n, category=said), REFUSE)
        add("unknown count (field)", "unknown", "Ticket", ticket(n, priority=said), REFUSE)
    for n, said in enumerate(NEGATED):
        add("negated member", "negation", "Category", said, REFUSE)
        add("negated member (field)", "negation", "Ticket", ticket(n, category=said), REFUSE)
    for n, said in enumerate(NEGATED_FLAGS):
        add("negated yes/no", "negation", "Urgent", said, REFUSE)
        add("negated yes/no (field)", "negation", "Ticket", ticket(n, urgent=said), REFUSE)
    for n, said in enumerate(ORDINALS):  # ranks are not counts
        add("ordinal for a count", "ordinal", "Priority", said, REFUSE)
        add("ordinal for a count (field)", "ordinal", "Ticket", ticket(n, priority=said), REFUSE)
        add("ordinal for a count (one-field object)", "ordinal", "Answer", json.dumps({"answer": said}), REFUSE)
    for n in range(10):  # bools for numbers, numbers for bools
        add("bool for a number (field)", "bool/number", "Ticket", ticket(n, priority=n % 2 == 0), REFUSE)
    for flag in (True, False):
        add("bool for a number (field)", "bool/number", "Invoice", json.dumps({"total": flag, "currency": "USD", "paid": True}), REFUSE)
        add("bool for a number (one-field object)", "bool/number", "Answer", json.dumps({"answer": flag}), REFUSE)
    add("bool for a number", "bool/number", "Priority", "true", REFUSE)
    for n, said in enumerate(NOT_FLAGS):
        add("number for a bool (field)", "bool/number", "Ticket", ticket(n, urgent=said), REFUSE)
    for said in (1, 0):
        add("number for a bool (field)", "bool/number", "Invoice", json.dumps({"total": "5.00", "currency": "GBP", "paid": said}), REFUSE)
    for said in ("1", "0"):
        add("number for a bool", "bool/number", "Urgent", said, REFUSE)
    for n in range(5):  # lists spelled in strings: the list they spell, or refused
        for text, tags in SPELLED:
            add("list spelled in a string (field)", "list in a string", "Ticket", ticket(n, tags=text), {**TICKETS[n], "tags": tags})
    for n, text in enumerate(SPELLED_NOT):
        add("list spelled in no one way (field)", "list in a string", "Ticket", ticket(n, tags=text), REFUSE)
    out += _second_candidates()
    for _, name, text in SEVERAL:
        add("several answers in prose", "one answer", name, text, REFUSE)
    for n, (text, value) in enumerate(AMOUNTS):  # Decimal gets every number form a float gets
        add("decimal number form", "number form", "Amount", text, value)
        add("decimal number form (field)", "number form", "Invoice",
            json.dumps({"total": text, "currency": "usd" if n % 2 else "EUR", "paid": "yes"}),
            {"total": value, "currency": "USD" if n % 2 else "EUR", "paid": True})
    for text in AMOUNTS_NOT:
        add("decimal number form with no one reading", "number form", "Amount", text, REFUSE)
        add("decimal number form with no one reading (field)", "number form", "Invoice",
            json.dumps({"total": text, "currency": "EUR", "paid": False}), REFUSE)
    for n, (text, member) in enumerate(CASES):
        add("member in another case", "case", "Category", text, member)
        add("member in another case (field)", "case", "Ticket", ticket(n, category=text), {**TICKETS[n], "category": member})
    return out


def _second_candidates() -> list[dict[str, Any]]:
    """A draft, an example or a correction beside the answer: the answer marked final, or refused."""
    out: list[dict[str, Any]] = []
    marked = [
        "Let me think. A first guess would be {draft} but on reflection it fits better here, so my final answer is:\n{meant}",
        "Example format: {draft}. My answer: {meant}",
        "{draft}\n\nCorrection: {meant}",
        "Draft:\n```json\n{draft}\n```\nFinal answer:\n```json\n{meant}\n```",
        "I wrote {draft} at first.\n\n**Final answer:** {meant}",
        "{meant}\nTo repeat, the answer: {meant}",
    ]
    unmarked = [
        "{draft}\n\n{meant}",
        "Answer: {meant}\n(Example format: {draft})",
        "Final answer: {meant}\nActually, wait: {draft}",
        "Final answer: {draft}\nFinal answer: {meant}",
        "Here is an example of a final answer: {draft}. {meant}",
        "I first wrote {draft}, which is wrong.\n{meant}",
        "My answer: {meant}. For example, {draft} would also be valid.",
    ]
    for n in range(5):
        meant, draft = TICKETS[n], TICKETS[(n + 2) % 5]
        for form in marked:
            text = form.format(draft=json.dumps(draft), meant=json.dumps(meant))
            out.append({"class": "a second value, the answer marked final", "rule": "one answer", "schema": "triage:Ticket",
                        "text": text, "label": meant})
        for form in unmarked:
            text = form.format(draft=json.dumps(draft), meant=json.dumps(meant))
            out.append({"class": "a second value, none marked final", "rule": "one answer", "schema": "triage:Ticket",
                        "text": text, "label": REFUSE})
    for meant, draft in ((42, 0), (8, 7), (3, 1)):
        for form in marked[:3]:
            text = form.format(draft=json.dumps({"answer": draft}), meant=json.dumps({"answer": meant}))
            out.append({"class": "a second value, the answer marked final (one-field object)", "rule": "one answer",
                        "schema": "triage:Answer", "text": text, "label": {"answer": meant}})
        for form in unmarked[:3]:
            text = form.format(draft=json.dumps({"answer": draft}), meant=json.dumps({"answer": meant}))
            out.append({"class": "a second value, none marked final (one-field object)", "rule": "one answer",
                        "schema": "triage:Answer", "text": text, "label": REFUSE})
    return out


def main() -> None:
    cases = _cases()
    with (HERE / "cases.jsonl").open("w") as out:
        for n, case in enumerate(cases):
            out.write(json.dumps({"id": f"refuse-{n:03d}", "source": "hand-written", **case}, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases, {sum(c['label'] == REFUSE for c in cases)} refused")


if __name__ == "__main__":
    main()
