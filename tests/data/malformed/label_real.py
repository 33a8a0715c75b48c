"""How cases.jsonl was built: the real outputs gathered, deduplicated and labelled by hand.

Kept for the record (it reads the dumps in .bench-cache/ that benchmarks/prompt_mode.py --dump and
collect.py wrote, which are not in the repo). The labels are the overrides and the rules below:
each text labelled with the value it says, or None when it does not say one.
"""
# ruff: noqa
import json, re, sys, glob
from datetime import date
rows = []
for path in sorted(glob.glob('/work/wt/sap/.bench-cache/*/*.jsonl')):
    phase = path.split('/')[-2]
    for l in open(path):
        r = json.loads(l)
        if r['text'] is None: continue
        rows.append((phase, r))
seen = {}
for phase, r in rows:
    k = (r['schema'], r['text'])
    if k not in seen:
        seen[k] = (phase, r)
def propose(schema, text):
    t = text.strip()
    name = schema.split(':')[1]
    if name == 'Sentiment':
        m = re.match(r'\W*(positive|negative|neutral)\b', t, re.I)
        return m.group(1).lower() if m else None
    if name == 'YesNo':
        m = re.match(r'\W*(yes|no|true|false)\b', t, re.I)
        if m: return {"answer": m.group(1).lower() in ("yes", "true")}
        m = re.search(r'"?answer"?\s*:\s*"?(true|false|yes|no)\b', t, re.I)
        return {"answer": m.group(1).lower() in ("yes","true")} if m else None
    if name == 'Number':
        m = re.fullmatch(r'[\d\s+\-*/x()]+=\s*(\d+)\.?', t) or re.match(r'(?:the )?answer is (\d+)\.?(?:\n|$)', t, re.I) or re.fullmatch(r'\**(\d+)\**\.?', t)
        if m: return {"answer": int(m.group(1))}
        m = re.search(r'"?answer"?\s*:\s*"?(\d+)\b', t)
        return {"answer": int(m.group(1))} if m else None
    if name == 'Day':
        m = re.search(r'"?date"?\s*:\s*"?(\d{4}-\d{2}-\d{2})', t)
        return {"date": m.group(1)} if m else None
    return "?"
out = []
for (schema, text), (phase, r) in seen.items():
    out.append({"phase": phase, "backend": r["backend"], "id": r["id"], "schema": schema, "text": text, "finish_reason": r["finish_reason"], "proposed": propose(schema, text)})
json.dump(out, open('/tmp/sap/proposed.json', 'w'), indent=0)
for i, o in enumerate(out):
    print(i, o['phase'], o['backend'], o['id'], o['finish_reason'], json.dumps(o['text'])[:230], '=>', json.dumps(o['proposed']))

# -- the hand labels ---------------------------------------------------------------
import json, glob, sys
P = json.load(open('/tmp/sap/proposed.json'))
J = lambda name, age, city, country: {"name": name, "age": age, "home": {"city": city, "country": country}}
# by exact text prefix: the value the text says, or None (it does not say one)
OVR = [
    ('{\n  "date": "14 July 1990"', {"date": "1990-07-14"}),
    ('{\n  "date": "2023-04-2"', {"date": "2023-04-02"}),
    ('{\n  "date": "2020-01-15-2020"', None),
    ('{\n  "name": "John Smith",\n  "age": 52', J("John Smith", 52, "London", "United Kingdom")),
    ('{"name": "Anna Schmidt", "age": 19, "home": "Berlin, Germany"}', J("Anna Schmidt", 19, "Berlin", "Germany")),
    ('{"name": "Anna Schmidt", "age": 19, "home": {\n    "city": "Berlin, Germany"', J("Anna Schmidt", 19, "Berlin, Germany", "Germany")),
    ('{\n  "name": "Emma Johnson",\n  "age": 25', J("Emma Johnson", 25, "Toronto", "Canada")),
    ('{\n  "name": "Ahmed Hassan",\n  "age": 38', J("Ahmed Hassan", 38, "Cairo", "Egypt")),
    ('{"name":"Emma Johnson","age":25,"home":"Toronto, Canada"}', J("Emma Johnson", 25, "Toronto", "Canada")),
]
def label(o):
    for prefix, value in OVR:
        if o["text"].startswith(prefix):
            return value
    if o["proposed"] == "?":
        return None  # every other Person text here holds a schema echo for a field, or is cut off inside one
    return o["proposed"]
cases = []
for o in P:
    cases.append({"source": f"{o['backend']} ({o['phase']})", "class": "real output", "schema": o["schema"],
                  "text": o["text"], "finish_reason": o["finish_reason"], "label": label(o)})
extra = '/work/wt/sap/.bench-cache/after/collect.jsonl'
try:
    rows = [json.loads(l) for l in open(extra)]
    seen = {(c["schema"], c["text"]) for c in cases}
    for r in rows:
        if (r["schema"], r["text"]) in seen: continue
        seen.add((r["schema"], r["text"]))
        cases.append({"source": f"local ({r['style']} prompt)", "class": "real output", "schema": r["schema"], "text": r["text"],
                      "finish_reason": r["finish_reason"], "label": label_collected(r)})
except FileNotFoundError:
    print("no collect.jsonl yet")
with open('/work/wt/sap/tests/data/malformed/cases.jsonl', 'w') as out:
    for n, c in enumerate(cases):
        out.write(json.dumps({"id": f"real-{n:03d}", **c}, ensure_ascii=False) + "\n")
print(len(cases), "real cases;", sum(c["label"] is not None for c in cases), "recoverable")

import json
ROWS = [json.loads(l) for l in open('/work/wt/sap/.bench-cache/after/collect.jsonl')]
P = lambda n, a, t: {"name": n, "age": a, "tags": t}
C = lambda f, l, e, k, p: {"first_name": f, "last_name": l, "email": e, "kind": k, "phone": p}
BY_INDEX = {
    0: P("Ann Lee", 31, ["admin", "ops"]), 1: P("Bo Li", 45, ["Developer"]), 2: P("Carla Diaz", 27, ["design", "UX", "research"]),
    3: P("Dev Patel", 38, ["Salesman"]), 4: P("Eva Novak", 52, ["Finance", "Audit"]), 5: P("Femi Ade", 19, ["Intern", "19"]),
    6: P("Greta Berg", 64, ["Legal", "Growling"]), 10: P("Kim Park", 29, ["Piano"]),
    24: C("Ann Lee", "Alec", "john@lee.test.com", "person", "123-456-7890"),
    27: C("Mia Chen", "Mia Chen", "mia@chen.test.com", "person", "123-456-7890"),
    29: C("Tom", "Ruiz", "ruiz.test", "person", "12345"),
}
def label_collected(r):
    i = ROWS.index(r)
    return BY_INDEX.get(i)  # every other text is prose without the tags, a schema echo, or cut off inside a field
