"""The transient law of a CTMC from its initial state, as a registered solver; a model-orchestrated ``ctmc``.

:func:`solve_transient` takes a :class:`~exactq.ctmc.CTMC` and a time ``t`` and returns
the law at ``t`` from the chain's initial state, ``p(t) = e_init exp(Q t)``, by
uniformisation with Fox-Glynn weights (:func:`exactq.solvers.transient.transient`).
It is registered for CTMCs under the name ``transient``, after the stationary solver:
automatic dispatch never picks it, a model asks for it by name
(``context.solve(chain, using="transient", t=...)``).

The second registration is the ``ctmc`` method for models that orchestrate their
chains themselves (``ctmc_study(measure, context)``): the same chain answers stationary
measures through the stationary solver and transient ones (the distribution of a
completion time, say) through this one, each truncation grown by the one driver of
:mod:`exactq.truncation`.

Examples
--------
Two states, ``0 -> 1`` at rate 2 and back at rate 1: ``p_1(t) = 2/3 (1 - e^{-3t})``.

>>> import numpy as np
>>> from exactq.ctmc import CTMC
>>> law = solve_transient(CTMC.from_generator([[-2.0, 2.0], [1.0, -1.0]]), t=0.5)
>>> bool(np.isclose(law.pi[1], 2 / 3 * (1 - np.exp(-1.5)), rtol=1e-12))
True
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from exactq.catalogue import register_solver
from exactq.ctmc import CTMC
from exactq.errors import ModelError

from .transient import transient

__all__ = ["TransientLaw", "solve_transient"]


@dataclass(frozen=True)
class TransientLaw:
    """The law of a CTMC at one time ``t``.

    Attributes
    ----------
    pi : (n,) ndarray
        ``P(X(t) = s)``; non-negative, sums to 1 (the Poisson weights are renormalised
        on their window).
    time : float
    truncated_mass : float
        Upper bound on the total-variation error of the Poisson truncation.
    method : str
    residual : float
        ``truncated_mass`` (what a result reports as its residual).
    seconds : float
    info : dict
    space : Space, optional
    """

    pi: np.ndarray
    time: float
    truncated_mass: float
    method: str = "uniformisation"
    residual: float = 0.0
    seconds: float = 0.0
    info: dict = field(default_factory=dict)
    space: object = field(default=None, repr=False)

    def expect(self, values) -> float:
        """``sum_s P(X(t) = s) f(s)``."""
        return float(self.pi @ np.broadcast_to(np.asarray(values, dtype=float), self.pi.shape))

    def probability(self, mask) -> float:
        """``P(X(t) in mask)``."""
        return float(self.pi[np.asarray(mask, dtype=bool)].sum())

    def conditioned(self, keep) -> "TransientLaw":
        """The law renormalised on ``keep`` (the boundary sensitivity of the truncation driver)."""
        pi = np.where(np.asarray(keep, dtype=bool), self.pi, 0.0)
        total = pi.sum()
        if total <= 0:
            raise ModelError("conditioning on a set of zero probability")
        return replace(self, pi=pi / total)


def _structure(chain) -> str | None:
    if chain.Q is None:
        return "the chain was released (it has no generator)"
    return None


@register_solver(CTMC, name="transient", priority=5, applies=_structure,
                 doc="the law at time t from the chain's initial state (uniformisation, Fox-Glynn weights); asked "
                     "for by name", options=("t", "eps", "strict"))
def solve_transient(chain: CTMC, *, t: float | None = None, eps: float = 1e-12, strict: bool = False) -> TransientLaw:
    """The law at time ``t`` of ``chain`` started in its initial state ``chain.initial``.

    Parameters
    ----------
    chain : CTMC
    t : float
        The time, ``>= 0`` (required).
    eps : float
        Bound on the Poisson mass dropped by the uniformisation.
    strict : bool
        Accepted for the common solver interface (the error is bounded, never left to
        converge).

    Returns
    -------
    TransientLaw

    Examples
    --------
    A pure-death chain ``2 -> 1 -> 0`` at rate 1 from state 2: ``P(X(t) = 0) = 1 - e^-t (1 + t)``.

    >>> from exactq.ctmc import CTMC
    >>> c = CTMC.from_generator([[0.0, 0.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, -1.0]], initial=2)
    >>> law = solve_transient(c, t=2.0)
    >>> bool(np.isclose(law.pi[0], 1 - np.exp(-2.0) * 3.0, rtol=1e-12))
    True
    """
    if t is None:
        raise ModelError("the transient solver needs a time t (solve(chain, using='transient', t=...))")
    t0 = time.perf_counter()
    p0 = np.zeros(chain.n_states)
    p0[int(chain.initial)] = 1.0
    p, info = transient(chain.Q, p0, float(t), eps=eps)
    lost = float(info["truncated_mass"])
    return TransientLaw(pi=p, time=float(t), truncated_mass=lost, residual=lost, seconds=time.perf_counter() - t0,
                        info={"uniformisation_rate": info["uniformisation_rate"], "matvecs": info["matvecs"],
                              "truncated_mass": lost}, space=chain.space)
