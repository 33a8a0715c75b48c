"""The run loop that decides one prompt, split by job.

    _loop      the I/O-free generator: scheduling and per-ballot retries
    _drive     the sync and async drivers (they only call the backend and wait); _threads
"""
