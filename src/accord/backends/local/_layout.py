"""The model's own JSON layout: how it writes a JSON object when nothing constrains it.

A grammar decides the whitespace between JSON's tokens. Forced into a layout the model never writes
(``{"answer": "no"}`` on one line, where it writes ``{\\n  "answer": ...``), the model reads a context
it would not have made, and that moves exactly the near-ties the vote is for. So a local model
decodes in its own layout, found once per model:

    probe(backend)   the model's unconstrained greedy answer to a short question, shown a schema
                     as a run shows one (``Schema.render``)
    layout_of(text)  that answer's layout: "indent-N" (a new line and N spaces a level),
                     "spaced" (one space after ``,`` and ``:``) or "compact" (none); None when the
                     answer holds no JSON object to read it from
    Layouts          found layouts kept in the user cache (``layouts.json``), by the model's
                     fingerprint (its weights' hash): one probe per model per machine

A model whose probe shows no layout decodes "spaced", accord's layout before layouts were found.
``models.transformers(..., layout=...)`` names one and skips the probe.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._errors import ConfigError
from ._load import cache_root

if TYPE_CHECKING:
    from ._backend import TransformersBackend

log = logging.getLogger("accord")

DEFAULT = "spaced"  # accord's layout before layouts were found; a probe that shows none keeps it
LAYOUTS = ("spaced", "compact", *(f"indent-{n}" for n in range(1, 9)))
PROBE_QUESTION = "Ann is 34 and lives in Oslo. Describe her."
PROBE_MAX_TOKENS = 48
_FIRST_KEY = re.compile(r'\{([ \t]*\n?[ \t]*)"')
_KEY_SEPARATOR = re.compile(r'"([ \t]*):')
_ITEM_SEPARATOR = re.compile(r',([ \t]*)"')


def check_layout(layout: str | None) -> str | None:
    """``layout`` when it is one accord decodes in (or None: found by a probe); else a ConfigError."""
    if layout is not None and layout not in LAYOUTS:
        raise ConfigError(f'layout must be "spaced", "compact", "indent-N" (N from 1 to 8) or None (found by a probe), got {layout!r}')
    return layout


def layout_of(text: str) -> str | None:
    """The layout of the first JSON object in ``text``: "indent-N", "spaced" or "compact"; None
    when no object opens with a key (or its indent is not 1 to 8 spaces)."""
    opened = _FIRST_KEY.search(text)
    if opened is None:
        return None
    gap = opened.group(1)
    if "\n" in gap:
        indent = gap.rsplit("\n", 1)[1].replace("\t", "    ")
        return f"indent-{len(indent)}" if indent.strip() == "" and 1 <= len(indent) <= 8 else None
    rest = text[opened.start():]
    keyed, itemed = _KEY_SEPARATOR.search(rest), _ITEM_SEPARATOR.search(rest)
    if keyed is None:
        return None
    spaced = keyed.group(1) != "" or (itemed is not None and itemed.group(1) != "")
    return "spaced" if spaced else "compact"


def probe(backend: TransformersBackend) -> tuple[str | None, str]:
    """The model's layout, read from its unconstrained greedy answer to a short question with a
    schema shown; and that answer."""
    from pydantic import BaseModel

    from ..._types import Settings
    from ...schema._schema import Schema

    class Person(BaseModel):
        name: str
        age: int
        city: str

    shown = Schema.of(Person).render()
    prompt = [{"role": "user", "content": f"{PROBE_QUESTION}\n\n{shown}"}]
    text = backend.unconstrained(prompt, Settings(max_tokens=PROBE_MAX_TOKENS)).text
    return layout_of(text), text


class Layouts:
    """Layouts found by probes, by model fingerprint: in memory, and in ``layouts.json`` in the
    user cache (``ACCORD_CACHE_DIR``, else platformdirs'), read and written whole (a small file;
    the last writer of two processes wins, and both found the same)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._found: dict[str, str] = {}

    @property
    def path(self) -> Path:
        return (self.folder or cache_root()) / "layouts.json"

    def get(self, fingerprint: str) -> str | None:
        with self._lock:
            if fingerprint in self._found:
                return self._found[fingerprint]
            stored = self._read().get(fingerprint)
            layout = stored.get("layout") if isinstance(stored, dict) else None
            if isinstance(layout, str) and layout in LAYOUTS:
                self._found[fingerprint] = layout
                return layout
            return None

    def put(self, fingerprint: str, layout: str, answer: str) -> None:
        with self._lock:
            self._found[fingerprint] = layout
            stored = self._read()
            stored[fingerprint] = {"layout": layout, "probe": answer[:400]}
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                staging = self.path.with_suffix(f".{os.getpid()}.tmp")
                staging.write_text(json.dumps(stored, indent=1, sort_keys=True), encoding="utf-8")
                os.replace(staging, self.path)
            except OSError as exc:  # the layout still holds for this process
                log.warning("accord: cannot keep the model's layout in %s (%s)", self.path, exc)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


LAYOUTS_FOUND = Layouts()


def own_layout(backend: TransformersBackend) -> str:
    """The layout ``backend``'s model writes, probed once per model and kept (:data:`LAYOUTS_FOUND`)."""
    found = LAYOUTS_FOUND.get(backend.fingerprint)
    if found is not None:
        return found
    layout, answer = probe(backend)
    chosen = layout or DEFAULT
    log.info("%s: its own JSON layout is %s (probe answer %r)", backend.model_id, chosen, answer[:80])
    LAYOUTS_FOUND.put(backend.fingerprint, chosen, answer)
    return chosen
