"""``stabilize_dataset(dataset, recipe)``: the usual ``map_batches`` call, spelled once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._errors import ConfigError
from ._recipe import Recipe
from ._stabilize import Stabilize


def stabilize_dataset(
    dataset: Any,
    recipe: Recipe,
    *,
    column: str = "prompt",
    actors: int = 1,
    batch_size: int = 64,
    concurrency: int = 8,
    prefix: str = "",
    fail_on_error: bool = False,
    **map_batches: Any,
) -> Any:
    """``dataset`` (a ``ray.data.Dataset``) with the answers of its ``column`` (lazy, as Ray is).

    ``actors`` actors (an ``ActorPoolStrategy`` of that size), each deciding batches of
    ``batch_size`` rows with ``concurrency`` model calls in flight (:class:`Stabilize`).
    ``map_batches``: anything else for ``Dataset.map_batches`` (``num_cpus=0.5`` for actors
    that mostly wait on a remote model, ``num_gpus=1`` for a local one, ``max_restarts``...).
    A recipe that does not pickle is a :class:`~accord.ConfigError` here.
    Ray restarts an actor that died and runs its batches again (by default, for actor pools);
    with the recipe's ledger on PostgreSQL, those replay what was decided before the death.
    """
    if isinstance(actors, bool) or not isinstance(actors, int) or actors < 1:
        raise ConfigError(f"stabilize_dataset(actors=...) must be an int >= 1, got {actors!r}")
    import ray.cloudpickle
    import ray.data

    dumps: Callable[[object], bytes] = ray.cloudpickle.dumps  # untyped in Ray: what it is, said once
    try:  # here, in words, rather than as Ray's serialization report when the actors start
        dumps(recipe)
    except Exception as exc:
        raise ConfigError(f"the recipe does not pickle ({type(exc).__name__}: {exc}): make what holds locks, sockets or "
                          "clients inside its model factory, on the actor") from exc
    return dataset.map_batches(
        Stabilize,
        fn_constructor_args=(recipe,),
        fn_constructor_kwargs={"column": column, "concurrency": concurrency, "prefix": prefix, "fail_on_error": fail_on_error},
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=actors),
        **map_batches,
    )
