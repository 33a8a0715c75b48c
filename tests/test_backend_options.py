"""The backends' options (#35): ``models.openai`` in at most 10 named parameters plus the client
passthrough, ``Margins`` for how margins are read, ``name=`` for a model's identity, and every
older spelling still working for one release with a DeprecationWarning that names the new one.
Also the shape of ``src/accord/backends``: no ``type: ignore``, no ``meta`` read between layers."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

import accord
from accord import models
from accord.backends._renamed import local_name
from accord.backends.openai._caps import Capabilities

BACKENDS = Path(accord.__file__).parent / "backends"


def openai_backend(**options: Any) -> Any:
    return models.openai(base_url="http://127.0.0.1:9/v1", model="m", capabilities=Capabilities(), **options)


def test_models_openai_takes_at_most_eleven_named_parameters_and_a_documented_passthrough() -> None:
    params = inspect.signature(models.openai).parameters.values()
    named = [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    assert len(named) <= 11, named  # ten, and api= (issue 44: chat completions or the Responses API)
    assert [p.name for p in params if p.kind is p.VAR_KEYWORD] == ["client_options"]


@pytest.mark.parametrize(
    "old,value,field",
    [("logprobs", False, "logprobs"), ("top_logprobs", 5, "top_logprobs"), ("noise_floor", 0.25, "noise_floor"),
     ("dtype", "bfloat16", "dtype_label")],
)
def test_the_older_margin_options_still_work_and_warn_naming_the_margins_field(old: str, value: Any, field: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"models\.openai\({old}=\.\.\.\) is deprecated.*Margins\({field}=") as caught:
        backend = openai_backend(**{old: value})
    assert caught[0].filename == __file__  # pointed at the caller
    assert getattr(backend.margins, field) == value and backend.margins == openai_backend(margins=models.Margins(**{field: value})).margins


def test_the_new_spellings_warn_nothing_and_set_what_the_old_ones_did() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend = openai_backend(margins=models.Margins(top_logprobs=3, noise_floor=0.5, dtype_label="bfloat16"), timeout=5.0,
                                 api_key="sk-test", organization="org-1", default_headers={"X-Team": "a"})
    assert (backend.logprobs, backend.top_logprobs, backend.noise_floor, backend.dtype) == (True, 3, 0.5, "bfloat16")
    assert backend.noise() == accord.models.Noise(0.5, "bfloat16") and backend.describe()["dtype"] == "bfloat16"
    settings = backend.servers[0].settings
    assert settings["organization"] == "org-1" and settings["default_headers"] == {"X-Team": "a"} and settings["timeout"] == 5.0


def test_margins_and_client_options_refuse_what_they_cannot_take() -> None:
    for bad in ({"top_logprobs": 1}, {"top_logprobs": True}, {"noise_floor": -1.0}, {"dtype_label": ""}, {"logprobs": "yes"}):
        with pytest.raises(accord.ConfigError):
            models.Margins(**bad)
    with pytest.raises(accord.ConfigError, match=r"unknown options \['max_retries'\].*api_key, timeout"):
        openai_backend(max_retries=3)
    with pytest.raises(accord.ConfigError, match="margins must be"):
        openai_backend(margins={"noise_floor": 0.5})
    with pytest.warns(DeprecationWarning), pytest.raises(accord.ConfigError, match="not both"):
        openai_backend(margins=models.Margins(noise_floor=0.5), noise_floor=0.25)


def test_name_is_the_one_spelling_of_a_models_identity_and_fingerprint_warns() -> None:
    assert models.scripted(["x"], name="m").fingerprint == "m" and models.scripted(["x"]).fingerprint == "scripted"
    with pytest.warns(DeprecationWarning, match=r"models\.scripted\(fingerprint=\.\.\.\) is deprecated.*use name="):
        assert models.scripted(["x"], fingerprint="m").fingerprint == "m"
    with pytest.warns(DeprecationWarning), pytest.raises(accord.ConfigError, match="give one"):
        models.scripted(["x"], name="a", fingerprint="b")
    with pytest.warns(DeprecationWarning, match=r"models\.function\(fingerprint=\.\.\.\) is deprecated.*use name="):
        assert models.function(lambda p: "x", fingerprint="m").fingerprint == "m"
    with pytest.warns(DeprecationWarning, match=r"models\.transformers\(fingerprint=\.\.\.\) is deprecated.*use name="):
        assert local_name(None, "m@sha256:1", None) == ("m@sha256:1", None)
    with pytest.warns(DeprecationWarning, match=r"models\.transformers\(model_id=\.\.\.\) is deprecated.*use name="):
        assert local_name(None, None, "label") == (None, "label")  # the label keeps its meaning for this release
    assert local_name("mine", None, None) == ("mine", None)
    with pytest.raises(accord.ConfigError):
        local_name(" ", None, None)


def test_the_float32_floor_of_noise_is_no_longer_called_reference() -> None:
    noise = models.Noise.measured("bfloat16", {"precision": 0.4, "batch": 0.01}, 0.02)
    assert noise.float32_floor == 0.02 and noise.floor == 0.4
    with pytest.warns(DeprecationWarning, match=r"Noise\(reference=\.\.\.\) is deprecated.*float32_floor="):
        assert models.Noise(0.4, "bfloat16", reference=0.02) == models.Noise(0.4, "bfloat16", {}, 0.02)
    with pytest.warns(DeprecationWarning, match=r"Noise\.reference is deprecated.*Noise\.float32_floor"):
        assert noise.reference == 0.02


def test_a_config_files_flat_margin_names_become_margins_without_a_warning() -> None:
    import warnings

    from accord.backends.openai._options import flat_margins

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        options = flat_margins({"noise_floor": 0.5, "dtype": "bfloat16", "spread": False})
        backend = openai_backend(**options)
    assert options == {"spread": False, "margins": models.Margins(noise_floor=0.5, dtype_label="bfloat16")}
    assert backend.noise_floor == 0.5 and backend.dtype == "bfloat16" and not backend.spread


def _sources() -> list[Path]:
    return sorted(BACKENDS.rglob("*.py"))


def test_no_type_ignore_under_backends() -> None:
    found = [f"{p.relative_to(BACKENDS)}:{n}" for p in _sources() for n, line in enumerate(p.read_text().splitlines(), 1)
             if "type: ignore" in line]
    assert not found


def test_no_meta_read_carries_data_between_layers_under_backends() -> None:
    """``meta`` is what a backend records on a ballot for the user: written, never read back
    (``meta[...]`` loaded, or ``meta.get(...)``) to carry data from one layer to another."""
    reads = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            target = None
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                target = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                target = node.func.value
            name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else None
            if name == "meta":
                reads.append(f"{path.relative_to(BACKENDS)}:{node.lineno}")
    assert not reads
