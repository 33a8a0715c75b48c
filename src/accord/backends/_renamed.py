"""Old spellings of backend options, kept for one release with a ``DeprecationWarning`` that
names the new one.

    deprecated(old, new, where)                  # the DeprecationWarning
    renamed(options, old, new, where)            # an option's value under its new name, the old popped (warned)
    local_name(name, fingerprint, model_id)      # a local model's identity and label, from either spelling
"""

from __future__ import annotations

from typing import Any

from .. import _check
from .._errors import ConfigError

MISSING: Any = object()  # an option not given


def deprecated(old: str, new: str, where: str, stacklevel: int = 4) -> None:
    """Warn that ``where(old=...)`` is spelled ``where(new)`` now (``new`` as it is written)."""
    _check.deprecated(f"{where}({old}=...)", new, stacklevel)


def renamed(options: dict[str, Any], old: str, new: str, where: str, given: Any = MISSING) -> Any:
    """The value of option ``new``: ``given``, or the old spelling ``old`` popped from ``options``
    (with a DeprecationWarning); both given and different is a ConfigError; :data:`MISSING` when neither."""
    if old not in options:
        return given
    value = options.pop(old)
    deprecated(old, f"{new}=", where)
    if given is not MISSING and given is not None and given != value:
        raise ConfigError(f"{where}({new}={given!r}, {old}={value!r}): give one ({old}= is {new}='s older spelling)")
    return value


def local_name(name: str | None, fingerprint: str | None, model_id: str | None) -> tuple[str | None, str | None]:
    """``models.transformers``' identity (``name``, used as given) and the label its default
    identity starts with: ``fingerprint=`` is ``name=``'s older spelling; ``model_id=`` (the label,
    the weights' hash appended) keeps its meaning for this release. Each warned."""
    if fingerprint is not None:
        deprecated("fingerprint", "name=", "models.transformers", stacklevel=5)
        if name is not None and name != fingerprint:
            raise ConfigError(f"models.transformers(name={name!r}, fingerprint={fingerprint!r}): give one "
                              "(fingerprint= is name='s older spelling)")
        name = fingerprint
    if model_id is not None:
        deprecated("model_id", "name= (the model's identity, used as given: a name of your own, or leave it out to name the "
                   "model by its folder and weights)", "models.transformers", stacklevel=5)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(f"models.transformers(name=...) must be a non-empty string naming the model, got {name!r}")
    return name, model_id
