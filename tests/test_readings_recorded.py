"""Every reading of the malformed corpus and of its variations is the one recorded: a change made
to read faster changes no value, no repair list and no error.

The texts are the corpus (tests/data/malformed/) and, made from each case with a fixed seed: its
prefixes (every third character, for texts under 600 characters), three random insertions of a
JSON-ish character, the text fenced with more after the fence, in prose, each of its first lines
alone, re-indented, with ``=`` for ``:`` and no double quotes, as ``- `` items, with double
quotes and ``true``, in a fence left open, and followed by its own first half. Each reading is
recorded as a short digest of what it gives (the vote key, the coercions and whether it is
open-ended; or the stage and the errors) in tests/data/malformed/readings.sha.

When reading is changed on purpose, record again and say so in the commit::

    .venv/bin/python tests/test_readings_recorded.py --record
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import accord
import corpus
from accord.read._read import Reading, read

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "data" / "malformed" / "readings.sha"
_INSERTS = ['"', "'", ",", "}", "]", "\n", "```", "{", "[", " ", "//", "#", ":"]


def _cases() -> list[dict[str, Any]]:
    parsing = corpus.parsing()
    return parsing.load()  # type: ignore[no-any-return]


def texts() -> Iterator[tuple[str, str]]:
    """``(schema reference, text)`` for every text read, in a fixed order."""
    rnd = random.Random(7)
    for case in _cases():
        ref, text = case["schema"], case["text"]
        yield ref, text
        if len(text) < 600:
            for i in range(0, len(text), 3):
                yield ref, text[:i]
        for _ in range(3):
            if len(text) > 2:
                i = rnd.randrange(len(text))
                yield ref, text[:i] + rnd.choice(_INSERTS) + text[i:]
        yield ref, "```json\n" + text + "\n```\nmore"
        yield ref, "Sure! " + text + " Done."
        lines = text.splitlines()
        for line in lines[:12]:
            yield ref, line
        yield ref, "\n".join("  " * rnd.randrange(3) + line for line in lines)
        yield ref, text.replace(":", " =").replace('"', "")
        yield ref, "\n".join("- " + line for line in lines)
        yield ref, text.replace("'", '"').replace("True", "true")
        yield ref, "Answer:\n```\n" + text
        yield ref, text + "\n\n" + text[: len(text) // 2]


def digest(reading: Any) -> str:
    if isinstance(reading, Reading):
        said: list[Any] = ["R", reading.key, [sorted(c.items()) for c in reading.coercions], reading.open_ended]
    else:
        said = ["M", reading.stage, [{k: str(v) for k, v in e.items()} for e in reading.errors]]
    return hashlib.sha1(json.dumps(said, default=str).encode()).hexdigest()[:16]


def readings() -> list[str]:
    schemas: dict[str, accord.Schema[Any]] = {}
    out = []
    for ref, text in texts():
        if ref not in schemas:
            module, name = ref.split(":")
            sys.path.insert(0, str(ROOT / "tests" / "data" / "malformed"))
            try:
                source = getattr(__import__(module), name)
            finally:
                del sys.path[0]
            schemas[ref] = accord.Schema(source)
        out.append(digest(read(text, schemas[ref])))
    return out


def test_every_reading_is_the_one_recorded() -> None:
    recorded = RECORD.read_text().split()
    now = readings()
    assert len(now) == len(recorded), f"{len(now)} texts now, {len(recorded)} recorded"
    changed = [i for i, (a, b) in enumerate(zip(now, recorded, strict=True)) if a != b]
    assert not changed, f"{len(changed)} of {len(now)} readings changed, the first at text {changed[0]}"


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit(__doc__)
    RECORD.write_text("\n".join(readings()) + "\n")
    print(f"recorded {len(RECORD.read_text().split())} readings in {RECORD.relative_to(ROOT)}")
