"""One query language: the same query string gives the same answer on a native model and on a PRISM file.

The native models (the built-in ``mmck`` and a plug-in with labels and rewards) and
the PRISM file describe the same M/M/2/4 queue; every operator, function, filter and
threshold of the README's list, and the extensions, is asked of both. The steady-state
values are also checked against the closed form pi_n ~ (lambda/mu)^n / min(n, c)! ...,
an independent method.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import exactq
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError
from exactq.statespace import StateSpace

LAM, MU, C, K = 1.5, 1.0, 2, 4

PRISM = f"""ctmc
const int c = {C};
const int K = {K};
const double lam = {LAM};
const double mu = {MU};
module q
  n : [0..K] init 0;
  [] n < K -> lam : (n'=n+1);
  [] n > 0 -> mu * min(n, c) : (n'=n-1);
endmodule
label "full" = n = K;
label "idle" = n = 0;
rewards "jobs" true : n; endrewards
"""


def lang_queue(lam: float = LAM, mu: float = MU, c: int = C, K: int = K):
    """The M/M/c/K queue as a plug-in's chain, with the PRISM file's labels and reward."""
    space = StateSpace.box(["n"], hi=[K])
    events = [Event("arrive", lambda s: (lam * (s[:, 0] < K), s + 1)),
              Event("leave", lambda s: (mu * np.minimum(s[:, 0], c), s - 1))]
    n = space.states[:, 0]
    return build_ctmc(space, events, initial=0, constants={"c": c, "K": K},
                      labels={"full": n == K, "idle": n == 0}, rewards={"jobs": n.astype(float)})


@pytest.fixture(scope="module")
def models():
    name = "lang-queue"
    from exactq.catalogue import _MODELS

    if name not in _MODELS:
        exactq.register_model(lang_queue, measures={"jobs": "jobs"})
    prism = exactq.load_prism("queue.sm", text=PRISM)
    builtin = exactq.model("mmck", arrival_rate=LAM, servers=C, capacity=K, service_rate=MU)
    return {"plugin": exactq.model(name), "builtin": builtin, "prism": prism}


def pi():
    n = np.arange(K + 1)
    w = np.array([(LAM / MU) ** k / (math.factorial(min(k, C)) * C ** max(k - C, 0)) for k in n])
    return w / w.sum()


def same(a, b):
    if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
        return a == b and type(a) is type(b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if math.isinf(a) or math.isinf(b):
        return a == b
    return a == pytest.approx(b, rel=1e-10, abs=1e-13)


#: query strings of both dialects (no label or reward: the built-in mmck has neither)
PLAIN = [
    # steady state, with PRISM's operators and the extensions
    "S=? [ n = K ]", "S=? [ 0 < n <= 2 ]", "S=? [ n >= c & n < K ]", "S=? [ n = 1 | n = 3 ]", "S=? [ !(n = 0) ]",
    "S=? [ n = 0 => n < 1 ]", "S=? [ (n = 0) <=> (n < 1) ]", "S=? [ n == K ]", "S=? [ n != 0 && n < 3 ]",
    "S=? [ n = 0 || n = K ]", "S=? [ n > 0 ? n < 3 : false ]", "S=? [ 1 < n < 4 ]",
    "E=? [ n ]", "E=? [ n^2 ]", "E=? [ n**2 ]", "E=? [ 2^n^1 ]", "E=? [ -n^2 ]", "E=? [ n % 3 ]", "E=? [ min(n, c) ]",
    "E=? [ max(n - c, 0) ]", "E=? [ abs(n - 2) ]", "E=? [ sqrt(n) ]", "E=? [ exp(-n) ]", "E=? [ log(n + 1) ]",
    "E=? [ log(n + 1, 2) ]", "E=? [ pow(n, 2) ]", "E=? [ mod(n, 3) ]", "E=? [ floor(n / 2) ]", "E=? [ ceil(n / 2) ]",
    "E=? [ round(n / 3) ]", "E=? [ n = 0 ? 1 : 2 ]", "E=? [ (n > 0) + (n > 1) ]", "E=? [ n / K ]", "E=? [ +n - -1 ]",
    "E=? [ n > 0 ]", "LRA=? [ n = K ]", "LRA=? [ n ]",
    # paths, with every bound
    "P=? [ F<=1 n = K ]", "P=? [ F<1 n = K ]", "P=? [ F>=1 n = K ]", "P=? [ F>1 n = K ]", "P=? [ F[0.5,1.5] n = K ]",
    "P=? [ F n = K ]", "P=? [ n < 3 U<=2 n = K ]", "P=? [ n < 3 U n = K ]", "P=? [ n < 3 U[0.5,2] n = K ]",
    "P=? [ G<=1 n < 3 ]", "P=? [ G[0.5,1] n < 3 ]", "P=? [ G>=0.5 n < 4 ]", "P=? [ X n = 1 ]",
    "P=? [ n < 2 W<=1 n = 3 ]", "P=? [ n < 2 W n = 3 ]", "P=? [ n > 0 R<=1 n < 3 ]", "T=? [ F n = K ]",
    "T=? [ F n >= 2 ]",
    # thresholds (true/false), probability 0 and 1 on the graph
    "P>=0.5 [ F<=2 n = K ]", "P<0.1 [ F<=0.1 n = K ]", "S<0.1 [ n = K ]", "S>=0.05 [ n = K ]", "P>=1 [ F n = K ]",
    "P>0 [ F<=0.001 n = K ]", "P<=0 [ G n < K ]",
    # nesting and arithmetic over queries
    "1 - P=? [ F<=1 n = K ]", "P=? [ F<=1 n = K ] + S=? [ n = 0 ]", "P=? [ F P>0.5 [ F<=1 n = K ] ]",
    "S=? [ P>=0.2 [ X n = 2 ] ]", "2 * E=? [ n ] / (1 + T=? [ F n = K ])",
    # every filter
    "filter(min, P=? [ F<=1 n = K ])", "filter(max, P=? [ F<=1 n = K ], n < 3)", "filter(count, n > 1)",
    "filter(sum, n)", "filter(+, n)", "filter(avg, P=? [ F<=1 n = K ])", "filter(first, P=? [ F<=1 n = K ], n = 1)",
    "filter(range, P=? [ F<=1 n = K ])", "filter(forall, n >= 0)", "filter(&, n >= 0)", "filter(exists, n = K)",
    "filter(|, n = K)", "filter(state, P=? [ F<=1 n = K ], n = 2)", "filter(argmin, T=? [ F n = K ])",
    "filter(argmax, P=? [ F<=1 n = K ])", "filter(print, P=? [ F<=1 n = K ], n > 2)",
    "filter(printall, n = K)", "P=? [ F<=1 n = K {n = 2} ]", "P=? [ F<=1 n = K {n < 3}{max} ]",
]

#: with the PRISM file's labels and reward (the plug-in has them; mmck does not)
LABELLED = [
    'S=? [ "full" ]', "S=? [ full ]", 'P=? [ F<=1 "full" ]', 'P=? [ !"full" U<=1 "idle" ]', 'S=? [ "init" ]',
    'filter(max, P=? [ F<=1 "full" ], "init")', 'R{"jobs"}=? [ S ]', 'R{"jobs"}=? [ C<=2 ]', 'R{"jobs"}=? [ I=1 ]',
    'R{"jobs"}=? [ F "full" ]', 'R=? [ S ]', 'R{1}=? [ S ]', 'R{"jobs"}<=2 [ S ]', 'R{"jobs"}>1 [ C<=1 ]',
    'R{"jobs"}=? [ LRA ]', 'R{"jobs"}=? [ C ]', 'R{"jobs"}=? [ S ] - E=? [ n ]',
]


def answer(model, query):
    r = exactq.check(model, query)
    extra = {k: r.info[k] for k in ("states", "printed") if k in r.info}
    return r.value, extra


@pytest.mark.parametrize("query", PLAIN)
def test_the_same_query_gives_the_same_answer_on_a_native_model_and_a_prism_file(models, query):
    prism, prism_extra = answer(models["prism"], query)
    for kind in ("builtin", "plugin"):
        native, native_extra = answer(models[kind], query)
        assert same(native, prism), (kind, query, native, prism)
        assert native_extra == prism_extra, (kind, query)


@pytest.mark.parametrize("query", LABELLED)
def test_labels_and_rewards_mean_the_same_on_both(models, query):
    prism, prism_extra = answer(models["prism"], query)
    native, native_extra = answer(models["plugin"], query)
    assert same(native, prism), (query, native, prism)
    assert native_extra == prism_extra


@pytest.mark.parametrize("native, prism", [
    ("S=? [ n // 2 = 1 ]", "S=? [ floor(n / 2) = 1 ]"),
    ("S=? [ not n = 0 and n < 3 or n = K ]", "S=? [ !(n = 0) & n < 3 | n = K ]"),
    ("S=? [ n = 1 = true ]", "S=? [ n = 1 ]"),  # native: one comparison level, a chain
    ("E=? [ jobs ]", 'R{"jobs"}=? [ S ]'),  # a native chain's reward by its name
    ("E=? [ 3 * (n // 3) + n % 3 ]", "E=? [ n ]"),
])
def test_the_native_words_and_their_prism_spelling(models, native, prism):
    assert same(answer(models["plugin"], native)[0], answer(models["prism"], prism)[0])


def test_prism_files_keep_their_own_meaning(models):
    prism = models["prism"]
    # '//' starts a comment in PRISM (in a native query it is floor division)
    assert same(answer(prism, "S=? [ n = K ] // the blocking probability")[0], pi()[K])
    # PRISM's equality of two conditions: (n = 1) = (n < 2) fails only at n = 0
    assert same(answer(prism, "S=? [ n = 1 = (n < 2) ]")[0], 1 - pi()[0])
    with pytest.raises(exactq.QuerySyntaxError):  # 'and' is no operator in PRISM
        exactq.check(prism, "S=? [ n = 0 and n < 3 ]")


def test_values_agree_with_the_closed_form(models):
    p = pi()
    n = np.arange(K + 1)
    for kind in ("builtin", "plugin", "prism"):
        m = models[kind]
        assert answer(m, "S=? [ n = K ]")[0] == pytest.approx(p[K], rel=1e-12)
        assert answer(m, "E=? [ n^2 ]")[0] == pytest.approx(float(p @ n**2), rel=1e-12)
        assert answer(m, "S=? [ 0 < n <= 2 ]")[0] == pytest.approx(p[1] + p[2], rel=1e-12)
        assert answer(m, "E=? [ sqrt(n) + exp(-n) ]")[0] == pytest.approx(float(p @ (np.sqrt(n) + np.exp(-n))),
                                                                      rel=1e-12)
        assert answer(m, "S<0.1 [ n = K ]")[0] is bool(p[K] < 0.1)


def test_faults_are_errors_where_the_term_is_used_on_both(models):
    for kind in ("plugin", "prism"):
        m = models[kind]
        with pytest.raises(ModelError, match=r"division by zero in expression .*divisor 'n' is 0 in state 0"):
            exactq.check(m, "E=? [ 1 / n ]")
        assert same(answer(m, "E=? [ n > 0 ? 1 / n : 0 ]")[0], float(pi()[1:] @ (1 / np.arange(1, K + 1))))
        assert same(answer(m, "S=? [ n != 0 & 2 / n < 1 ]")[0], float(pi()[3:].sum()))
        with pytest.raises(ModelError, match="not finite"):
            exactq.check(m, "E=? [ log(n) ]")
        with pytest.raises(ModelError, match="must be a condition"):
            exactq.check(m, "S=? [ n + 1 ]")
        assert same(answer(m, "S=? [ n < 2 & (n = 1 ? 1 : 0) ]")[0], float(pi()[1]))  # an integer 0/1 as a condition


def test_a_truncated_native_model_reads_each_levels_constants():
    # K is the truncation level of the infinite M/M/1: 'n = K' is the boundary at every level
    r = exactq.check("mm1", "S=? [ n < K ]", arrival_rate=0.5, service_rate=1.0)
    assert r.value == pytest.approx(1.0, abs=1e-8)
    r = exactq.check("mm1", "S=? [ 0 < n <= 3 & n % 2 = 1 ]", arrival_rate=0.5, service_rate=1.0)
    assert r.value == pytest.approx(0.5 * (0.5 + 0.5**3), rel=1e-8)
