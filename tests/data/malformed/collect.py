"""Collect real outputs of the embedded model for the corpus: unconstrained greedy, prompt mode.

    python tests/data/malformed/collect.py OUT.jsonl

The embedded SmolLM2-135M-Instruct (``accord.models.local().unconstrained``, float32, greedy,
max_tokens=64) answers short extraction prompts for the corpus schemas, once with accord's
rendering of the schema (``Schema.render()``) and once with a full JSON Schema in the prompt (what
instructor's MD_JSON mode and many hand-written prompts send). Generations are cached in
.bench-cache/corpus.json (benchmarks/generations.py). Each line: schema, prompt style, prompt,
text, finish reason. The texts are labelled by hand into cases.jsonl (see README.md here).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path[:0] = [str(HERE), str(ROOT / "benchmarks")]

import accord  # noqa: E402
from accord._types import Settings  # noqa: E402
from generations import Cache, Deployment  # noqa: E402

BIOS = [
    "Ann Lee is 31 and works in admin and ops.",
    "Bo Li, 45, is a developer.",
    "Carla Diaz (27) does design, UX and research.",
    "Dev Patel is a 38-year-old salesman.",
    "Eva Novak, aged 52, works in finance and audit.",
    "Femi Ade is a 19 year old intern.",
    "Greta Berg is 64; she sits on the board and handles legal.",
    "Hiro Sato, 23, works in support.",
    "Ines Costa is 36 and teaches math and physics.",
    "Jonas Weber, 41, is a chef and a baker.",
    "Kim Park is 29 and plays piano.",
    "Luca Bianchi (58) is a pilot.",
]
CONTACTS = [
    "Contact: Ann Lee, a person, email ann@lee.test.",
    "Acme Corp is a company; write to info@acme.test, phone 5550100.",
    "Raj Iyer (person), no email, phone +44 20 7946 0000.",
    "Mia Chen is a person with the email mia@chen.test.",
    "Globex Inc, a company, email sales@globex.test.",
    "Tom Ruiz, person, tom@ruiz.test, phone 12345.",
]


def main() -> int:
    import schemas

    out = Path(sys.argv[1])
    cache = Cache(ROOT / ".bench-cache" / "corpus.json")
    model = Deployment("float32", {"dtype": "float32"}, cache)
    settings = Settings(max_tokens=64)
    rows = []
    for schema_name, texts, ask in (("Profile", BIOS, "Extract the person's name, age and tags."),
                                    ("Contact", CONTACTS, "Extract the contact.")):
        schema = accord.Schema(getattr(schemas, schema_name))
        full = "Answer with a JSON value that matches this JSON Schema:\n" + json.dumps(schema.json_schema)
        for style, hint in (("signature", schema.render()), ("json schema", full)):
            for text in texts:
                prompt = f"{ask}\nText: {text}\n\n{hint}"
                completion = model.unconstrained(prompt, settings)
                rows.append({"schema": f"schemas:{schema_name}", "style": style, "prompt": prompt,
                             "text": completion.text, "finish_reason": completion.finish_reason})
                print(json.dumps(completion.text)[:120], flush=True)
            cache.save()
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
