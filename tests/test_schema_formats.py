"""A JSON Schema's formats are checked, and the first schema of a process is cheap (issue #33).

Importing jsonschema used to build every parser of ``rfc3987_syntax`` (1.4 s of the first
``Stabilizer(..., json_schema)`` here, 5.6 s on a loaded machine); ``accord.schema._formats``
builds the one parser the ``iri`` formats use when a value of those formats is first checked.
Each check runs in a fresh process, so the import it measures is the first.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "jsonschemabench"

# (format, good values, bad values): each checked by jsonschema's checker for that format
FORMATS: list[tuple[str, list[str], list[str]]] = [
    ("date-time", ["2024-01-01T00:00:00Z", "2024-02-29T23:59:59.5+02:00"], ["2024-13-01T00:00:00Z", "2024-01-01 00:00", "yesterday"]),
    ("date", ["2024-02-29"], ["2023-02-29", "2024/01/01"]),
    ("time", ["10:20:30Z"], ["25:00:00Z"]),
    ("uri", ["https://example.com/a?b=c#d", "urn:isbn:0451450523"], ["::nope", "no scheme", "http://exa mple.com"]),
    ("uri-reference", ["/a/b?c", "https://example.com"], ["\\\\bad", "a b"]),
    ("iri", ["https://例え.jp/パス", "http://example.com/ä"], ["not an iri", "http://exa mple.com"]),
    ("iri-reference", ["/パス?q", "https://例え.jp"], ["\\\\bad iri", "a b"]),
    ("email", ["a@example.com"], ["no-at-sign"]),
    ("ipv4", ["192.168.0.1"], ["256.1.1.1"]),
    ("uuid", ["12345678-1234-5678-1234-567812345678"], ["1234"]),
]

CHECK = textwrap.dedent(r'''
    import json, sys, time
    start = time.perf_counter()
    from accord import Schema, Stabilizer
    from accord.schema._schema import ValidationFailure
    imported = time.perf_counter() - start
    cases = json.loads(sys.argv[1])
    out = {"import": imported, "built": "rfc3987_syntax" in sys.modules, "refused": {}, "accepted": {}}
    for fmt, good, bad in cases:
        start = time.perf_counter()
        stab = Stabilizer(lambda p: "{}", {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string", "format": fmt})
        out.setdefault("first", time.perf_counter() - start)
        out["built"] = out["built"] or "rfc3987_syntax" in sys.modules
        refused = []
        for value in good + bad:
            try:
                stab.schema.validate(value)
            except ValidationFailure:
                refused.append(value)
        out["refused"][fmt] = refused
    import rfc3987_syntax  # after accord: the real package
    out["real"] = hasattr(rfc3987_syntax, "syntax_parser")
    print(json.dumps(out))
''')


def in_a_process(code: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]  # one object printed


def test_every_format_is_still_checked_and_the_first_schema_is_cheap() -> None:
    out = in_a_process(CHECK, json.dumps(FORMATS))
    for fmt, _good, bad in FORMATS:
        assert out["refused"][fmt] == bad, f"{fmt}: refused {out['refused'][fmt]}, expected exactly {bad}"
    assert not out["built"], "rfc3987_syntax's own parsers were built (its import builds ~40)"
    assert out["real"], "a later import of rfc3987_syntax gets the real package, not accord's stand-in"
    assert out["first"] < 1.0, f"the first Stabilizer of a process took {out['first']:.2f} s (target < 1 s)"


COMPARE = textwrap.dedent(r'''
    import json, sys
    from accord.schema._formats import _standin
    stand_in = _standin()  # before the real package is imported (else nothing is stood in for)
    if stand_in is None:
        print(json.dumps(None))
        raise SystemExit
    import rfc3987_syntax
    values = json.loads(sys.argv[1])
    print(json.dumps([[term, value, stand_in.is_valid_syntax(term, value), rfc3987_syntax.is_valid_syntax(term, value)]
                      for term in ("iri", "iri_reference", "absolute_iri") for value in values]))
''')


def test_the_stand_in_reads_iris_as_rfc3987_syntax_does() -> None:
    pytest.importorskip("rfc3987_syntax")
    values = ["https://例え.jp/パス", "http://example.com/ä", "mailto:a@b.c", "urn:x:y", "/relative/path", "?q=1", "#frag", "",
              "not an iri", "http://exa mple.com", "http://[::1]:80/", "http://[::1", "%zz", "a:b:c", "file:///tmp/x", "\\\\x"]
    done = subprocess.run([sys.executable, "-c", COMPARE, json.dumps(values)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)
    if rows is None:
        pytest.skip("rfc3987 is installed: jsonschema uses it, and nothing is stood in for")
    assert len(rows) == 3 * len(values)
    assert [row for row in rows if row[2] != row[3]] == [], "(term, value, stand-in, rfc3987_syntax)"
    assert any(row[2] for row in rows) and not all(row[2] for row in rows)


@pytest.mark.skipif(not BENCH.is_dir(), reason=f"no jsonschemabench data at {BENCH}")
def test_the_first_real_schema_of_a_process_builds_in_well_under_a_second() -> None:
    names = sorted(p.name for p in BENCH.glob("*.json"))
    largest = max(names, key=lambda name: (BENCH / name).stat().st_size)
    code = textwrap.dedent(r'''
        import json, sys, time
        import accord
        times = []
        for name in sys.argv[2:]:
            source = json.loads(open(sys.argv[1] + "/" + name).read())["schema"]
            start = time.perf_counter()
            accord.Stabilizer(lambda p: "{}", source)
            times.append(time.perf_counter() - start)
        print(json.dumps(times))
    ''')
    done = subprocess.run([sys.executable, "-c", code, str(BENCH), largest, *names[::20]], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    times = json.loads(done.stdout)
    rest = sorted(times[1:])
    assert times[0] < 1.0, f"the first Stabilizer ({largest}) took {times[0]:.2f} s"
    assert rest[len(rest) // 2] < 0.1, f"p50 after the first: {rest[len(rest) // 2] * 1e3:.0f} ms"
