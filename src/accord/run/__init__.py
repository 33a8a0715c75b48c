"""The run loop that decides one prompt, split by job.

    _decider   one prompt's way (run, stream, map alike): recall, claim, begin, drive, remember
    _loop      the I/O-free generator: scheduling, admission, the budget, recording each ballot
    _absorb    one finished call: its output read, then cast, asked again or retried (per ballot)
    _unreadable while every output has nothing to read: one slot's retries stand for the run's
    _calls     what the loop and its drivers exchange: Call, Step, Outcome, Queued, Delta; _policy: Policy
    _box       the ballot box: tally, verdict (gate, vote, fieldwise, predicted ballots), winner
    _outcome   the Result and the typed error, built from the box and the ballots
    _drive     the sync and async drivers (they only call the backend and wait); _stream: one call
    _map       many prompts at once (Stabilizer.map): the concurrency limits, the ledger's claims, input order
"""
