"""What shape the output takes: the adapter over every kind of ``schema=`` and its checks.

    _schema      one adapter (object, choice, scalar, list, dict JSON Schema, regex): JSON Schema, validate, dump
    _jsonschema  a JSON Schema dict: checked whole at construction ($refs resolved), validated with bounded patterns
    _metaschema  the JSON Schema meta-schema a dict schema is checked against, with bounded patterns
"""
