"""A lock across the processes of a machine, on a file beside what it guards.

The embedded model's one-time conversion (``backends/local/_embedded``) and the noise servers'
ballots teach (``backends/openai/_noise``) both write files that several processes may write at
once; each write takes this lock, then replaces its file atomically.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (POSIX); elsewhere the atomic rename alone keeps it safe."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
