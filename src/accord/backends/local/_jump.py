"""Jump-forward decoding: what the grammar forces is written without asking the model for it.

In a JSON object most tokens are not the model's to choose: once a value ends, the grammar forces
the rest of the line, the next key and its opening quote (``",\\n  "invoice_number": "``). Asking
the model for each of those tokens costs a forward pass each, and a forward pass of a small model
on a CPU costs the same whether it takes one token or eight (every weight is read once). So after
each token the model chooses, :func:`forced_after` asks the grammar for the text it now forces,
spells it as the model's tokenizer does (the spelling the model reads in training), keeps all but
its last token (which may join what follows: ``' "'`` can become ``' "$'``), and :func:`decode`
feeds those tokens with the chosen one in one forward pass.

The text is the text greedy decoding writes: a forced token has no alternative. What changes is
the spelling of forced text (the tokenizer's, where a step-by-step decode lets the model pick
among the spellings the grammar allows) and the numeric path of the logits after it, the kind of
difference a server's batching makes. Each forced token is recorded as a step with one allowed
token (margin ``inf``), as the recorder records one the grammar alone decides.

Used for greedy, unperturbed, one-row calls in the model's own layout whose grammar engine can
tell what it forces (xgrammar, llguidance: ``_engines.forces``). Every other call runs
``model.generate``: sampling, a perturbed ballot (its own numeric path on purpose), and a
reference deployment decoding as the server it stands for (``whitespace=``), since a server asks
its model for every token. ``ACCORD_JUMP_FORWARD=0`` turns it off.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ._engines import forced_by, forces
from ._steps import token_ids


def generated(model: Any, inputs: dict[str, Any], config: Any, processors: list[Any], *, stop: Any, streamer: Any,
              tokenizer: Any, jump: bool) -> Any:
    """The ids a call decodes (prompt and new tokens of every row): by :func:`decode` where
    ``jump`` is asked and the call :func:`jumps`, else by ``model.generate``."""
    from transformers import LogitsProcessorList

    if jump and len(processors) > 1 and jumps(processors[0], config, inputs):
        return decode(model, inputs, processors, stop=stop, streamer=streamer, max_new=config.max_new_tokens,
                      ends=config.eos_token_id, tokenizer=tokenizer)
    return model.generate(**inputs, generation_config=config, logits_processor=LogitsProcessorList(processors),
                          tokenizer=tokenizer if config.stop_strings else None, streamer=streamer,
                          stopping_criteria=[stop] if stop else None)


def jumps(processor: Any, config: Any, inputs: dict[str, Any]) -> bool:
    """Whether a call can decode here: greedy, no stop strings, one row, a grammar that can tell
    what it forces."""
    if os.environ.get("ACCORD_JUMP_FORWARD", "1") == "0" or config.do_sample or config.stop_strings:
        return False
    if int(inputs["input_ids"].shape[0]) != 1:
        return False
    return forces(processor)


def forced_after(processor: Any, token: int, tokenizer: Any, room: int) -> list[int]:
    """The tokens the grammar forces once ``token`` is written (at most ``room``), in the
    tokenizer's spelling, the last one left to the model. The grammar's own state is not moved."""
    found = forced_by(processor, token) if room > 1 else None
    if found is None:
        return []
    text, accept = found
    if not text:
        return []
    spelled = list(tokenizer.encode(text, add_special_tokens=False))[:-1][: room - 1]
    taken: list[int] = []
    for forced in spelled:
        if not accept(forced):
            break
        taken.append(forced)
    return taken


def decode(model: Any, inputs: dict[str, Any], processors: list[Any], *, stop: Any, streamer: Any, max_new: int,
           ends: Any, tokenizer: Any) -> Any:
    """Greedy decoding of row 0 under ``processors`` (the grammar's first, the recorder last),
    forced tokens fed in with the token before them: the ids, prompt and new tokens, as
    ``model.generate`` returns them."""
    run = _Decoding(model, inputs, processors, stop=stop, streamer=streamer, max_new=max_new, ends=ends)
    pending = run.ids
    while True:
        scores = run.step(pending)
        token = int(scores.argmax(dim=-1)[0])
        chain = [token]
        going = run.write(token, scores)
        for forced in forced_after(processors[0], token, tokenizer, max_new - run.written) if going else ():
            if stop is not None and stop.closing is not None:
                break  # a loop is being closed: the closer chooses, not the grammar
            chain.append(forced)
            if not (going := run.write(forced, run.forced(forced, scores))):
                break
        if not going:
            break
        pending = run.ids.new_tensor([chain])
    if streamer is not None:
        streamer.end()
    return run.ids


class _Decoding:
    """One call's state in :func:`decode`: the ids so far, the attention mask, the model's cache."""

    def __init__(self, model: Any, inputs: dict[str, Any], processors: list[Any], *, stop: Any, streamer: Any,
                 max_new: int, ends: Any) -> None:
        import torch
        from transformers import DynamicCache

        self.model, self.processors, self.stop, self.streamer, self.max_new = model, processors, stop, streamer, max_new
        self.ids = inputs["input_ids"]
        given = inputs.get("attention_mask")
        self.mask = given if given is not None else torch.ones_like(self.ids)
        self.ends = set(token_ids(ends))
        self.cache = DynamicCache(config=model.config)
        self.written = 0
        if streamer is not None:
            streamer.put(self.ids.cpu())

    def step(self, pending: Any) -> Any:
        """One forward pass over ``pending`` (the tokens the cache lacks), the last position's
        logits through every processor, as ``generate`` runs them."""
        import torch

        past = self.cache.get_seq_length()
        positions = torch.arange(past, past + pending.shape[1], device=self.ids.device).unsqueeze(0)
        out = self.model(input_ids=pending, attention_mask=self.mask, position_ids=positions, cache=self.cache,
                         use_cache=True, logits_to_keep=1)
        scores = out.logits[:, -1].to(copy=True, dtype=torch.float32)
        for processor in self.processors:
            scores = processor(self.ids, scores)
        return scores

    def forced(self, token: int, like: Any) -> Any:
        """The step of a forced ``token``, with no forward pass: the grammar takes the token before
        it, and the other processors (the recorder last) see one allowed token."""
        import torch

        self.processors[0](self.ids, torch.zeros_like(like))
        scores = torch.full_like(like, -math.inf)
        scores[0, token] = 0.0  # margin inf, log-probability 0
        for processor in self.processors[1:]:
            scores = processor(self.ids, scores)
        return scores

    def write(self, token: int, scores: Any) -> bool:
        """Append ``token``; whether decoding goes on (no loop stop, no end, room left)."""
        import torch

        self.ids = torch.cat([self.ids, self.ids.new_tensor([[token]])], dim=1)
        self.mask = torch.cat([self.mask, self.mask.new_ones((1, 1))], dim=1)
        self.written += 1
        if self.streamer is not None:
            self.streamer.put(self.ids.new_tensor([token]).cpu())
        halted = self.stop is not None and bool(self.stop(self.ids, scores).any())
        return not halted and token not in self.ends and self.written < self.max_new
