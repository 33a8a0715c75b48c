"""Grammar compilation for outlines_core and xgrammar, in this process or in a child process.

A native compile cannot be interrupted from a thread, so when a compile-time limit is set, accord
compiles in a child process (this file, run as a script) and kills it when the limit passes. The
child imports nothing from accord; what crosses the pipe is JSON and each engine's own
serialization (outlines_core's binary form, xgrammar's ``serialize_json``), never pickle.

Pipe protocol: frames of an 8-byte big-endian length followed by the bytes. The parent sends the
engine name and its tokenizer index once, then per compile a JSON header ``{"kind", "text"}``;
the child answers ``{"ok": true, "seconds": s}`` and the compiled grammar, or
``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from typing import IO, Any

# The JSON accord asks for: one space after ':' and ',' (as json.dumps writes it), nothing else,
# so a small model cannot loop on whitespace.
JSON_WHITESPACE = ""  # outlines_core puts one pattern between all JSON tokens: none at all
SEPARATORS = (", ", ": ")  # xgrammar and llguidance: exact separators
COMPACT = (",", ":")  # "json-compact": no space at all, as a server's strict JSON mode writes it
OUTLINES_CORE_MEMORY = 6 << 30  # address space for an outlines_core compile (no torch in that child)


def outlines_core_regex(kind: str, text: str) -> str:
    if kind == "regex":
        return text
    if kind not in ("json", "json-compact"):
        raise ValueError(f"outlines_core does not take {kind} grammars")
    from outlines_core.json_schema import build_regex_from_schema

    return str(build_regex_from_schema(text, JSON_WHITESPACE))


def compile_outlines_core(vocabulary: Any, kind: str, text: str) -> Any:
    from outlines_core import Index

    return Index(outlines_core_regex(kind, text), vocabulary)


def indent_of(kind: str) -> int | None:
    """The indent of a "json-indent-N" kind (a model's own layout, ``_layout``); None for the others."""
    head, _, width = kind.rpartition("-")
    return int(width) if head == "json-indent" and width.isdigit() else None


def compile_xgrammar(compiler: Any, kind: str, text: str) -> Any:
    if kind == "regex":
        return compiler.compile_regex(text)
    if (indent := indent_of(kind)) is not None:  # one item a line, ``indent`` spaces a level, as json.dumps(indent=) writes
        return compiler.compile_json_schema(text, any_whitespace=False, indent=indent, separators=(",", ": "), strict_mode=False)
    if kind == "json-free":  # a server's layouts ("json-free", "json-compact"), compiled as vLLM compiles them
        return compiler.compile_json_schema(text, any_whitespace=True)
    if kind == "json-compact":
        return compiler.compile_json_schema(text, any_whitespace=False, separators=COMPACT)
    if kind != "json":
        raise ValueError(f"xgrammar in accord does not take {kind} grammars")
    return compiler.compile_json_schema(text, any_whitespace=False, separators=SEPARATORS, strict_mode=False)


def xgrammar_compiler(tokenizer_info: Any) -> Any:
    import xgrammar

    return xgrammar.GrammarCompiler(tokenizer_info, max_threads=max(1, min(4, os.cpu_count() or 1)))


def outlines_core_bytes(obj: Any) -> bytes:
    """outlines_core's own binary form of an Index or Vocabulary (the inverse of ``from_binary``)."""
    load, args = obj.__reduce__()[:2]
    if load != type(obj).from_binary or not isinstance(args[0], bytes):
        raise TypeError(f"unexpected outlines_core serialization for {type(obj).__name__}")
    return args[0]


# -- the child side -------------------------------------------------------------------------------


def write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(struct.pack(">Q", len(data)))
    stream.write(data)


def read_frame(stream: IO[bytes]) -> bytes:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (size,) = struct.unpack(">Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return data


def _serve(engine: str, index: bytes) -> Any:
    """Build the engine's tokenizer index; return ``compile(kind, text) -> bytes``."""
    if engine == "outlines_core":
        from outlines_core import Vocabulary

        _limit_memory(OUTLINES_CORE_MEMORY)

        vocabulary = Vocabulary.from_binary(index)
        return lambda kind, text: outlines_core_bytes(compile_outlines_core(vocabulary, kind, text))
    if engine == "xgrammar":
        import xgrammar

        compiler = xgrammar_compiler(xgrammar.TokenizerInfo.deserialize_json(index.decode()))
        return lambda kind, text: compile_xgrammar(compiler, kind, text).serialize_json().encode()
    raise ValueError(f"no compile worker for engine {engine!r}")


def _limit_memory(size: int) -> None:
    """Cap this process's address space, so a runaway compile dies here instead of swapping."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > size:
        resource.setrlimit(resource.RLIMIT_AS, (size, hard))


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        engine = json.loads(read_frame(stdin))["engine"]
        compile_one = _serve(engine, read_frame(stdin))
    except EOFError:
        return
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        write_frame(stdout, json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}).encode())
        stdout.flush()
        return
    write_frame(stdout, json.dumps({"ok": True}).encode())
    stdout.flush()
    while True:
        try:
            request = json.loads(read_frame(stdin))
        except EOFError:
            return
        start = time.perf_counter()
        try:
            blob = compile_one(request["kind"], request["text"])
        except Exception as exc:  # noqa: BLE001 - a schema the engine rejects
            write_frame(stdout, json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}).encode())
        else:
            write_frame(stdout, json.dumps({"ok": True, "seconds": time.perf_counter() - start}).encode())
            write_frame(stdout, blob)
        stdout.flush()


if __name__ == "__main__":
    main()
