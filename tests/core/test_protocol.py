"""The declared model protocol (exactq.protocol): members checked at registration, hooks bound by declaration."""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass

import numpy as np
import pytest

import exactq
from exactq import catalogue, methods
from exactq.catalogue import Model, register_method
from exactq.ctmc import CTMC
from exactq.errors import ModelError, PluginError
from exactq.params import Param
from exactq.protocol import MODEL_MEMBERS, PROTOCOLS, Member, Protocol, check_model, members_of


def _two_state():
    return CTMC.from_generator([[-2.0, 2.0], [1.0, -1.0]])


def _fresh(name: str, **body):
    """A plug-in model class (frozen dataclass) with the given members."""
    ns = {"name": name, "summary": "a test model", "parameters": (Param("x", "float", "a rate", default=1.0),),
          "measures": {"p": "probability of state 1"}, "default_measure": "p", "methods": ("ctmc",),
          "__annotations__": {"x": float}, "x": 1.0, "__module__": "a_users_plugin"}
    ns.update(body)
    return dataclass(frozen=True)(type(name.replace("-", "_"), (Model,), ns))


def _measure(self, measure, chain, sol):
    return sol.probability(chain.states[:, 0] == 1)


def test_a_complete_model_registers_and_solves():
    cls = _fresh("proto-complete", ctmc=lambda self, truncation=None: _two_state(), ctmc_measure=_measure)
    exactq.register_model(cls)
    assert exactq.solve("proto-complete").value == pytest.approx(2 / 3, rel=1e-12)


@pytest.mark.parametrize("body, missing", [
    ({"ctmc": lambda self, truncation=None: _two_state()}, "ctmc_measure(measure, chain, solution)"),
    ({"ctmc": lambda self, truncation=None: _two_state(), "ctmc_measure": _measure,
      "is_infinite": property(lambda self: True)}, "truncation_start(tol: float) -> int"),
    ({"ctmc": lambda self, truncation=None: _two_state(), "ctmc_measure": _measure,
      "lumped_ctmc": lambda self, truncation=None: _two_state()}, "lumped_measure(measure, chain, solution)"),
])
def test_a_model_missing_a_member_fails_at_registration_in_one_line(body, missing):
    cls = _fresh("proto-missing", **body)
    with pytest.raises(PluginError) as err:
        exactq.register_model(cls)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("plug-in proto-missing: method 'ctmc' through ctmc() needs ")
    assert missing in msg
    assert "proto-missing" not in catalogue._MODELS


def test_a_model_without_any_representation_of_its_method_is_refused():
    cls = _fresh("proto-none", methods=("qbd",))
    with pytest.raises(PluginError, match=re.escape("method 'qbd' needs one of its representations: qbd(width: int "
                                                    "| None = None) -> QBD or qbd_study(measure, context)")):
        exactq.register_model(cls)


def test_a_built_in_model_missing_a_member_is_a_model_error():
    cls = _fresh("proto-builtin", ctmc=lambda self, truncation=None: _two_state())
    import exactq.models.basic  # noqa: F401 -- the module the class pretends to be defined in

    cls.__module__ = "exactq.models.basic"  # as if it were defined in exactq's own files
    with pytest.raises(ModelError, match=r"^model 'proto-builtin': method 'ctmc' through ctmc\(\) needs the member "
                                         r"ctmc_measure"):
        catalogue.register_model(cls)


def test_every_built_in_model_meets_the_protocols_of_its_methods():
    catalogue.load_all()
    for name in catalogue.model_names():
        cls = catalogue.get_model(name)
        for method in cls.methods:
            protocols = [catalogue.get_method(method)[k].protocol for k in range(len(catalogue.get_method(method)))]
            assert check_model(cls, method, protocols) is None, (name, method)


def test_the_drivers_look_up_no_hook_by_a_string():
    src = inspect.getsource(methods)
    assert not re.search(r"getattr\(model", src)
    assert "spec.setting(\"start\"" not in src and "spec.setting(\"size\"" not in src


def test_hooks_are_bound_from_the_declaration():
    m = exactq.model("mmck", arrival_rate=1, servers=1, capacity=3, service_rate=2)
    hooks = PROTOCOLS["ctmc"].bind(m)
    assert hooks.infinite is False and hooks.size(None) == 4 and hooks.functional is not None
    assert hooks.build(None).n_states == 4
    infinite = exactq.model("mm1", arrival_rate=0.5, service_rate=1.0)
    hooks = PROTOCOLS["ctmc"].bind(infinite)
    assert hooks.infinite is True and hooks.start(1e-9) >= 1 and hooks.variant is None
    jsq = exactq.model("jsq", arrival_rate=1.0, service_rates="1,1")
    lumped = PROTOCOLS["ctmc"].bind(jsq).variant
    assert lumped is not None and lumped.applies("mean_number")


def test_model_wide_members_have_defaults():
    cls = _fresh("proto-defaults", ctmc=lambda self, truncation=None: _two_state(), ctmc_measure=_measure)
    m = cls()
    assert (m.is_infinite, m.intrinsic_measure("p"), m.delegate("ctmc"), m.auto_method()) == (False, None, None,
                                                                                             "ctmc")
    assert {mm.name for mm in MODEL_MEMBERS} == {"is_infinite", "intrinsic_measure", "delegate", "auto_method"}


def test_a_setting_may_not_name_a_model_member():
    with pytest.raises(ValueError, match="names a model member"):
        register_method("proto-bad-method", requires="ctmc", driver="adaptive", doc="x", start="my_start")
    with pytest.raises(ValueError, match="driver 'single' does not run the protocol 'ctmc'"):
        register_method("proto-bad-driver", requires="ctmc", driver="single", doc="x")
    with pytest.raises(ValueError, match="no protocol is declared for the representation 'nothing'"):
        register_method("proto-bad-rep", requires="nothing", driver="single", doc="x")
    assert "proto-bad-method" not in catalogue._METHODS


def test_a_plugin_declares_its_own_protocol():
    proto = Protocol("halving", "single", "a number to halve", (
        Member("build", "halving", "() -> float", "the number"),
        Member("measure", "halving_measure", "(measure, number, solution) -> float", "the measure"),
    ))
    register_method("proto-halve", requires=proto, driver="single", doc="halves a number")
    assert PROTOCOLS["halving"] is proto and [m.name for m in members_of(proto)] == ["halving", "halving_measure"]

    class Number(float):
        pass

    @catalogue.register_solver(Number, name="proto-halver", doc="halves")
    def _halve(x, **options):
        return float(x) / 2

    cls = _fresh("proto-halving", methods=("proto-halve",), halving=lambda self: Number(self.x * 3),
                 halving_measure=lambda self, measure, rep, sol: sol)
    exactq.register_model(cls)
    assert exactq.solve("proto-halving", x=2.0).value == pytest.approx(3.0)
    assert math.isfinite(np.float64(exactq.solve("proto-halving").value))


# ------------------------------------------------------------------------- the contract page
def test_the_architecture_page_holds_the_contract_table_of_the_registry():
    from pathlib import Path

    from exactq.protocol import CONTRACT_BEGIN, CONTRACT_END, contract_table

    page = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    assert CONTRACT_BEGIN in page and CONTRACT_END in page
    on_page = page.split(CONTRACT_BEGIN, 1)[1].split(CONTRACT_END, 1)[0].strip("\n")
    table = contract_table().strip("\n")
    assert on_page == table, "docs/architecture.md's contract table is stale: run the module exactq.protocol " \
                             "as a script with the page's path"
    # every built-in method is in it, with its members and solvers; a plug-in's is not
    for method in ("ctmc", "qbd", "compensation", "exact", "closed-form", "meanfield", "bounds"):
        assert f"| `{method}` |" in table
    assert "`ctmc`, `ctmc_measure`; if infinite: `truncation_start`" in table
    assert "proto-" not in table and "jacobi" not in table


def test_the_how_to_is_a_page_the_docs_test_runs():
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    page = (docs / "howto" / "add_model_and_solver.md").read_text()
    assert "register_solver(CTMC" in page and "exactq.register_model(VacationQueue)" in page
    assert "howto/add_model_and_solver" in (docs / "index.md").read_text()


# ------------------------------------------------------------------------- the solver registry
def test_a_solver_named_to_sort_first_changes_nothing_unless_asked_for_or_prioritised():
    from exactq.catalogue import _SOLVERS, register_solver, solvers_of

    chain = exactq.model("mmck", arrival_rate=1, servers=1, capacity=3, service_rate=2).ctmc(None)
    reference = catalogue.solve_representation(chain)
    calls = []

    def jacobi(chain, **options):
        import dataclasses

        calls.append(options)
        return dataclasses.replace(catalogue.solve_representation(chain, using="gth"), method="aaa-jacobi")

    jacobi.__module__ = "exactq.solvers.aaa_jacobi"  # as if saved as solvers/aaa_jacobi.py
    try:
        register_solver(CTMC, name="aaa-jacobi", doc="a trivial solver", family="stationary")(jacobi)
        ranked = solvers_of(CTMC)  # default priority 0: after every built-in solver, whatever its name
        assert all(s.priority > 0 for s in ranked[:[s.name for s in ranked].index("aaa-jacobi")]
                   if catalogue._is_builtin(s.fn))
        assert [s.name for s in ranked].index("aaa-jacobi") > [s.name for s in ranked].index("transient")
        r = exactq.solve("mmck", method="ctmc", arrival_rate=1, servers=1, capacity=3, service_rate=2)
        assert "aaa" not in r.method and calls == []
        assert catalogue.solve_representation(chain).method == reference.method
        # asked for by name, with the option of the ctmc method, or as a method
        r = exactq.solve("mmck", method="ctmc", options={"solver": "aaa-jacobi"}, arrival_rate=1, servers=1,
                         capacity=3, service_rate=2)
        assert len(calls) == 1 and r.method == "ctmc/aaa-jacobi"
        assert exactq.solve("mmck", method="aaa-jacobi", arrival_rate=1, servers=1, capacity=3,
                            service_rate=2).method == "ctmc/aaa-jacobi"
        assert "aaa-jacobi" in exactq.api.stationary_solvers()
        # prioritised: chosen
        _SOLVERS[CTMC] = [s for s in _SOLVERS[CTMC] if s.name != "aaa-jacobi"]
        register_solver(CTMC, name="aaa-jacobi", doc="a trivial solver", family="stationary", priority=1000)(jacobi)
        assert solvers_of(CTMC)[0].name == "aaa-jacobi"
        catalogue.solve_representation(chain)
        assert len(calls) == 3
    finally:
        _SOLVERS[CTMC] = [s for s in _SOLVERS[CTMC] if s.name != "aaa-jacobi"]


def test_the_solver_option_chooses_from_the_registry_and_refuses_other_names():
    kw = dict(arrival_rate=1.0, service_rates="1,1")
    values = {}
    for name in exactq.api.stationary_solvers():
        if name in ("level-aggregation", "level-reduction"):
            continue  # (they need a structure this chain does not declare, or a larger chain)
        r = exactq.solve("jsq", method="ctmc", options={"solver": name}, tol=1e-8, **kw)
        values[name] = r.value
        assert r.method == f"ctmc/{name}", (name, r.method)
    assert max(values.values()) - min(values.values()) < 1e-9 and len(values) >= 6
    with pytest.raises(ModelError, match="stationary solver must be one of auto, stationary, bicgstab, direct"):
        exactq.solve("jsq", method="ctmc", options={"solver": "transient"}, **kw)


def test_the_stationary_modules_import_each_other_in_no_circle():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "solvers"
    names = ("stationary", "level_reduction", "level_aggregation", "linear")
    graph = {}
    for name in names:
        tree = ast.parse((root / f"{name}.py").read_text())
        graph[name] = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1
                       and n.module in names}
    assert graph["level_reduction"] <= {"linear"} and graph["level_aggregation"] <= {"linear"}
    assert graph["linear"] == set() and "stationary" not in graph["level_reduction"] | graph["level_aggregation"]


def test_no_solver_module_declares_a_method():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "solvers"
    assert [p.name for p in root.glob("*.py") if "register_method(" in p.read_text()] == []
    assert {spec.module for name in catalogue.method_names() for spec in catalogue.get_method(name)
            if spec.module.startswith("exactq.")} == {"exactq.method_table"}


def test_the_api_list_of_stationary_solvers_is_the_registrys():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = exactq.api.STATIONARY_SOLVERS
    assert list(old) == exactq.api.stationary_solvers() and issubclass(caught[0].category, DeprecationWarning)
    assert {"direct", "bicgstab", "gmres", "power", "gth", "mpmath", "level-reduction",
            "level-aggregation"} <= set(old)
