"""The built-in methods, declared in one table.

A method is what a user names (``--method qbd``): a driver of :mod:`exactq.methods`
over the :class:`~exactq.protocol.Protocol` of a representation, with the options it
accepts and the driver's settings. Every built-in method is declared here, once, with
each of its implementations (``ctmc`` is a truncated chain solved to its stationary
law, or, for a model that orchestrates its own chains, ``ctmc_study``); no solver module
declares a method, and none on a model's behalf. Solvers register themselves, per
representation type, in their own modules (:func:`exactq.catalogue.register_solver`).

The catalogue imports this module when a method is looked up (through its index, or
when every module is loaded); a plug-in declares its own methods with
:func:`exactq.catalogue.register_method`. ``docs/architecture.md`` shows the table
with the members each method needs and the solvers that accept its representation
(:func:`exactq.protocol.contract_table`).

The settings are the drivers' (:mod:`exactq.methods`): ``label``, ``solver`` (the
registered solver the method always uses), ``solver_controls``, ``verify`` (the
options of the verifying re-solve), ``lumpable``, ``growth``, ``max_states``, ``unit``,
``previous``, ``set_options``, ``max_parameter``, ``context``.

Examples
--------
>>> import exactq.catalogue as catalogue
>>> [(s.requires, s.driver) for s in catalogue.get_method("ctmc")]
[('ctmc', 'adaptive'), ('ctmc_study', 'model')]
>>> catalogue.get_method("qbd")[0].setting("max_states") == QBD_MAX_PHASES
True
"""

from __future__ import annotations

from .catalogue import register_method

__all__ = ["METHODS", "QBD_MAX_PHASES", "BOUNDS_MAX_THRESHOLD", "EXACT_MAX_STATES"]

#: the largest number of phases per level of the dense QBD solvers (the qbd method grows a phase truncation to it)
QBD_MAX_PHASES = 2000
#: the largest comparison threshold the bounds method grows to (T + 1 dense phases per QBD)
BOUNDS_MAX_THRESHOLD = 400
#: the largest lumped chain the exact method grows a kept set to
EXACT_MAX_STATES = 12_000_000

#: (name, protocol, driver, doc, options, settings), in the order the implementations of a name are tried
METHODS = (
    ("ctmc", "ctmc", "adaptive",
     "stationary solve of the (truncated) CTMC; truncation grown until the measure converges",
     ("solver", "tol", "truncation", "verify", "strict"),
     {"lumpable": True, "verify": (("solver", "mpmath"),)}),
    ("ctmc", "ctmc_study", "model",
     "the (truncated) CTMC, stationary or transient by measure, orchestrated by the model; truncation grown "
     "until the measure converges",
     ("solver", "tol", "truncation", "strict"),
     {"label": "ctmc"}),
    ("dtmc", "dtmc", "adaptive",
     "stationary solve of the model's (truncated) DTMC, as P - I, with the stationary solvers; truncation grown "
     "until the measure converges",
     ("solver", "tol", "truncation", "verify", "strict"),
     {"verify": (("solver", "mpmath"),)}),
    ("qbd", "qbd", "adaptive",
     "matrix-geometric solution: exact in the unbounded level (the phase truncated adaptively, where the model "
     "has one)",
     ("tol", "truncation", "strict", "algorithm", "dps"),
     {"growth": 1.5, "max_states": QBD_MAX_PHASES, "unit": "phases per level", "label": "qbd",
      "solver_controls": ("strict",)}),
    ("qbd", "qbd_study", "model",
     "matrix-geometric solution(s) of the QBDs a model describes itself by, orchestrated by the model (one QBD "
     "per value, or one per candidate of an optimum)",
     ("tol", "strict", "algorithm", "dps"),
     {"label": "qbd"}),
    ("exact", "level_chain", "adaptive",
     "exact finite system: lumped CTMC on a fitted truncation, grown until converged, solved by level "
     "aggregation (n = inf: the mean-field limit)",
     ("tol", "truncation", "strict", "cost_bound"),
     {"previous": True, "set_options": ("cost_bound",), "max_states": EXACT_MAX_STATES, "label": "exact/{solver}"}),
    ("bounds", "threshold_bracket", "bracket",
     "lower/upper bounds from comparison systems (threshold jockeying and threshold blocking QBDs; Adan, van "
     "Houtum & van der Wal 1994), the threshold grown until the width is below tol",
     ("tol", "strict", "verify"),
     {"max_parameter": BOUNDS_MAX_THRESHOLD, "verify": (("algorithm", "cyclic_reduction"),), "label": "bounds"}),
    ("bounds", "finite_bounds", "model",
     "rigorous lower/upper bounds at finite n: a job-losing truncation and a job-gaining QBD on a profile of "
     "queue differences (sample-path coupling; rank-based routing)",
     ("truncation", "strict", "spread", "lower_states", "max_phases"),
     {"label": "bounds/coupling"}),
    ("closed-form", "closed_form", "model",
     "the model's exact closed-form expressions (no truncation, no iteration)",
     (),
     {"context": False, "label": "closed-form"}),
    ("closed-form", "renewal_queue", "single",
     "GI/M/1 closed form: the root sigma = A~(mu (1 - sigma)) of a renewal input to an exponential server",
     (),
     {"label": "closed-form"}),
    ("closed-form", "routing", "model",
     "water-filling closed forms with activation thresholds (no iteration; a scalar root for K dispatchers)",
     (),
     {"solver": "water-filling", "label": "closed-form"}),
    ("compensation", "quarter_plane", "single",
     "compensation approach: the equilibrium law as a series of product forms",
     (),
     {"solver_controls": ("tol",), "label": "compensation"}),
    ("convex", "routing", "model",
     "convex program in cvxpy (DCP; Clarabel), polished on the solver's used set and checked by its KKT "
     "residual; options solver, solver_tol, polish",
     ("solver", "solver_tol", "polish"),
     {"solver": "convex", "solver_controls": ("tol", "strict")}),
    ("meanfield", "population", "single",
     "mean-field limit (n -> infinity): fixed point of the occupancy ODE by banded Newton, with its Jacobian "
     "spectrum",
     ("tol", "strict"),
     {"solver": "fixed-point", "label": "meanfield/newton"}),
    ("refined", "population", "single",
     "refined mean field (Gast & Van Houdt 2017): the fixed point plus its 1/n correction",
     ("tol", "strict"),
     {"solver": "refined", "label": "refined/lyapunov"}),
    ("analytic", "pdmp", "single",
     "the analytic stationary law of power-law window profiles (q-Pochhammer series, mpmath where the series "
     "needs precision); no window ceiling",
     ("dps",),
     {"solver": "q-series", "solver_controls": ("strict", "tol"), "label": "analytic/q-series"}),
    ("numerical", "pdmp", "single",
     "the Kolmogorov (level-crossing) equation discretised on a log mesh, Richardson-extrapolated to tol; "
     "general profiles, decrease and window bounds",
     ("points_per_decrease", "max_levels"),
     {"solver": "kolmogorov", "solver_controls": ("strict", "tol"), "label": "numerical/kolmogorov"}),
    ("fluid", "fluid", "model",
     "fluid (mean-field) limit N -> infinity: fixed point of the dispatch dynamics (LP or root)",
     ("verify", "strict"),
     {}),
    ("mdp", "optimal", "model",
     "optimal policy of the model's MDP: policy iteration with span bounds (value iteration, LP as checks); "
     "capacity=inf by growing truncations",
     ("solver", "policy_out", "aperiodicity", "verify", "strict", "tol", "truncation"),
     {"solver_controls": ("tol", "strict")}),
    ("asymptotic", "asymptotic", "model",
     "large-parameter approximations (e.g. a capacity -> infinity, by regime of the load); no error bound",
     (),
     {"label": "asymptotic"}),
)

for _name, _protocol, _driver, _doc, _options, _settings in METHODS:
    register_method(_name, requires=_protocol, driver=_driver, doc=_doc, options=_options, **_settings)
