"""The three grammar engines behind outlines' logits processors, one small adapter each.

An engine object is built once per tokenizer (its vocabulary index: the costly part, paid once),
then compiles grammars and makes a fresh outlines logits processor for every generation:

    engine = ENGINES["llguidance"](hf_tokenizer, vocab_size)
    compiled = engine.compile("json", schema_text)      # kind: "json" | "json-compact" | "json-free" | "json-indent-N" | "regex" | "lark"
    processor = engine.processor(compiled)              # for model.generate(logits_processor=...)

llguidance compiles in-process under its own resource limits. outlines_core and xgrammar have
none, so under a time limit they compile in a child process (:class:`Worker`) and hand back the
result in the engine's own serialization. "json" writes one space after ``,`` and ``:``;
"json-compact" no whitespace between tokens and "json-free" any (how a server writes strict JSON
with and without vLLM's ``disable_any_whitespace``: a reference deployment decodes in the serving
deployment's format, docs/determinism.md; outlines_core writes every JSON compact and takes no
"json-free"). "json-indent-N" is a model's own layout (``_layout``): a new line before each key and
item and before a closing bracket, N spaces a level, as ``json.dumps(indent=N)`` writes it; only
xgrammar takes it (the Constrainer falls back to "json" where xgrammar cannot compile a schema).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import math
import queue
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from . import _compile_worker as native

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

TENSORS = "torch"


class CompileError(Exception):
    """An engine could not compile a grammar (or ran past the time limit: ``timed_out``)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class Engine:
    name: ClassVar[str]
    package: ClassVar[str]
    kinds: ClassVar[frozenset[str]] = frozenset({"json", "json-compact", "json-free", "json-indent", "regex"})
    isolated: ClassVar[bool] = False  # compile in a child process when a time limit is set

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        """Index the tokenizer's vocabulary (``vocab_size``: the rows of the model's output head)."""
        raise NotImplementedError

    @classmethod
    def installed(cls) -> bool:
        return importlib.util.find_spec(cls.package) is not None

    def compile(self, kind: str, text: str) -> Any:
        raise NotImplementedError

    def processor(self, compiled: Any) -> Any:
        raise NotImplementedError

    def export(self) -> bytes:
        """The tokenizer index, serialized for a :class:`Worker` (isolated engines only)."""
        raise NotImplementedError

    def load(self, blob: bytes) -> Any:
        """A compiled grammar from a :class:`Worker`'s answer (isolated engines only)."""
        raise NotImplementedError


class LLGuidance(Engine):
    name = "llguidance"
    package = "llguidance"
    # No "json-indent": its whitespace is one pattern between every two tokens, whatever the depth, so
    # the model could write a line at the wrong indent, or none; xgrammar writes the layout exactly.
    kinds = frozenset({"json", "json-compact", "json-free", "regex", "lark"})

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import llguidance.hf

        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        self.limits = llguidance.LLParserLimits()  # the engine's own limits bound compile work

    def compile(self, kind: str, text: str) -> Any:
        from llguidance import LLMatcher

        if kind in ("json", "json-compact", "json-free"):
            separators = native.COMPACT if kind == "json-compact" else native.SEPARATORS
            options: JsonCompileOptions = {"whitespace_flexible": kind == "json-free", "item_separator": separators[0],
                                           "key_separator": separators[1]}
            grammar = LLMatcher.grammar_from_json_schema(text, defaults=options)
        elif kind == "regex":
            grammar = LLMatcher.grammar_from_regex(text)
        else:
            grammar = LLMatcher.grammar_from_lark(text)
        matcher = LLMatcher(self.tokenizer, grammar, log_level=0, limits=self.limits)
        if matcher.is_error():
            raise CompileError(matcher.get_error().strip())
        return matcher

    def processor(self, compiled: Any) -> Any:
        return _llguidance_processor()(compiled, self.tokenizer)


@cache
def _llguidance_processor() -> type:
    """outlines' llguidance processor; each generation starts from a copy of the compiled matcher."""
    from outlines.backends.llguidance import LLGuidanceLogitsProcessor

    return type("Processor", (_FromTemplate, LLGuidanceLogitsProcessor), {})


class _FromTemplate:
    """Mixed in before outlines' ``LLGuidanceLogitsProcessor`` (built at run time, as outlines is
    imported lazily): each generation starts from a copy of the compiled matcher."""

    ll_matchers: list[Any]
    bitmask: Any
    llg_tokenizer: Any
    _bias_logits: Any

    def __init__(self, matcher: Any, tokenizer: Any) -> None:
        outlines_init: Any = super().__init__  # LLGuidanceLogitsProcessor's
        outlines_init("", tokenizer, TENSORS)
        self.template = matcher

    def _setup(self, batch_size: int) -> None:
        self.ll_matchers = [self.template.deep_copy() for _ in range(batch_size)]
        self.bitmask = new_bitmask(batch_size, self.llg_tokenizer.vocab_size)
        self._bias_logits = self._bias_logits_torch

    def _bias_logits_torch(self, input_ids: Any, logits: Any) -> Any:
        for matcher, row in zip(self.ll_matchers, self.bitmask, strict=True):
            matcher.unsafe_compute_mask_ptr(row.data_ptr(), row.numel() * row.element_size())
        return apply_bitmask(logits, self.bitmask)


@cache
def _outlines_core_processor() -> type:
    """outlines' outlines_core processor, with the eager mask kernel."""
    from outlines.backends.outlines_core import OutlinesCoreLogitsProcessor

    return type("Processor", (_EagerMask, OutlinesCoreLogitsProcessor), {})


class _EagerMask:
    """Mixed in before outlines' ``OutlinesCoreLogitsProcessor``: the eager mask kernel."""

    index: Any
    bias_logits: Any

    def _setup(self, batch_size: int, vocab_size: int) -> None:
        from outlines_core import Guide

        self._guides = [Guide(self.index) for _ in range(batch_size)]
        self._bitmasks = [new_bitmask(1, vocab_size) for _ in range(batch_size)]
        self.bias_logits = self._bias_logits_torch

    def _bias_logits_torch(self, batch_size: int, logits: Any) -> Any:
        for i, (guide, mask) in enumerate(zip(self._guides, self._bitmasks, strict=True)):
            guide.write_mask_into(mask.data_ptr(), mask.numel(), mask.element_size())
            apply_bitmask(logits[i : i + 1], mask)
        return logits


def forces(processor: Any) -> bool:
    """Whether :func:`forced_by` can read what ``processor``'s grammar forces: llguidance's and
    xgrammar's processors can, outlines_core's cannot."""
    return isinstance(processor, _FromTemplate) or hasattr(processor, "compiled_grammar")  # xgrammar: outlines' own


def forced_by(processor: Any, token: int) -> tuple[str, Callable[[int], bool]] | None:
    """What the grammar behind ``processor`` forces once ``token`` is written, read on a copy of
    its state (the processor's own does not move; its matchers exist from its first step): the
    forced text, and the copy's way to take one more token (False: not allowed). None where the
    grammar refuses ``token`` or cannot tell (:func:`forces`)."""
    if isinstance(processor, _FromTemplate):  # llguidance
        taking = processor.ll_matchers[0].deep_copy()
        if not taking.consume_token(token):
            return None
        return bytes(taking.compute_ff_bytes()).decode("utf-8", errors="ignore"), taking.consume_token
    if hasattr(processor, "compiled_grammar"):  # xgrammar (outlines' processor)
        forked = processor._matchers[0].fork()
        if not forked.accept_token(token):
            return None
        return str(forked.find_jump_forward_string()), forked.accept_token
    return None


def new_bitmask(rows: int, vocab_size: int) -> Any:
    """A CPU bitmask with every token allowed: one int32 per 32 tokens, low bit first."""
    import torch

    return torch.full((rows, (vocab_size + 31) // 32), -1, dtype=torch.int32)


def apply_bitmask(logits: Any, bitmask: Any) -> Any:
    """Set to -inf the logits of tokens whose bit is 0 (32 tokens per int32, low bit first).

    Eager torch, where outlines_core's and llguidance's torch kernels are ``torch.compile``
    functions: on CPU that compile runs a C++ toolchain for seconds in every new process (and
    importing those modules loads the inductor), for a mask that takes well under a millisecond.
    """
    import torch

    mask = bitmask.to(logits.device, non_blocking=True)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((mask.unsqueeze(-1) >> shifts) & 1).bool().view(mask.shape[0], -1)
    vocab = logits.shape[-1]
    if allowed.shape[1] < vocab:
        logits[:, allowed.shape[1] :] = -math.inf
    logits[:, : min(vocab, allowed.shape[1])].masked_fill_(~allowed[:, :vocab], -math.inf)
    return logits


class XGrammar(Engine):
    name = "xgrammar"
    package = "xgrammar"
    isolated = True

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import xgrammar

        self.info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = native.xgrammar_compiler(self.info)

    def compile(self, kind: str, text: str) -> Any:
        return native.compile_xgrammar(self.compiler, kind, text)

    def processor(self, compiled: Any) -> Any:
        from outlines.backends.xgrammar import XGrammarLogitsProcessor

        return XGrammarLogitsProcessor(compiled, TENSORS)

    def export(self) -> bytes:
        return str(self.info.serialize_json()).encode()

    def load(self, blob: bytes) -> Any:
        import xgrammar

        return xgrammar.CompiledGrammar.deserialize_json(blob.decode(), self.info)


class OutlinesCore(Engine):
    name = "outlines_core"
    package = "outlines_core"
    kinds = frozenset({"json", "json-compact", "regex"})  # its JSON has no whitespace between tokens (JSON_WHITESPACE)
    isolated = True

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        from outlines.backends.outlines_core import OutlinesCoreBackend

        def token_to_str(token: str) -> str:  # as outlines' TransformerTokenizer does it
            text = str(tokenizer.convert_tokens_to_string([token]))
            return " " + text if token.startswith("\u2581") or token == "<0x20>" else text

        self.vocabulary = OutlinesCoreBackend.create_outlines_core_vocabulary(
            tokenizer.get_vocab(), tokenizer.eos_token_id, tokenizer.eos_token, token_to_str
        )

    def compile(self, kind: str, text: str) -> Any:
        return native.compile_outlines_core(self.vocabulary, kind, text)

    def processor(self, compiled: Any) -> Any:
        return _outlines_core_processor()(compiled, TENSORS)

    def export(self) -> bytes:
        return native.outlines_core_bytes(self.vocabulary)

    def load(self, blob: bytes) -> Any:
        from outlines_core import Index

        return Index.from_binary(blob)


ENGINES: dict[str, type[Engine]] = {e.name: e for e in (LLGuidance, XGrammar, OutlinesCore)}


# -- compiling in a child process -----------------------------------------------------------------

_WORKER_SCRIPT = str(Path(native.__file__).resolve())
_STARTUP_SECONDS = 300.0  # the child imports the engine and rebuilds the tokenizer index
_live: weakref.WeakSet[Worker] = weakref.WeakSet()


class Worker:
    """A child process that compiles for one engine and tokenizer, killed when a compile overruns.

    It starts on the first compile (one import and one tokenizer index per child) and is
    restarted after a kill.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        _live.add(self)

    def compile(self, kind: str, text: str, timeout: float) -> Any:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            head, blob = self._exchange([json.dumps({"kind": kind, "text": text}).encode()], timeout, blob=True)
        if not head.get("ok"):
            raise CompileError(str(head.get("error", "compile failed")))
        return self.engine.load(blob or b"")

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", _WORKER_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        frames = [json.dumps({"engine": self.engine.name}).encode(), self.engine.export()]
        head, _ = self._exchange(frames, _STARTUP_SECONDS, blob=False)
        if not head.get("ok"):
            self.close()
            raise CompileError(f"{self.engine.name} compile worker failed to start: {head.get('error')}")

    def _exchange(self, frames: list[bytes], timeout: float, *, blob: bool) -> tuple[dict[str, Any], bytes | None]:
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        stdout = proc.stdout
        answer: queue.Queue[tuple[dict[str, Any], bytes | None] | BaseException] = queue.Queue(maxsize=1)

        def read() -> None:
            try:
                head = json.loads(native.read_frame(stdout))
                answer.put((head, native.read_frame(stdout) if blob and head.get("ok") else None))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                answer.put(exc)

        try:
            for frame in frames:
                native.write_frame(proc.stdin, frame)
            proc.stdin.flush()
        except OSError as exc:
            self.close()
            raise CompileError(f"{self.engine.name} compile worker is gone: {exc}") from exc
        threading.Thread(target=read, name="accord-compile-read", daemon=True).start()
        try:
            item = answer.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise CompileError(
                f"{self.engine.name} ran past the {timeout:g} s compile-time limit", timed_out=True
            ) from None
        if isinstance(item, BaseException):
            code = proc.poll()
            self.close()
            raise CompileError(f"{self.engine.name} compile worker died (exit code {code})")
        return item

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


@atexit.register
def _close_workers() -> None:
    for worker in list(_live):
        worker.close()
