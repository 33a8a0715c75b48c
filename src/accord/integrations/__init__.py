"""accord inside other engines: each integration in a folder of its own, imported only when asked for.

- :mod:`accord.integrations.ray`: a Stabilizer per actor of a Ray Data ``map_batches``
  (the ``ray`` extra; docs/scale.md).

Nothing in accord below this folder imports it; it depends on accord's public API.
"""
