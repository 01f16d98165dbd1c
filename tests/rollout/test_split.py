"""A step's weight → candidate replicas behind vllm-router (which splits by engine count)."""

from __future__ import annotations

import pytest

from infra.rollout.split import expressible_percents, router_split, split_problem


@pytest.mark.parametrize(
    ("weight", "current", "candidate", "realised"),
    [(20, 4, 1, 20.0), (50, 4, 4, 50.0), (25, 3, 1, 25.0), (10, 9, 1, 10.0), (33, 2, 1, 33.3), (5, 19, 1, 5.0)],
)
def test_the_candidate_gets_the_replicas_whose_share_is_nearest(weight, current, candidate, realised):
    split = router_split(weight, current)
    assert (split.candidate_replicas, round(split.realised_percent, 1)) == (candidate, realised)
    assert split_problem(split) is None


def test_a_step_the_fleet_cannot_express_is_refused_with_the_shares_it_can():
    split = router_split(5, 4)  # one candidate of five engines is 20 %, not 5 %
    assert split.candidate_replicas == 1 and not split.expressible
    why = split_problem(split)
    assert "5 % cannot be expressed" in why and "20 %" in why and "33.3 %" in why


def test_expressible_shares_stop_below_100():
    assert expressible_percents(4)[:3] == [20.0, 33.3, 42.9]
    shares = expressible_percents(1)
    assert shares[0] == 50.0 and max(shares) <= 99


@pytest.mark.parametrize(("weight", "current"), [(0, 4), (100, 4), (50, 0)])
def test_impossible_inputs_are_a_bug(weight, current):
    with pytest.raises(ValueError):
        router_split(weight, current)
