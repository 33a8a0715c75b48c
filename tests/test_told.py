"""What the model is told (issue 42): the schema in every prompt, and the model's own JSON layout.

On the embedded model and on a second small instruct model (tests/second_model.py) the project never
tuned to: both write indented JSON unconstrained, so both decode in it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

import accord
from accord._types import Request, Settings
from accord.backends.local import _layout
from accord.backends.local._layout import Layouts, layout_of
from accord.prompt._prompt import build_input
from accord.schema._schema import Schema


class Review(BaseModel):
    stars: int = Field(ge=1, le=5, description="how many stars the reviewer gave")
    sentiment: Literal["positive", "negative", "neutral"]


# -- the layout of a text --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "layout"), [
    ('{\n  "name": "Ann",\n  "age": 34\n}', "indent-2"),
    ('Sure! Here it is:\n```json\n{\n    "name": "Ann"\n}\n```', "indent-4"),
    ('{\n\t"name": "Ann"\n}', "indent-4"),
    ('{"name": "Ann", "age": 34}', "spaced"),
    ('{"name":"Ann","age":34}', "compact"),
    ('{"name":"Ann", "age":34}', "spaced"),
    ("Ann is 34 and lives in Oslo.", None),
    ("{}", None),
    ('{\n' + " " * 12 + '"name": 1}', None),
])  # fmt: skip
def test_the_layout_of_the_first_json_object_is_read_from_its_whitespace(text: str, layout: str | None) -> None:
    assert layout_of(text) == layout


def test_a_layout_is_kept_per_model_in_the_cache_and_read_back_by_another_process(tmp_path: Path) -> None:
    kept = Layouts(tmp_path)
    assert kept.get("model-a") is None
    kept.put("model-a", "indent-2", '{\n  "name": "Ann"\n}')
    assert Layouts(tmp_path).get("model-a") == "indent-2", "a fresh instance reads the file"
    stored = json.loads((tmp_path / "layouts.json").read_text())
    assert stored["model-a"]["layout"] == "indent-2" and "Ann" in stored["model-a"]["probe"]
    (tmp_path / "layouts.json").write_text('{"model-a": {"layout": "sideways"}}')
    assert Layouts(tmp_path).get("model-a") is None, "a layout accord does not decode in is no layout"
    (tmp_path / "layouts.json").write_text("not json")
    assert Layouts(tmp_path).get("model-a") is None


def test_a_layout_that_is_not_one_is_a_config_error() -> None:
    with pytest.raises(accord.ConfigError, match="indent-N"):
        accord.models.local(layout="pretty")


# -- the embedded model --------------------------------------------------------------------------


def test_the_embedded_model_decodes_in_the_layout_its_probe_shows(local_model: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    found = Layouts(tmp_path)
    monkeypatch.setattr(_layout, "LAYOUTS_FOUND", found)
    layout, answer = _layout.probe(local_model)
    assert layout == "indent-2" and answer.startswith("{\n  \""), answer
    assert _layout.own_layout(local_model) == "indent-2" and found.get(local_model.fingerprint) == "indent-2"
    schema = Schema.of(Review)
    prompt = "Review: 'Broke after two days.'"
    request = Request(prompt, build_input(prompt, schema, hint=True, feedback=None), schema, Settings(max_tokens=40))
    text = local_model.generate(request, whitespace="indent-2").text
    assert text.startswith('{\n  "'), text
    assert schema.validate(json.loads(text))
    spaced = local_model.generate(request, whitespace="spaced").text
    assert spaced.startswith('{"') and "\n" not in spaced, spaced


def test_the_schema_shown_names_each_field_with_its_description_and_choices() -> None:
    shown = build_input("Review: 'Broke after two days.'", Schema.of(Review), hint=True, feedback=None)
    assert isinstance(shown, str) and shown.startswith("Review: 'Broke after two days.'\n\n")
    assert "how many stars the reviewer gave" in shown and '"positive" | "negative" | "neutral"' in shown


def test_a_run_on_the_embedded_model_writes_its_own_layout(local_model: Any) -> None:
    result = accord.Stabilizer(local_model, Review, vote=accord.Vote(k=1, gate=None)).run("Review: 'Broke after two days.'")
    assert result.value is not None and result.ballots[0].text.startswith('{\n  "'), result.ballots[0].text


def test_schema_in_prompt_false_still_leaves_it_out_on_a_constraining_backend() -> None:
    class Grammar:
        fingerprint, constrains = "g", True

        def __init__(self) -> None:
            self.sent: list[Any] = []

        def generate(self, request: Any) -> Any:
            self.sent.append(request.input)
            return accord.Completion(text='{"stars": 2, "sentiment": "negative"}')

    shown, alone = Grammar(), Grammar()
    accord.Stabilizer(shown, Review, vote=accord.Vote(k=1, gate=None)).run("Broke.")
    accord.Stabilizer(alone, Review, vote=accord.Vote(k=1, gate=None), prompting=accord.Prompting(schema_in_prompt=False)).run("Broke.")
    assert "sentiment" in shown.sent[0] and alone.sent == ["Broke."]


# -- the second model ------------------------------------------------------------------------------


def test_the_second_model_is_the_pinned_one_found_by_hash_and_decodes_in_its_own_layout(second_model: Any) -> None:
    import second_model as pinned

    assert second_model.fingerprint == f"{pinned.LABEL}@sha256:{pinned.SHA256[:16]}"
    assert second_model.layout == "indent-2"
    result = accord.Stabilizer(second_model, Review, vote=accord.Vote(k=1, gate=None)).run(
        "Review: 'Terrible. It broke after two days and support never answered.'")
    assert result.ballots[0].text.startswith('{\n  "'), result.ballots[0].text
    assert result.value is not None and result.value.sentiment == "negative"
