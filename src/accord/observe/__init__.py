"""Watching a run from outside: hooks, OpenTelemetry spans, what calls cost.

    _hooks      user code called as a run goes (before/after each request, on a ballot, on the end)
    _telemetry  OpenTelemetry spans of a run (the ``otel`` extra)
    _prices     what a model call costs, per million tokens
"""
