from typing import Any

import pytest

from accord import ConfigError, Tally, Vote, stop_when_confident, stop_when_unanimous, stop_when_unbeatable
from accord.vote._vote import Candidate, highest_score, share_above_half, smallest_key


def tally(counts: dict[str, int], done: int, k: int = 5, quorum: int = 3) -> Tally:
    return Tally(counts, done, k, quorum)


def test_quorum_defaults_and_fractions() -> None:
    assert Vote(k=5).needed == 3
    assert Vote(k=4).needed == 3
    assert Vote(k=5, quorum=0.6).needed == 3
    assert Vote(k=10, quorum=0.75).needed == 8
    assert Vote(k=5, quorum=2).needed == 2


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"k": 3, "quorum": 4}, {"k": 3, "quorum": 0}, {"k": 3, "quorum": "2"}, {"k": 2.5}])
def test_bad_votes_are_config_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Vote(**kwargs)


def test_unanimous_needs_quorum_and_no_dissent() -> None:
    assert stop_when_unanimous(tally({"a": 3}, 3)) == "unanimous"
    assert stop_when_unanimous(tally({"a": 2}, 2)) is None
    assert stop_when_unanimous(tally({"a": 3, "b": 1}, 4)) is None


def test_unbeatable() -> None:
    assert stop_when_unbeatable(tally({"a": 3, "b": 1}, 4)) == "unbeatable"
    assert stop_when_unbeatable(tally({"a": 2, "b": 1}, 3, k=5, quorum=2)) is None  # b could still reach 3


def test_confident_is_the_beta_posterior() -> None:
    assert share_above_half(4, 0) == pytest.approx(31 / 32)
    assert share_above_half(3, 0) == pytest.approx(15 / 16)
    rule = stop_when_confident(0.95)
    assert rule(tally({"a": 4}, 4, k=10, quorum=6)) == "confident"
    assert rule(tally({"a": 3}, 3, k=10, quorum=6)) is None


def test_rules_compose_with_or() -> None:
    rule = stop_when_unanimous | stop_when_unbeatable
    assert rule(tally({"a": 3, "b": 1}, 4)) == "unbeatable"
    assert "stop_when_unanimous" in repr(rule)


def test_decide_and_hopeless() -> None:
    vote = Vote(k=5)
    assert vote.decide(tally({"a": 2, "b": 2}, 4)) is None
    assert tally({"a": 2, "b": 2, "c": 1}, 5).hopeless
    assert vote.decide(tally({"a": 3, "b": 2}, 5)) in ("unbeatable", "k reached")
    no_early = Vote(k=5, early_stop=False)
    assert no_early.decide(tally({"a": 3}, 3)) is None
    assert no_early.decide(tally({"a": 3, "b": 2}, 5)) == "k reached"


def test_ties_do_not_depend_on_order() -> None:
    cands = [Candidate("b", 2), Candidate("a", 2)]
    assert smallest_key(cands) == smallest_key(list(reversed(cands))) == "a"
    scored = [Candidate("b", 2, (-0.1,)), Candidate("a", 2, (-0.5,))]
    assert highest_score(scored) == "b"
    assert highest_score([Candidate("b", 2, (-0.1,)), Candidate("a", 2)]) == "a"
    vote = Vote(k=4, quorum=2)
    assert vote.winner(tally({"b": 2, "a": 2}, 4, k=4, quorum=2)) == "a"


def test_highest_score_falls_back_to_the_smallest_key_on_equal_scores() -> None:
    assert highest_score([Candidate("10", 1, (-0.5,)), Candidate("1", 1, (-0.5,))]) == "1"
