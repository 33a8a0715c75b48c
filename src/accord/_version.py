"""accord's version (pyproject.toml's), at the bottom of the house: the tracers name it."""

__version__ = "0.1.0"
