"""The linear-system solvers of the reachability checks live in the solver registry (issue 22 item 2):
the built-ins are registered with priorities, a plug-in solver is chosen only by name, its answer is
certified like the built-ins', and an unknown name is refused in one line."""

import numpy as np
import pytest
import scipy.sparse as sp

import exactq
from exactq.api import check_properties
from exactq.catalogue import _SOLVERS, register_solver, solve_representation, solvers_of
from exactq.errors import ExactqError
from exactq.solvers.linear import LinearSystem, linear_solvers, solve_linear

CHAIN = """ctmc
module m
 a : [0..20] init 0;
 [] a<20 -> 1 : (a'=a+1);
 [] a>0 -> 2 : (a'=a-1);
endmodule
label "z" = a=12;
rewards "r" true : a; endrewards
"""


def _dense(system: LinearSystem, **options):
    """A throwaway plug-in: a dense LAPACK solve."""
    return np.linalg.solve(sp.csr_matrix(system.A).toarray(), system.b), {"lapack": "gesv"}


@pytest.fixture
def dense():
    register_solver(LinearSystem, name="dense-test", doc="dense LAPACK (a test plug-in)", family="linear")(_dense)
    try:
        yield "dense-test"
    finally:
        _SOLVERS[LinearSystem] = [s for s in _SOLVERS[LinearSystem] if s.name != "dense-test"]


def test_the_built_in_linear_solvers_are_registered_by_priority():
    names = [s.name for s in solvers_of(LinearSystem)]
    assert names[0] == "linear" and set(names[1:3]) == {"direct", "bicgstab"}  # the cost model first
    assert linear_solvers()[:3] == ["auto", "direct", "bicgstab"]


def test_registered_solvers_agree_with_a_dense_solve():
    rng = np.random.default_rng(3)
    n = 40
    P = rng.random((n, n)) * (rng.random((n, n)) < 0.2)
    P = 0.9 * P / np.maximum(P.sum(axis=1, keepdims=True), 1e-300)  # substochastic: I - P is an M-matrix
    A = sp.csr_matrix(np.eye(n) - P)
    b = rng.random(n)
    exact = np.linalg.solve(A.toarray(), b)
    for name in ("linear", "direct", "bicgstab"):
        x, info = solve_representation(LinearSystem(A, b), using=name)
        err = np.abs(x - exact).max()
        assert err <= 1e-10 * np.abs(exact).max()
        assert err <= info["error_bound"] + 1e-15  # the stated bound holds


def test_a_plug_in_solver_is_chosen_only_by_name_and_certified(dense):
    model = exactq.load_prism("birth_death.sm", text=CHAIN)
    default, = check_properties(model, 'R=? [ F "z" ]')
    assert default.info["solver"]["name"] in ("direct", "bicgstab")  # the plug-in (priority 0) is never the default
    asked, = check_properties(model, 'R=? [ F "z" ]', solver=dense)
    assert asked.info["solver"]["name"] == dense and asked.info["solver"]["lapack"] == "gesv"
    assert abs(asked.value - default.value) <= 1e-9 * abs(default.value)
    assert abs(asked.value - default.value) <= asked.info["error_bound"] + 1e-12 * abs(default.value)


def test_a_plug_ins_non_finite_answer_is_an_error_not_a_value():
    register_solver(LinearSystem, name="nan-test", doc="returns NaN", family="linear")(
        lambda system, **o: np.full(system.b.shape, np.nan))
    try:
        A = sp.csr_matrix([[1.0, -0.5], [-0.5, 1.0]])
        with pytest.raises(ExactqError, match="no finite solution"):
            solve_linear(A, np.ones(2), solver="nan-test")
    finally:
        _SOLVERS[LinearSystem] = [s for s in _SOLVERS[LinearSystem] if s.name != "nan-test"]


def test_an_unknown_solver_is_refused_in_one_line():
    model = exactq.load_prism("birth_death.sm", text=CHAIN)
    with pytest.raises(ExactqError) as exc:
        check_properties(model, 'P=? [ F<=2 "z" ]', solver="no-such-solver")
    msg = str(exc.value)
    assert "\n" not in msg and "no-such-solver" in msg and "bicgstab" in msg and "gmres" in msg
    with pytest.raises(ExactqError, match="linear solver must be one of"):
        solve_linear(sp.identity(2, format="csr"), np.ones(2), solver="no-such-solver")
