"""accord on Ray Data: ``dataset.map_batches(Stabilize, ...)`` decides one prompt column per batch.

Each actor builds one :class:`~accord.Stabilizer` from a :class:`Recipe` (a backend factory, the
schema, the policies and the ledger's DSN: all picklable), once, and decides every batch it gets
with ``amap`` (``concurrency`` model calls in flight per actor). Every row comes out with its
answer as columns (:data:`COLUMNS`); a failed row has ``error_type`` and ``error_message`` set
and never fails its batch unless ``fail_on_error=True``.

With a ledger on PostgreSQL shared by the actors, a batch Ray runs again after an actor died
replays the prompts already decided instead of calling the model again, and two datasets over
overlapping prompts decide each shared prompt once (see :class:`~accord.Ledger`)::

    import ray.data
    from accord.integrations.ray import Recipe, stabilize_dataset

    recipe = Recipe(make_model, Invoice, ledger="postgresql://accord@db/accord", vote=accord.Vote(k=3))
    out = stabilize_dataset(ray.data.read_parquet("in/"), recipe, column="text", actors=4)
    out.write_parquet("out/")

Needs ``pip install 'accord[ray]'`` (Ray Data and pyarrow); importing this module imports pyarrow,
never ray itself until :func:`stabilize_dataset` is called.
"""

import importlib.util

if importlib.util.find_spec("pyarrow") is None:  # a clear word instead of a bare ModuleNotFoundError below
    raise ImportError("accord.integrations.ray needs Ray Data and pyarrow: pip install 'accord[ray]'")

from ._columns import COLUMNS
from ._dataset import stabilize_dataset
from ._recipe import Recipe
from ._stabilize import Stabilize

__all__ = ["COLUMNS", "Recipe", "Stabilize", "stabilize_dataset"]
