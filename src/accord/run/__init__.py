"""The run loop that decides one prompt, split by job.

    _loop      the I/O-free generator: scheduling, reading each output, per-ballot retries
    _box       the ballot box: tally, verdict (gate, vote, fieldwise, predicted ballots), winner
    _outcome   the Result and the typed error, built from the box and the ballots
    _drive     the sync and async drivers (they only call the backend and wait); _threads
"""
