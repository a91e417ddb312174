"""One convention per concept: every rate parameter says whether it is the total or per server.

``arrival_rate`` is the total rate in ``jsq``, ``sed``, ``round-robin`` and the reference
queues but the rate per server in ``power-of-d`` and ``speed-aware`` (issue 24, item 4).
The scope of each rate parameter is checked against MODELS.md's definitions, the
listing (text and ``--json``) must state it, and the aliases ``total_arrival_rate`` and
``arrival_rate_per_server`` must give the same values as the old name.
"""

from __future__ import annotations

import json
import math

import pytest

import exactq
from exactq.catalogue import get_model
from exactq.catalogue_index import INDEX
from exactq.cli import main
from exactq.errors import ModelError
from exactq.params import Alias, Count, Param, param_table, parse_params

#: the scope of each rate parameter, read off MODELS.md's definitions (the comment quotes it)
EXPECTED = {
    ("jsq", "arrival_rate"): "total",  # "Two servers of rate 1, arrivals 2 rho"
    ("jsq", "service_rates"): "per-server",  # "Rates mu1 != mu2"
    ("sed", "arrival_rate"): "total",  # "Two identical servers ... arrivals 2 rho"
    ("sed", "service_rates"): "per-server",
    ("power-of-d", "arrival_rate"): "per-server",  # "n servers of rate 1, arrivals n lambda"
    ("speed-aware", "arrival_rate"): "per-server",  # "rate mu_j, arrivals N lambda"
    ("speed-aware", "speeds"): "per-server",  # "Server classes j with fraction gamma_j and rate mu_j"
    ("round-robin", "arrival_rate"): "total",  # "one Poisson stream of total rate Lambda (`arrival_rate`)"
    ("round-robin", "service_rate"): "per-server",  # "n processors of rate mu (`service_rate`)"
    ("round-robin", "failure_rate"): "per-server",  # "each alternates up (exponential, rate `failure_rate`)"
    ("round-robin", "repair_rate"): "per-server",  # "... and down (rate `repair_rate`)"
    ("ps-routing", "service_rates"): "per-server",  # "Servers i with capacity mu_i"
    ("ps-routing", "work_rate"): "total",  # "work rate rho = sum lambda_k E[B_k] < sum mu_i"
    ("ps-routing", "arrival_rates"): "total",  # "classes with Poisson rates lambda_k", each routed over all servers
    ("mm1", "arrival_rate"): "total",
    ("mm1", "service_rate"): "per-server",
    ("mmc", "arrival_rate"): "total",  # one queue fed by the whole stream
    ("mmc", "service_rate"): "per-server",
    ("mmck", "arrival_rate"): "total",
    ("mmck", "service_rate"): "per-server",
    ("mph1", "arrival_rate"): "total",
    ("optimal-dispatch", "arrival_rate"): "total",  # "Poisson arrivals at total rate `arrival_rate`"
    ("optimal-dispatch", "service_rates"): "per-server",  # "`n` exponential servers with rates `service_rates`"
    ("jsq-threshold", "arrival_rate"): "total",  # JSQ's two servers (the threshold systems bounding it)
    ("jsq-threshold", "service_rate"): "per-server",
}
#: models without servers, where "total or per server" has no meaning
NO_SERVERS = {"awp": "one congestion window (losses per round trip of the one flow)",
              "aoi": "one source, one erasure channel (probabilities per period)"}
BUILTIN = sorted(INDEX["models"])
PER_SERVER_ARRIVALS = sorted(m for (m, p), s in EXPECTED.items() if p == "arrival_rate" and s == "per-server")
TOTAL_ARRIVALS = sorted(m for (m, p), s in EXPECTED.items() if p == "arrival_rate" and s == "total")


def _params(model: str) -> dict:
    return {p.name: p for p in get_model(model).parameters}


def _is_rate(p: Param) -> bool:
    return "rate" in p.name or p.name == "speeds"


# ---------------------------------------------------------------------------------
# the declarations
# ---------------------------------------------------------------------------------
def test_every_rate_parameter_of_every_model_declares_a_scope():
    missing = [(m, p.name) for m in BUILTIN if m not in NO_SERVERS for p in get_model(m).parameters
               if _is_rate(p) and p.scope is None]
    assert missing == [], "declare scope='total' or 'per-server' on these (exactq.params.SCOPES)"
    unchecked = sorted(set(BUILTIN) - {m for m, _ in EXPECTED} - set(NO_SERVERS))
    assert unchecked == [], "add the scopes of these models' rate parameters, as MODELS.md defines them, to EXPECTED"


@pytest.mark.parametrize("model, name", sorted(EXPECTED))
def test_the_scope_is_the_one_of_models_md(model, name):
    assert _params(model)[name].scope == EXPECTED[(model, name)]


def test_the_declared_docs_agree_with_the_scope():
    for (model, name), scope in EXPECTED.items():
        doc = _params(model)[name].doc.lower()
        if scope == "per-server":
            assert "total" not in doc or "per server" in doc or "n*lambda" in doc or "n lambda" in doc, (model, name)
        else:
            assert "per server" not in doc or "not per server" in doc, (model, name)


def test_every_arrival_rate_takes_both_aliases():
    for m in BUILTIN:
        p = _params(m).get("arrival_rate")
        if p is None:
            continue
        assert [(a.name, a.scope) for a in p.aliases] == [("total_arrival_rate", "total"),
                                                          ("arrival_rate_per_server", "per-server")], m
        assert p.count is not None and p.count_doc, m


# ---------------------------------------------------------------------------------
# the listing
# ---------------------------------------------------------------------------------
def _listing(capsys, *argv) -> dict:
    assert main(["models", *argv]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    blocks = {}
    for block in out.strip().split("\n\n"):
        name = block.split(":", 1)[0]
        blocks[name] = block.splitlines()
    return blocks


def _line(lines: list, name: str) -> tuple[str, str]:
    """The listing's line of parameter ``name`` and the line after it."""
    i = next(k for k, line in enumerate(lines) if line.startswith(f"    {name} ("))
    return lines[i], (lines[i + 1] if i + 1 < len(lines) else "")


def test_the_listing_states_the_scope_of_every_rate_parameter(capsys):
    blocks = _listing(capsys)
    for (model, name), scope in EXPECTED.items():
        line, _ = _line(blocks[model], name)
        head = line.split("): ", 1)[0]  # the parenthesis after the name, not the free-form doc
        assert ("total over all servers" in head) == (scope == "total"), line
        assert ("; per server" in head) == (scope == "per-server"), line


def test_where_two_models_differ_the_listing_names_the_other_in_both(capsys):
    blocks = _listing(capsys)
    assert PER_SERVER_ARRIVALS == ["power-of-d", "speed-aware"]
    for model in PER_SERVER_ARRIVALS + TOTAL_ARRIVALS:
        line, after = _line(blocks[model], "arrival_rate")
        head = line.split("): ", 1)[0]
        others = TOTAL_ARRIVALS if model in PER_SERVER_ARRIVALS else PER_SERVER_ARRIVALS
        for other in others:
            assert other in head, (model, other, line)
        assert after.startswith("      also as total_arrival_rate (") and "arrival_rate_per_server (" in after


def test_one_model_listed_alone_still_names_the_models_that_differ(capsys):
    blocks = _listing(capsys, "power-of-d")
    assert list(blocks) == ["power-of-d"]
    line, after = _line(blocks["power-of-d"], "arrival_rate")
    assert "per server, the total is servers x arrival_rate" in line and "jsq" in line
    assert "arrival_rate = total_arrival_rate / servers" in after


def test_the_json_listing_has_the_scope_and_the_aliases(capsys):
    assert main(["models", "--json"]) == 0
    out, _ = capsys.readouterr()
    desc = {m["name"]: {p["name"]: p for p in m["parameters"]} for m in json.loads(out)}
    for (model, name), scope in EXPECTED.items():
        assert desc[model][name]["scope"] == scope
        assert desc[model][name]["scope_doc"]
    for model in BUILTIN:
        for p in desc[model].values():
            assert {"scope", "scope_doc", "aliases"} <= set(p)
    assert [a["name"] for a in desc["jsq"]["arrival_rate"]["aliases"]] == ["total_arrival_rate",
                                                                          "arrival_rate_per_server"]
    assert desc["speed-aware"]["arrival_rate"]["aliases"][0]["doc"] == \
        "arrival_rate = total_arrival_rate / sum(counts)"


# ---------------------------------------------------------------------------------
# the aliases give the values of the old name
# ---------------------------------------------------------------------------------
#: a valid model of each kind with an arrival rate: (other parameters, servers, total arrival rate)
BASE = {
    "jsq": ({"service_rates": "1,1"}, 2, 1.0),
    "jsq-threshold": ({"service_rate": 1, "threshold": 2, "system": "jockeying"}, 2, 1.0),
    "sed": ({"service_rates": "1,1", "phases": 2}, 2, 1.0),
    "mm1": ({}, 1, 0.5),
    "mmc": ({"servers": 2}, 2, 1.5),
    "mmck": ({"servers": 2, "capacity": 4}, 2, 3.0),
    "mph1": ({"scv": 0.5}, 1, 0.5),
    "power-of-d": ({"servers": 4, "d": 2}, 4, 2.0),
    "round-robin": ({"servers": 2}, 2, 1.0),
    "speed-aware": ({"speeds": "2,1", "counts": "1,1"}, 2, 1.2),
    "optimal-dispatch": ({"service_rates": "1,1", "capacity": 5}, 2, 1.0),
}


def test_every_model_with_an_arrival_rate_is_checked_here():
    assert sorted(m for m in BUILTIN if "arrival_rate" in _params(m)) == sorted(BASE), "add the model to BASE"


@pytest.mark.parametrize("model", sorted(BASE))
def test_each_alias_builds_the_model_of_the_old_name(model):
    other, n, total = BASE[model]
    per_server = total / n  # exact: n is 1, 2 or 4
    old = exactq.model(model, **other, arrival_rate=per_server if model in PER_SERVER_ARRIVALS else total)
    for alias, value in (("total_arrival_rate", total), ("arrival_rate_per_server", per_server)):
        new = exactq.model(model, **other, **{alias: value})
        assert new.params() == old.params() and new == old, (model, alias)
        assert "total_arrival_rate" not in new.params()


def test_a_total_split_over_servers_that_are_not_a_power_of_two_is_the_nearest_rate():
    m = exactq.model("power-of-d", servers=3, total_arrival_rate=2.7)
    assert m.arrival_rate == 2.7 / 3 and m.arrival_rate == pytest.approx(0.9, rel=1e-15)
    m = exactq.model("speed-aware", speeds="1,1", counts="1,2", total_arrival_rate="2.1")
    assert m.arrival_rate == pytest.approx(0.7, rel=1e-15)


def test_the_aliases_give_the_same_values_and_the_independent_anchors():
    # two servers sampled two at a time are JSQ: at total rate 1, E[T] = E[L] / 1 = 1.42632075 (MODELS.md)
    a = exactq.solve("power-of-d", servers=2, d=2, total_arrival_rate=1, method="ctmc")
    b = exactq.solve("power-of-d", servers=2, d=2, arrival_rate=0.5, method="ctmc")
    j = exactq.solve("jsq", "mean_response_time", arrival_rate_per_server=0.5, service_rates="1,1")
    assert a.value == b.value and a.value == pytest.approx(1.42632075, abs=1e-8)
    assert j.value == pytest.approx(1.42632075, abs=1e-8)
    # SA-JSQ over one speed-2 and one speed-1 server is JSQ with ties to the faster one, at the same total
    s = exactq.solve("speed-aware", speeds="2,1", counts="1,1", total_arrival_rate=1.2)
    t = exactq.solve("jsq", "mean_response_time", arrival_rate=1.2, service_rates="2,1", ties="fastest")
    assert s.value == pytest.approx(t.value, abs=1e-8)
    # Erlang C, c = 2, a = 1.5: P(wait) = 9/14 (closed form)
    c = exactq.solve("mmc", "p_wait", arrival_rate_per_server=0.75, servers=2)
    assert c.value == pytest.approx(9 / 14, rel=1e-12)
    # round robin over two unit-rate processors at total rate 1: E[T] is the golden ratio (MODELS.md)
    r = exactq.solve("round-robin", arrival_rate_per_server=0.5, servers=2, method="closed-form")
    assert r.value == pytest.approx((1 + math.sqrt(5)) / 2, rel=1e-9)


def test_a_sweep_over_an_alias_has_the_alias_as_its_column():
    rows = exactq.sweep("jsq", {"service_rates": "1,1"}, {"arrival_rate_per_server": "0.5|0.9"},
                        measure="mean_number", backend="serial", as_frame=False)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert [r["arrival_rate_per_server"] for r in rows] == [0.5, 0.9]
    # total rates 1 and 1.8: rho = 0.5 and 0.9 of MODELS.md
    assert [r["value"] for r in rows] == pytest.approx([1.42632075, 9.85484308], abs=1e-7)


# ---------------------------------------------------------------------------------
# one clear line for every misuse
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("model, params, message", [
    ("power-of-d", {"servers": 2, "arrival_rate": 0.5, "total_arrival_rate": 1},
     "give arrival_rate under one name only; got arrival_rate and total_arrival_rate"),
    ("jsq", {"service_rates": "1,1", "total_arrival_rate": 1, "arrival_rate_per_server": 0.5},
     "give arrival_rate under one name only; got total_arrival_rate and arrival_rate_per_server"),
    ("power-of-d", {"servers": "inf", "total_arrival_rate": 1},
     "total_arrival_rate needs a finite number of servers (servers = inf); give arrival_rate (per server) instead"),
    ("speed-aware", {"speeds": "1,2", "counts": "inf", "fractions": "0.5,0.5", "total_arrival_rate": 1},
     "total_arrival_rate needs a finite number of servers (sum(counts) = inf)"),
    ("speed-aware", {"speeds": "1,2", "total_arrival_rate": 1},
     "give counts (servers per class, or inf) or fractions"),
    ("jsq", {"service_rates": "1,1", "total_arrival_rate": "-1"}, "total_arrival_rate must be > 0; got '-1'"),
    ("mmc", {"servers": 2, "arrival_rate_per_server": "x"}, "arrival_rate_per_server must be a number; got 'x'"),
    ("jsq", {"service_rates": "1,1", "arrival_rate_per_server": 1e308},
     "arrival_rate_per_server=1e+308 gives arrival_rate = inf with len(service_rates) = 2: arrival_rate must be"),
    ("power-of-d", {"servers": 4, "total_arrival_rate": 5e-324},
     "total_arrival_rate=5e-324 gives arrival_rate = 0.0 with servers = 4: arrival_rate must be > 0"),
    ("jsq", {"service_rates": "1,1", "total_arival_rate": 1},
     "unknown parameter 'total_arival_rate' for model jsq; valid: arrival_rate, service_rates"),
])
def test_misuse_is_one_line(model, params, message):
    with pytest.raises(ModelError) as e:
        exactq.model(model, **params)
    msg = str(e.value)
    assert msg.startswith(message) and "\n" not in msg
    assert "nan" not in msg


def test_the_cli_says_one_line_and_exits_2(capsys):
    assert main(["solve", "power-of-d", "servers=inf", "total_arrival_rate=1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("exactq: error: total_arrival_rate needs a finite number of servers")
    assert err.count("\n") == 1


def test_a_sweep_refuses_both_names_before_solving():
    with pytest.raises(ModelError, match="give arrival_rate under one name only"):
        exactq.sweep("jsq", {"service_rates": "1,1", "arrival_rate": 1}, {"total_arrival_rate": "1|1.5"},
                     backend="serial", as_frame=False)


def test_missing_rate_names_the_aliases_too():
    with pytest.raises(ModelError, match=r"^missing required parameter arrival_rate for model jsq: .*"
                                         r"\(or give total_arrival_rate or arrival_rate_per_server\)$"):
        exactq.model("jsq", service_rates="1,1")


# ---------------------------------------------------------------------------------
# the Param machinery itself
# ---------------------------------------------------------------------------------
def test_declarations_are_checked():
    with pytest.raises(ValueError, match="unknown scope 'each'"):
        Param("r", "float", "", scope="each")
    with pytest.raises(ValueError, match="has aliases but no scope"):
        Param("r", "float", "", aliases=(Alias("total_r", "total"),))
    with pytest.raises(ValueError, match="needs the parameter's count"):
        Param("r", "float", "", scope="per-server", aliases=(Alias("total_r", "total"),))
    with pytest.raises(ValueError, match="unknown scope"):
        Alias("x", "global")
    with pytest.raises(ValueError, match="bad Count"):
        Count("servers", "sum")
    # an alias of the same scope needs no count
    Param("r", "float", "", scope="total", aliases=(Alias("total_r", "total"),))


def test_count_reads_the_number_of_servers():
    assert Count("servers")({"servers": 3}) == 3
    assert Count("service_rates", "len")({"service_rates": (1.0, 2.0, 3.0)}) == 3
    assert Count(how="one")({}) == 1 and Count(how="one").doc == "1"
    assert Count("servers")({}) is None


def test_param_table_adds_the_aliases_with_their_kind_and_rule():
    table = param_table(get_model("power-of-d").parameters)
    assert table["total_arrival_rate"].kind == "float" and table["total_arrival_rate"].rule == "> 0"
    assert table["total_arrival_rate"].scope == "total" and table["arrival_rate"].scope == "per-server"


def test_an_alias_keeps_the_declared_order_of_the_values():
    p = Param("rate", "float", "", low=0.0, low_open=True, scope="total", count=Count("n"),
              aliases=(Alias("rate_per_server", "per-server"),))
    n = Param("n", "int", "", low=1)
    out = parse_params("m", (p, n), {"rate_per_server": "0.25", "n": "4"})
    assert list(out) == ["rate", "n"] and out == {"rate": 1.0, "n": 4}


def test_an_alias_may_not_repeat_a_name():
    p = Param("rate", "float", "", scope="total", aliases=(Alias("n", "total"),))
    n = Param("n", "int", "", low=1)
    with pytest.raises(ValueError, match="an alias repeats a parameter's name"):
        parse_params("m", (p, n), {"rate": 1, "n": 2})


def test_a_plugin_alias_may_not_shadow_an_option_of_exactq():
    from exactq.errors import PluginError
    from exactq.plugins import check_parameter_names

    class Fake:
        name = "fake"
        parameters = (Param("rate", "float", "", scope="total", aliases=(Alias("tol", "total"),)),)

    with pytest.raises(PluginError, match="parameter 'tol' clashes with"):
        check_parameter_names(Fake)


@pytest.mark.parametrize("model, measure, params, anchor", [
    # MODELS.md, finite capacity: "capacity K each, rate mu, arrivals lambda"; K = 5, rho = lambda/mu = 2
    ("jsq", "blocking_probability", {"total_arrival_rate": 2, "service_rates": "1,1", "capacity": 5,
                                     "method": "ctmc"}, 0.0996884735),
    # SED: "arrivals 2 rho"; r = 2, rho = 0.5
    ("sed", "mean_waiting_time", {"total_arrival_rate": 1, "service_rates": "1,1", "phases": 2}, 0.29938794),
    # power-of-d mean field: "arrivals n lambda", lambda = 0.9, d = 2
    ("power-of-d", "mean_response_time", {"arrival_rate_per_server": 0.9, "servers": "inf", "method": "meanfield"},
     2.614057),
    # speed-aware fluid limit: "arrivals N lambda", lambda = 1.2, gamma = (.5, .5), mu = (2, 1)
    ("speed-aware", "mean_response_time", {"arrival_rate_per_server": 1.2, "speeds": "2,1", "fractions": "0.5,0.5",
                                           "counts": "inf", "method": "fluid"}, 0.58333333),
    # round-robin: "one Poisson stream of total rate Lambda"; n = 2, mu = 1, Lambda = 1
    ("round-robin", "mean_response_time", {"total_arrival_rate": 1, "servers": 2, "method": "closed-form"},
     1.61803399),
])
def test_the_names_with_their_scope_reproduce_the_anchors_of_models_md(model, measure, params, anchor):
    """Given under the alias whose name says MODELS.md's scope, each model lands on MODELS.md's anchor."""
    params = dict(params)
    method = params.pop("method", "auto")
    r = exactq.solve(model, measure, method=method, **params)
    assert r.value == pytest.approx(anchor, abs=1e-6)
