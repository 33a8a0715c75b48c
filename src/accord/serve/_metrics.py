"""``GET /metrics``: the proxy's figures for Prometheus (``prometheus-client``, one registry per app).

    accord_serve_requests_total{mode, status}       requests answered (mode: schema, tool, text, pass, other)
    accord_serve_request_seconds{mode}              time to answer
    accord_serve_calls_per_answer                   ballots (model calls) behind each decided answer
    accord_serve_upstream_requests_per_answer       every upstream request behind each decided answer: ballots and batch neighbours
    accord_serve_neighbour_requests_total           batch neighbours sent (filler requests beside a ballot, a self-hosted upstream only)
    accord_serve_agreement                          the winner's share of the valid ballots
    accord_serve_answers_total{stable}              decided answers, stable or not: the stable share
    accord_serve_errors_total{type}                 error answers by their OpenAI ``type``
    accord_serve_upstream_seconds{outcome}          each upstream call's latency, chat or Messages (outcome: ok, error, unreachable)
    accord_serve_upstream_calls_in_flight           upstream chat calls in flight now
    accord_serve_requests_in_flight                 requests being handled now
    accord_serve_client_disconnects_total           requests whose client left before the answer (their ballots cancelled)
"""

from __future__ import annotations

from typing import Any


class Metrics:
    """The proxy's Prometheus metrics, in a registry of their own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("accord_serve_requests", "Requests answered", ["mode", "status"], registry=r)
        self.seconds = Histogram("accord_serve_request_seconds", "Time to answer a request", ["mode"], registry=r,
                                 buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))  # fmt: skip
        self.calls = Histogram("accord_serve_calls_per_answer", "Ballots (model calls) behind a decided answer", registry=r,
                               buckets=(0, 1, 2, 3, 4, 5, 7, 9, 12, 16, 25, 50))  # fmt: skip
        self.requests_per_answer = Histogram("accord_serve_upstream_requests_per_answer",
                                             "Every upstream request behind a decided answer: ballots and batch neighbours", registry=r,
                                             buckets=(0, 1, 2, 3, 4, 5, 7, 9, 12, 16, 25, 50))  # fmt: skip
        self.neighbours = Counter("accord_serve_neighbour_requests", "Batch neighbours sent beside ballots", registry=r)
        self.agreement = Histogram("accord_serve_agreement", "The winner's share of the valid ballots", registry=r,
                                   buckets=(0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0))  # fmt: skip
        self.answers = Counter("accord_serve_answers", "Decided answers, by whether the vote policy accepted them", ["stable"], registry=r)
        self.errors = Counter("accord_serve_errors", "Error answers, by OpenAI error type", ["type"], registry=r)
        self.upstream_seconds = Histogram("accord_serve_upstream_seconds", "Latency of each upstream chat call", ["outcome"], registry=r,
                                          buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))  # fmt: skip
        self.upstream_in_flight = Gauge("accord_serve_upstream_calls_in_flight", "Upstream chat calls in flight", registry=r)
        self.in_flight = Gauge("accord_serve_requests_in_flight", "Requests being handled", registry=r)
        self.disconnects = Counter("accord_serve_client_disconnects", "Requests whose client left before the answer", registry=r)

        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def upstream(self, status: int | None, seconds: float) -> None:
        outcome = "unreachable" if status is None else "ok" if status < 400 else "error"
        self._child(self.upstream_seconds, outcome).observe(seconds)

    def answered(self, mode: str, status: int, seconds: float) -> None:
        self._child(self.requests, mode, str(status)).inc()
        self._child(self.seconds, mode).observe(seconds)

    def decided(self, calls: int, agreement: float, stable: bool, neighbours: int = 0) -> None:
        self.calls.observe(calls)
        self.requests_per_answer.observe(calls + neighbours)
        if neighbours:
            self.neighbours.inc(neighbours)
        self.agreement.observe(agreement)
        self._child(self.answers, "true" if stable else "false").inc()

    def text(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def track_upstream(self, wire: Any) -> None:
        """The in-flight gauge reads the wire's count when scraped."""
        self.upstream_in_flight.set_function(lambda: float(wire.in_flight))
