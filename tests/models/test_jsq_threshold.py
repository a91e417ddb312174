"""jsq-threshold: the threshold systems as their own model, against an independent chain and closed forms."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import exactq
from exactq.catalogue import solve_representation
from exactq.ctmc import Event, build_ctmc
from exactq.errors import UnstableError
from exactq.statespace import StateSpace


def pair_chain(lam, mu, T, system, K):
    """The (q1, q2) chain of the threshold system, truncated at K jobs per queue (arrivals blocked there)."""
    space = StateSpace.box(["q1", "q2"], hi=[K, K])

    def arrive(i):
        def fn(s):
            q, o = s[:, i], s[:, 1 - i]
            share = np.where(q < o, 1.0, np.where(q == o, 0.5, 0.0))
            t = s.copy()
            t[:, i] += 1
            return lam * share * (q < K), t
        return fn

    def depart(i):
        def fn(s):
            q, o = s[:, i], s[:, 1 - i]
            t = s.copy()
            t[:, i] -= 1
            at_threshold = (o - q == T) & (q > 0)
            if system == "jockeying":  # a job of the longer queue jockeys to the shorter one: the difference stays T
                t[:, i] += at_threshold
                t[:, 1 - i] -= at_threshold
                return mu * (q > 0), t
            return mu * ((q > 0) & ~at_threshold), t  # blocking: the shorter queue's server stops at T
        return fn

    events = [Event(f"{k}{i}", f(i)) for i in (0, 1) for k, f in (("a", arrive), ("d", depart))]
    reach = np.abs(space.states[:, 0] - space.states[:, 1]) <= T
    return build_ctmc(StateSpace(space.states[reach], ["q1", "q2"]), events)


@pytest.mark.parametrize("system", ["jockeying", "blocking"])
def test_the_model_matches_its_queue_coordinate_chain(system):
    lam, mu, T = 1.0, 1.0, 3
    chain = pair_chain(lam, mu, T, system, K=45)
    pi = solve_representation(chain).pi
    total = chain.states.sum(1)
    kw = dict(system=system, threshold=T, arrival_rate=lam, service_rate=mu)
    r = exactq.solve("jsq-threshold", "mean_number", **kw)
    assert r.method == "qbd" and r.error_estimate < 1e-9
    assert r.value == pytest.approx(float(pi @ total), rel=1e-10)
    assert exactq.solve("jsq-threshold", "prob_empty", **kw).value == pytest.approx(float(pi[total == 0].sum()),
                                                                                  rel=1e-10)
    assert exactq.solve("jsq-threshold", "mean_response_time", **kw).value == pytest.approx(r.value / lam, rel=1e-13)


def test_jockeying_at_threshold_one_is_the_mm2_queue():
    lam, mu = 1.8, 1.0
    rho = lam / (2 * mu)
    kw = dict(system="jockeying", threshold=1, arrival_rate=lam, service_rate=mu)
    assert exactq.solve("jsq-threshold", **kw).value == pytest.approx(2 * rho / (1 - rho**2), rel=1e-12)
    assert exactq.solve("jsq-threshold", "prob_empty", **kw).value == pytest.approx((1 - rho) / (1 + rho), rel=1e-12)
    # Erlang C for two servers: P(wait) = 2 rho^2 / (1 + rho), W = P(wait) / (2 mu - lambda)
    assert exactq.solve("jsq-threshold", "mean_waiting_time", **kw).value == pytest.approx(
        2 * rho**2 / (1 + rho) / (2 * mu - lam), rel=1e-12)


def test_the_systems_bracket_jsq_and_the_deprecated_spelling_gives_the_same_numbers():
    kw = dict(arrival_rate=1.8, threshold=6)
    lo = exactq.solve("jsq-threshold", system="jockeying", service_rate=1.0, **kw)
    up = exactq.solve("jsq-threshold", system="blocking", service_rate=1.0, **kw)
    assert lo.value <= 9.85484308 <= up.value  # JSQ's E[L] (MODELS.md)
    for system, new in (("jockeying", lo), ("blocking", up)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = exactq.solve("jsq", method="qbd", threshold_system=system, service_rates="1,1", **kw)
        assert old.value == new.value
        msgs = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
        assert msgs and all("jsq-threshold" in m and f"system={system}" in m for m in msgs)


def test_refusals_are_one_line():
    with pytest.raises(UnstableError, match="threshold=1 is unstable .*use threshold >= 2"):
        exactq.model("jsq-threshold", system="blocking", threshold=1, arrival_rate=1.8, service_rate=1.0)
    with pytest.raises(UnstableError, match="arrival_rate must be < total service rate 2"):
        exactq.model("jsq-threshold", system="jockeying", threshold=2, arrival_rate=2.5, service_rate=1.0)
    with pytest.raises(exactq.ModelError, match="system"):
        exactq.model("jsq-threshold", system="random", threshold=2, arrival_rate=1.0, service_rate=1.0)
    with pytest.raises(exactq.NotApplicableError, match="its representation is exact, with nothing to truncate"):
        exactq.solve("jsq-threshold", system="jockeying", threshold=2, arrival_rate=1.0, service_rate=1.0,
                     truncation=5)


def test_on_the_command_line(capsys):
    from exactq.cli import main

    assert main(["solve", "jsq-threshold", "system=jockeying", "threshold=1", "arrival_rate=1.8", "service_rate=1",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["method"] == "qbd" and d["value"] == pytest.approx(1.8 / 0.19, rel=1e-12)
    assert main(["models", "jsq-threshold"]) in (0, None)
    assert "threshold jockeying or threshold blocking" in capsys.readouterr().out
