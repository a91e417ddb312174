"""Sparse linear systems of Markov chains: predicted LU cost, solver choice, stated error bounds.

Every linear system the chain solvers meet is, up to sign and scaling, a nonsingular
M-matrix ``A`` (off-diagonal entries <= 0, ``A^-1 >= 0``):

* the reduced steady-state system ``-Q_SS^T x = Q_{r,S}`` (``r`` the reference state,
  ``S`` the others, ``x = pi_S / pi_r``; Stewart 1994, sec. 2.5);
* the unbounded reachability, expected time and expected reward systems
  ``(I - P_SS) x = c`` on the states not settled by graph analysis (Baier & Katoen
  2008, sec. 10.1.1), CTMCs in the form scaled by the exit rates and DTMCs as they are.

This module decides *how* to solve them, before doing it:

:func:`predict_lu`
    The sparse LU's fill and work, without factorising: for a geometric nested
    dissection (states with lattice coordinates, the ordering the direct solver uses)
    the separators' dense blocks, ``sum s^2`` entries and ``(2/3) sum s^3`` flops
    (George 1973: on a lattice the separator blocks of a nested-dissection factor are
    dense, so on a full box these are lower bounds; on the irregular state spaces of
    PRISM models a separator may fall apart, so they are estimates); for a system that
    is triangular but for a few feedback states (rounds that restart from one state), the
    fill with those states last (:func:`_feedback`); otherwise the
    envelope of the reverse Cuthill-McKee ordering
    (:func:`scipy.sparse.csgraph.reverse_cuthill_mckee`), which bounds the fill of an
    LU in that ordering (George & Liu, *Computer Solution of Large Sparse Positive
    Definite Systems*, 1981, ch. 4: the factor stays inside the envelope) and
    estimates that of SuperLU's own ordering (measured: 3.8M predicted, 6.2M actual on
    an 8,281-state reaction network, where COLAMD and pivoting leave the envelope).
:func:`choose`
    Direct LU when the prediction fits the memory budget
    (:func:`exactq.budget.memory_budget`) and its work is below what an iterative
    solve is expected to cost; otherwise BiCGSTAB preconditioned by a symmetric
    Gauss-Seidel sweep (:class:`SymmetricGaussSeidel`). A solver asked for by name runs even if predicted
    slow, but a direct LU predicted (by nested dissection) over the budget is refused in one line.
:func:`solve_iterative`
    BiCGSTAB (van der Vorst 1992) with Jacobi, then the symmetric Gauss-Seidel, preconditioner
    ``M = (D + L) D^-1 (D + U)`` (a forward and a backward sweep), applied by compiled
    Gauss-Seidel sweeps over the two triangles of ``A`` (:class:`Triangle`: no factorisation,
    no fill); the forward sweep alone, ``M = D + L``, is :class:`GaussSeidel`.
:func:`error_bound`
    The a-posteriori bound of an approximate solution: with ``v > 0`` and ``A v >= g 1``
    (``g > 0``, verified by one product), ``A^-1 1 <= v / g``, so
    ``|x* - x| <= A^-1 |r| <= (||r||_inf / g) v`` componentwise, ``r = c - A x``
    (Varah 1975; Rump, Acta Numerica 2010, sec. 10.2; the same bound as
    :mod:`exactq.solvers.certify`, here in plain float64, so it holds up to the
    rounding of one residual). ``v`` solves ``A v = 1`` to a loose tolerance: for the
    steady-state system it is the vector of expected hitting times of the reference
    state, for the reachability systems the expected number of steps before the
    system is left.

References
----------
A. George, "Nested dissection of a regular finite element mesh", SIAM J. Numer. Anal.
10 (1973). H. A. van der Vorst, "Bi-CGSTAB", SIAM J. Sci. Stat. Comput. 13 (1992).
J. M. Varah, "A lower bound for the smallest singular value of a matrix", Linear
Algebra Appl. 11 (1975). S. M. Rump, "Verification methods", Acta Numerica 19 (2010).
W. J. Stewart, *Introduction to the Numerical Solution of Markov Chains*, 1994.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from exactq.budget import format_bytes, memory_budget, require_memory
from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, ConvergenceWarning, ModelError

__all__ = ["LUPrediction", "predict_lu", "choose", "block_triangular_order", "GaussSeidel", "SymmetricGaussSeidel", "PRECONDITIONER",
           "solve_iterative", "error_bound",
           "LINEAR_SOLVERS", "solve_mmatrix", "gth", "NoValidVector", "warn_or_raise", "MAX_REFERENCES",
           "LinearSystem", "linear_solvers", "solve_linear"]

#: reference changes tried per method before falling back to another method (the stationary solvers)
MAX_REFERENCES = 4


class NoValidVector(ConvergenceError):
    """No attempt of a stationary solver gave a usable vector (finite, non-negative, non-zero)."""


def warn_or_raise(msg: str, strict: bool) -> None:
    """A :class:`ConvergenceWarning`, or with ``strict`` a :class:`ConvergenceError`."""
    if strict:
        raise ConvergenceError(msg)
    warnings.warn(msg, ConvergenceWarning, stacklevel=3)


def gth(A: np.ndarray) -> np.ndarray:
    """Grassmann-Taksar-Heyman state reduction on a dense generator (Stewart 1994, sec. 2.7).

    Subtraction-free, hence accurate to a few ulps in every entry. The loop runs over the
    ``n`` elimination steps; each step is one vectorised rank-one update.

    Examples
    --------
    >>> gth(np.array([[-1.0, 1.0], [2.0, -2.0]])).tolist()
    [0.6666666666666666, 0.3333333333333333]
    """
    from scipy.linalg.blas import dger

    # by columns, so that each step's rank-one update is BLAS's dger on a column-major block (a copy in and out,
    # still 1.7-2x faster than NumPy's outer product and sum: 160 states 1.70 -> 0.97 ms, 400 20.2 -> 9.5 ms;
    # the same non-negative terms, equal to rounding)
    P = np.array(A, dtype=float, order="F")
    n = P.shape[0]
    np.fill_diagonal(P, 0.0)
    # one BLAS thread: OpenBLAS threads dger above about 9,000 entries, and with both cores of a 2-core machine
    # busy the n threaded calls stalled on each other's wake-ups: 160 states took 550 ms instead of 2.2 ms
    with _blas_single_thread(n * n):
        for k in range(n - 1, 0, -1):
            col = P[:k, k]
            col /= P[k, :k].sum()
            P[:k, :k] = dger(1.0, col, P[k, :k], a=P[:k, :k])
    # back substitution pi_k = sum_{j<k} pi_j P_jk: one triangular solve of (I - U)^T pi = e_0 with U the
    # strict upper triangle (its off-diagonal entries are -P_jk <= 0, so the solve only adds non-negative
    # terms, as the loop below does; 160 states: 3.1 ms against 4.2 ms), unless it overflows
    from scipy.linalg import solve_triangular

    e0 = np.zeros(n)
    e0[0] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        pi = solve_triangular(np.eye(n) - np.triu(P, 1), e0, trans="T", unit_diagonal=True, check_finite=False)
    total = pi.sum()
    if np.isfinite(total) and total > 0:
        return pi / total
    # rescaled whenever an entry grows past 1e250, so that a chain whose mass sits far from state 0 cannot
    # overflow (the entries pushed towards underflow are then below 1e-250 of the largest)
    pi = np.zeros(n)
    pi[0] = 1.0
    for k in range(1, n):
        pi[k] = pi[:k] @ P[:k, k]
        if pi[k] > 1e250:
            pi[:k + 1] /= pi[k]
    return pi / pi.sum()

#: names accepted by :func:`solve_mmatrix` (the built-in solvers of :class:`LinearSystem`; :func:`linear_solvers`
#: gives the registry's names, plug-ins' included)
LINEAR_SOLVERS = ("auto", "direct", "bicgstab")
#: bytes per entry of a SuperLU factor (value, row index, supernode bookkeeping)
LU_BYTES_PER_ENTRY = 16
#: flops of a sparse LU per second (SuperLU's dense kernels on separator blocks), for the time estimate
LU_FLOPS_PER_SECOND = 2e9
#: iterations an iterative solve is expected to take when choosing (each ~ 8 nnz flops)
EXPECTED_ITERATIONS = 300
#: flops per second of one BiCGSTAB iteration's sparse products and triangular solves (measured: 262k flops
#: per iteration in 0.36 ms on Kanban's 4,600 states, with the certificate's iterations counted)
ITERATIVE_FLOPS_PER_SECOND = 0.7e9
#: seconds of interpreter work per iteration besides the flops (SciPy's BiCGSTAB loop, the callbacks)
ITERATION_OVERHEAD_SECONDS = 2e-5
#: levels of the nested dissection measured before the whole one when a lower bound may decide (:func:`predict_lu`)
PROBE_LEVELS = 3
#: a direct LU is preferred while its predicted time is below this many times the expected iterative time
#: (measured: BiCGSTAB took 12-100 iterations on the cluster, FMS and Kanban chains of 3,574-10,132 states,
#: 23-30 on reaction networks, 80-220 on FMS and Kanban at 36k-58k states)
DIRECT_PREFERENCE = 1.0
#: a predicted LU above this many seconds is tried after a bounded BiCGSTAB run (:func:`choose` with
#: ``trial=True``): the nested-dissection prediction is a lower bound of SuperLU's work (measured on the PRISM
#: case studies: cluster N=16, 10,132 states, predicted 0.13 s, factorised in 0.30-0.34 s; tandem c=127, 32,640
#: states, predicted 0.014 s, 0.13 s), while BiCGSTAB took 4 and 24 iterations (0.04 s and 0.20 s with its
#: certificate), so a trial costs little when it fails and saves the LU when it converges
TRIAL_MIN_SECONDS = 0.01
#: the trial's iteration budget: this many times the predicted LU time, in predicted iterations, at least
#: :data:`TRIAL_MIN_ITERATIONS`
TRIAL_BUDGET = 2.0
TRIAL_MIN_ITERATIONS = 40
#: restarts of BiCGSTAB after a breakdown
MAX_RESTARTS = 20
#: BiCGSTAB's own stopping test reads its recursively updated residual, which can drift far from the
#: true one: on the zeroconf DTMC (N = 256 probes, 771 unknowns) it reported convergence with a true
#: residual of 385 on a right-hand side of norm ~1 (an expected reward of 622.6 for 256.5). A "converged"
#: answer whose true relative residual exceeds this many times the target is treated as a breakdown
#: (restarted from its iterate, with a fresh residual), and reported as not converged if that fails.
FALSE_CONVERGENCE_FACTOR = 100.0
#: the status :func:`solve_iterative` reports for an answer whose recurrence converged but whose true
#: residual did not
FALSE_CONVERGENCE = -100
#: BiCGSTAB runs in chunks of this many iterations, restarted from the iterate, and stops when a chunk does not
#: bring the true residual below STAGNATION times the previous chunk's: from a poor reference state the
#: stationary system of a loss network (176,851 states) stagnated at a relative residual of ~1e-2 and ran its
#: whole iteration limit (minutes) before the fallback could start
CHUNK_ITERATIONS = 100
STAGNATION = 0.9
#: up to this many unknowns the LU is always cheap (no prediction needed); above it the fill is predicted,
#: since a few thousand unknowns can already fill in badly (Kanban with 4,600 states: an LU of 2.7-4.0M
#: entries, 0.34-0.56 s, against 0.054 s for BiCGSTAB; the old limit of 5,000 took the LU there)
SMALL_SYSTEM = 200
#: below this many unknowns the certificate's vector of :func:`error_bound` comes from a sparse LU when the
#: iterative solve for it gives none
CERTIFICATE_LU_MAX = 5000
#: :func:`_feedback` predicts the LU when its feedback states' fill, ``|H| n``, is at most this many times ``nnz(A)``
FEEDBACK_FILL = 1.0
#: :func:`solve_mmatrix` solves a system with at most this many feedback states by :func:`_solve_bordered` before
#: choosing any other solver: ``h + 2`` triangular solves, where BiCGSTAB makes four in each iteration and more for
#: its certificate (a leader election of 279,937 unknowns and one feedback state: 45 ms against 112 ms for the
#: two iterations BiCGSTAB needed and its bound; SuperLU's per-column overhead, which the prediction below models
#: and which had sent the system to the iteration, does not arise)
BORDERED_MAX_STATES = 8
#: SuperLU's time per column of such a system, besides the flops (its ordering, symbolic and supernodal work),
#: added to :func:`_feedback`'s prediction: measured on leader election systems, 0.34 us a column at 5,121 and
#: 24,577 unknowns, 0.73 us at 306,000 (there BiCGSTAB converges in 2 iterations, 0.10 s a solve against the
#: LU's 0.22 s, and the prediction, 0.1 s, now sends it to the bounded BiCGSTAB trial of :func:`choose` first)
FEEDBACK_COLUMN_SECONDS = 0.35e-6


@dataclass
class LUPrediction:
    """What a sparse LU of a system would cost, predicted before factorising.

    Attributes
    ----------
    nnz : float
        Predicted entries of ``L + U``.
    flops : float
        Predicted floating-point operations.
    kind : str
        ``"nested dissection"`` (from the separators), ``"feedback"`` (a few
        feedback states last), ``"envelope"`` (reverse Cuthill-McKee) or ``"small"``
        (not predicted: the system is small).
    how : str
        How the prediction was made (one line).
    """

    nnz: float
    flops: float
    kind: str
    how: str

    @property
    def bytes(self) -> float:
        return self.nnz * LU_BYTES_PER_ENTRY

    @property
    def seconds(self) -> float:
        return self.flops / LU_FLOPS_PER_SECOND

    def as_dict(self) -> dict:
        return {"predicted_lu_nnz": float(self.nnz), "predicted_lu_bytes": float(self.bytes),
                "predicted_lu_seconds": float(self.seconds), "prediction": f"{self.kind}: {self.how}"}


def predict_lu(A: sp.spmatrix, *, coords: np.ndarray | None = None, jumps: np.ndarray | None = None,
               enough_flops: float | None = None, feedback=None) -> LUPrediction:
    """Predict the fill and work of a sparse LU of ``A`` (module docstring).

    Parameters
    ----------
    A : (n, n) sparse matrix
    coords : (n, d) int array, optional
        Lattice coordinates of the unknowns (a chain's states); with ``jumps``, the
        prediction is for the geometric nested dissection the direct solver uses.
    jumps : (d,) int array, optional
        Largest coordinate change of a transition in each direction.
    enough_flops : float, optional
        Work above which the caller's decision no longer depends on the number: the
        nested dissection's first :data:`PROBE_LEVELS` levels are measured first, and
        when their separators alone (a lower bound: the largest ones) reach this, that
        bound is returned (``how`` says "at least"), without the whole dissection.
    feedback : tuple, optional
        :func:`_feedback_set`'s answer for ``A``, when the caller has it (not found again).

    Returns
    -------
    LUPrediction

    Examples
    --------
    A tridiagonal system: the envelope of its (already banded) ordering is the band, so
    the LU has at most ``3n`` entries.

    >>> n = 10_000
    >>> A = sp.diags([-np.ones(n - 1), 3 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")
    >>> p = predict_lu(A)
    >>> p.kind, p.nnz <= 3 * n
    ('envelope', True)
    """
    n = A.shape[0]
    if n <= SMALL_SYSTEM:
        return LUPrediction(float(A.nnz), float(A.nnz) * 10, "small", f"{n} unknowns")
    if coords is not None and jumps is not None and np.any(np.asarray(jumps) > 0):
        from .ordering import nested_dissection, separator_sizes

        if enough_flops is not None:
            seps = separator_sizes(coords, jumps, PROBE_LEVELS)
            pred, dense = _separator_prediction(A, seps, f"nested dissection, at least: the first {len(seps)} "
                                                            f"levels' ")
            if pred is not None and dense >= enough_flops:
                return pred
        seps: list = []
        nested_dissection(coords, jumps, separators=seps)
        pred, _ = _separator_prediction(A, seps, "nested dissection: ")
        if pred is not None:
            return pred
    fb = _feedback(A) if feedback is None else _feedback_prediction(A, feedback)
    return fb if fb is not None else _envelope(A)


def _separator_prediction(A: sp.spmatrix, seps: list, lead: str) -> tuple:
    """``(prediction, dense)``: the LU of a nested dissection from its separators' sizes (one array per level),
    their dense blocks, ``nnz(A) + sum s^2`` entries and ``dense = (2/3) sum s^3`` flops (module docstring);
    ``(None, 0.0)`` without a separator. ``lead`` begins the prediction's ``how``."""
    s = np.concatenate(seps).astype(float) if seps else np.zeros(0)
    if not (s.size and s.max() > 0):
        return None, 0.0
    dense = (2.0 / 3.0) * float((s ** 3).sum())
    return LUPrediction(float(A.nnz + (s ** 2).sum()), float(dense + 10 * A.nnz), "nested dissection",
                        f"{lead}{s.size} separators, the largest {int(s.max())} states"), dense


def _feedback(A: sp.spmatrix) -> LUPrediction | None:
    """The fill of an LU with a few feedback states last, or None when more than a few are needed.

    Every entry on one side of the diagonal (in the chain's own order, a breadth-first
    one) is a transition back; ``H``, the states at one end of all of them (the smallest
    of the four choices: the targets or the sources of the entries below or above the
    diagonal), is a feedback vertex set: without it the system is triangular. In the
    order "the others as they are, then ``H``" an LU without pivoting (an M-matrix needs
    none) fills nothing in the triangular block; the ``|H|`` rows (or columns) that leave
    it fill in at most ``|H| (n - |H|)`` entries, and the Schur complement on ``H`` is at
    most dense: ``nnz(L + U) <= nnz(A) + |H| n``, in about ``4 |H| nnz(A) + (2/3) |H|^3``
    flops (``|H|`` sparse triangular solves and their products; George & Liu 1981, ch. 6,
    on bordered triangular systems). Taken when that fill is at most ``nnz(A)`` again
    (:data:`FEEDBACK_FILL`): the reverse Cuthill-McKee envelope, a bandwidth bound,
    overstates such a fill by orders of magnitude (a synchronous leader election of 5,121
    unknowns whose rounds restart from one state: envelope 1.0e7 entries, ~7 s, so
    BiCGSTAB and its certificate ran, 6.4 ms; this prediction 15,896). Like the envelope,
    it is exact for its own ordering and an estimate of SuperLU's (COLAMD), which runs:
    20,083 entries in 1.9 ms there, 2.1x the prediction on a binary tree of restarting
    rounds (tests/solvers/test_linear.py).

    The format does not matter: the four choices are closed under transposition.
    """
    n = A.shape[0]
    if not sp.issparse(A) or A.format not in ("csr", "csc"):
        A = sp.csr_matrix(A)
    return _feedback_prediction(A, _feedback_set(A))


def _feedback_prediction(A, found) -> LUPrediction | None:
    """:func:`_feedback`'s prediction from the feedback set ``found`` (:func:`_feedback_set`'s answer for ``A``)."""
    n = A.shape[0]
    h = int(found[0].sum())
    if h * n > FEEDBACK_FILL * A.nnz:
        return None
    nnz = float(A.nnz + h * n)
    flops = 4 * h * A.nnz + (2.0 / 3.0) * h ** 3 + 10 * A.nnz + FEEDBACK_COLUMN_SECONDS * LU_FLOPS_PER_SECOND * n
    return LUPrediction(nnz, float(flops), "feedback",
                        f"{h} feedback states last, the rest triangular")


def _feedback_set(A) -> tuple[np.ndarray, bool, np.ndarray]:
    """The feedback states of :func:`_feedback` (a mask), whether the others' block is upper triangular, and the
    major index of each stored entry (its row for CSR).

    ``A`` is compressed (CSR or CSC; for CSC "upper" is said of its transpose): the
    states at one end of the entries below the diagonal (their upper block is then
    triangular) or above it, whichever of the four sets is smallest.
    """
    n = A.shape[0]
    major = np.repeat(np.arange(n, dtype=A.indices.dtype), np.diff(A.indptr))
    minor = A.indices
    best, upper = None, True
    for side, is_upper in ((minor < major, True), (minor > major, False)):
        for end in (minor, major):
            mask = np.bincount(end[side], minlength=n) > 0
            if best is None or np.count_nonzero(mask) < np.count_nonzero(best):
                best, upper = mask, is_upper
    return best, upper, major


def _solve_bordered(A: sp.csr_matrix, b: np.ndarray, details: dict, found=None):
    """``A x = b`` with :func:`_feedback_set`'s few states ``H`` last, by triangular solves; or None.

    In the order "the others (``P``), then ``H``", ``A = [[T, B], [C, D]]`` with ``T``
    triangular; the Schur complement ``S = D - C T^-1 B`` (``|H| x |H|``, an M-matrix
    like ``A``, so nonsingular) gives ``x_H = S^-1 (b_H - C T^-1 b_P)`` and
    ``x_P = T^-1 (b_P - B x_H)``: ``|H| + 2`` triangular solves (:class:`Triangle`; the
    certificate's vector ``A^-1 1`` is the second) and one small dense solve, the LU of
    :func:`_feedback`'s order without forming it (Golub & Van Loan, *Matrix
    Computations*, 4th ed., sec. 3.2.10 on block elimination). A leader election with
    one feedback state, with the bound: 1.7 ms at 5,121 unknowns and 5.0 ms at 24,577,
    against SuperLU's 1.95 and 7.7 ms without it.
    """
    t0 = time.perf_counter()
    n = A.shape[0]
    hubs, upper, r = _feedback_set(A) if found is None else found
    rest, hs = np.flatnonzero(~hubs), np.flatnonzero(hubs)
    m, h = rest.size, hs.size
    if m == 0:
        return None
    # the four blocks from A's entries (no sparse slicing: its per-call overhead was most of the time)
    c, d = A.indices, A.data
    pos = np.empty(n, dtype=np.int64)
    pos[rest], pos[hs] = np.arange(m), np.arange(h)
    hr, hc = hubs[r], hubs[c]
    k = ~(hr | hc)
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(r[k], minlength=n)[rest], out=indptr[1:])
    T = sp.csr_matrix((d[k], pos[c[k]], indptr), shape=(m, m))
    if np.any(T.diagonal() <= 0):
        return None
    with np.errstate(all="ignore"):
        tri = Triangle(T, lower=not upper)
        Bd = np.zeros((m, h))
        kb = ~hr & hc
        np.add.at(Bd, (pos[r[kb]], pos[c[kb]]), d[kb])
        Y = np.empty((m, 2 + h))
        for j, col in enumerate([b[rest], np.ones(m)] + [Bd[:, i] for i in range(h)]):
            Y[:, j] = tri.solve(col)
        CY = np.zeros((h, 2 + h))  # C T^-1 [b_P, 1, B]
        kc = hr & ~hc
        np.add.at(CY, pos[r[kc]], d[kc, None] * Y[pos[c[kc]]])
        S = -CY[:, 2:]
        kd = hr & hc
        np.add.at(S, (pos[r[kd]], pos[c[kd]]), d[kd])
        xh = np.linalg.solve(S, np.column_stack([b[hs], np.ones(h)]) - CY[:, :2]) if h else np.zeros((0, 2))
        x, v = np.empty(n), np.empty(n)
        x[hs], v[hs] = xh[:, 0], xh[:, 1]
        x[rest] = Y[:, 0] - Y[:, 2:] @ xh[:, 0]
        v[rest] = Y[:, 1] - Y[:, 2:] @ xh[:, 1]
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(v))):
        return None
    details = {**details, "name": "direct",
               "how": f"triangular solves with the {h} feedback states last (their Schur complement)",
               "seconds": time.perf_counter() - t0}
    bound, binfo = error_bound(A, x, b, v=v)
    info = {"solver": {**details, **binfo}, "error_bound": float(bound.max(initial=0.0)),
            "residual": binfo["residual_inf"], "bound_vector": bound}
    return x, info


def _envelope(A: sp.spmatrix) -> LUPrediction:
    """The envelope of ``A`` in reverse Cuthill-McKee order: an upper bound on the LU's fill."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    n = A.shape[0]
    A = sp.csr_matrix(A)
    # the pattern of A + A^T in one-byte entries (at most 2), not a float copy of A: the symmetrised pattern of
    # a Herman ring (8,166 unknowns, 1.6M entries) was most of this prediction's 155 ms, and most of that the
    # page faults of its 8-byte copies
    S = sp.csr_matrix((np.ones(A.nnz, dtype=np.int8), A.indices, A.indptr), shape=A.shape)
    S = (S + S.T.tocsr()).tocsr()
    perm = reverse_cuthill_mckee(S, symmetric_mode=True)
    # the first column of each row in the permuted order, without forming the permuted matrix (that copy took
    # 0.26 s of 0.35 s at 152,712 states): row perm[k] of S is row k of S[perm][:, perm], its columns inv[j]
    itype = np.int32 if n < 2**31 else np.int64
    inv = np.empty(n, dtype=itype)
    inv[perm] = np.arange(n, dtype=itype)
    first = np.full(n, n, dtype=np.int64)
    nonempty = np.flatnonzero(np.diff(S.indptr) > 0)
    if nonempty.size:
        first[inv[nonempty]] = np.minimum.reduceat(inv[S.indices], S.indptr[nonempty])
    first = np.minimum(first, np.arange(n))
    # the LU's row i of L (column i of U) lies within [first_i, i]: the envelope is closed under elimination
    width = (np.arange(n) - first).astype(float)
    nnz = float(2 * width.sum() + n)
    return LUPrediction(nnz, float(2 * (width ** 2).sum() + 10 * A.nnz), "envelope",
                        f"reverse Cuthill-McKee envelope, bandwidth {int(width.max())}")


def choose(A: sp.spmatrix, *, coords=None, jumps=None, asked: str = "auto",
           trial: bool = False, feedback=None) -> tuple[str, dict]:
    """Pick ``direct`` or ``bicgstab`` for ``A`` by predicted cost; returns (name, details).

    With ``trial=True`` (a caller that falls back to the LU when BiCGSTAB does not
    converge), a predicted LU of more than :data:`TRIAL_MIN_SECONDS` is preceded by a
    BiCGSTAB run of at most ``details["trial_iterations"]`` iterations (about
    :data:`TRIAL_BUDGET` times the predicted LU time): the prediction is a lower bound of
    the LU's work, often 3-10 times below it. ``feedback``: :func:`_feedback_set`'s answer
    for ``A`` when the caller has found it (:func:`solve_mmatrix`), passed to :func:`predict_lu`.

    Raises
    ------
    BudgetError
        If ``direct`` is asked for and the nested-dissection prediction of its fill
        exceeds the memory budget.
    """
    iterative_flops = EXPECTED_ITERATIONS * 8.0 * A.nnz
    iterative_seconds = iterative_flops / ITERATIVE_FLOPS_PER_SECOND + EXPECTED_ITERATIONS * ITERATION_OVERHEAD_SECONDS
    # an LU predicted above DIRECT_PREFERENCE x the iterative time is never chosen, so a lower bound above that
    # decides without the whole dissection (asked for by name, the LU's full prediction is checked against memory)
    enough = None if asked != "auto" else DIRECT_PREFERENCE * iterative_seconds * LU_FLOPS_PER_SECOND
    pred = predict_lu(A, coords=coords, jumps=jumps, enough_flops=enough, feedback=feedback)
    details = pred.as_dict()
    budget = memory_budget()
    if asked == "direct":
        if pred.kind == "nested dissection":
            require_memory(pred.bytes, f"the sparse LU of {A.shape[0]} unknowns (predicted {pred.nnz:.3g} entries)",
                           hint="use solver=bicgstab")
        return "direct", {**details, "why": "asked for"}
    if asked != "auto":
        return asked, {**details, "why": "asked for"}
    if pred.kind == "small":
        return "direct", {**details, "why": f"small system ({A.shape[0]} unknowns)"}
    fits = budget is None or pred.bytes <= budget
    if fits and pred.seconds <= DIRECT_PREFERENCE * iterative_seconds:
        if trial and pred.seconds > TRIAL_MIN_SECONDS:
            per_iteration = iterative_seconds / EXPECTED_ITERATIONS
            limit = max(TRIAL_MIN_ITERATIONS, int(math.ceil(TRIAL_BUDGET * pred.seconds / per_iteration)))
            return "bicgstab", {**details, "trial_iterations": limit,
                                "why": f"predicted LU {format_bytes(pred.bytes)}, ~{pred.seconds:.2g} s ({pred.kind}): "
                                       f"BiCGSTAB first, within {limit} iterations"}
        return "direct", {**details, "why": f"predicted LU {format_bytes(pred.bytes)}, ~{pred.seconds:.2g} s "
                                            f"({pred.kind})"}
    if not fits:
        why = f"predicted LU fill {pred.nnz:.3g} entries ({format_bytes(pred.bytes)}, {pred.kind}) > memory " \
              f"budget {format_bytes(budget)}"
    else:
        why = f"predicted LU work {pred.flops:.3g} flops (~{pred.seconds:.3g} s, {pred.kind}) > " \
              f"{DIRECT_PREFERENCE:g} x an iterative solve's ({iterative_flops:.3g} flops, ~{iterative_seconds:.3g} s)"
    return "bicgstab", {**details, "why": why}


class Triangle:
    """Solves with a sparse triangular matrix ``M`` (nonzero diagonal) without factorising it.

    ``solve(b, trans="N")`` returns ``M^-1 b`` (``"T"``: ``M^-T b``) by one Gauss-Seidel
    sweep from zero over ``M``'s rows (PyAMG's compiled ``gauss_seidel``; forward for a lower
    triangle, backward for an upper one): on a triangle the sweep *is* the substitution,
    ``x_i = (b_i - sum_{j != i} M_ij x_j) / M_ii`` with every ``x_j`` it reads already final.
    ``M^T`` is kept by rows too, made on the first transposed solve. Measured on the two
    triangles of an FMS generator (13,530 states, 102,096 entries): 75-100 us a sweep, about
    one product with the whole matrix, against 200-240 us for SuperLU's ``gstrs`` on the same
    triangle (its column-oriented solve with supernode bookkeeping per column), which it
    replaces; spsolve_triangular took 30 times as long. Without PyAMG's binding
    (:func:`_sweeps_work`) the solve is SuperLU's ``gstrs`` on ``M`` scaled to a unit diagonal
    (:func:`_gstrs_works`), and without that SuperLU's factorisation of the triangle in its
    natural order (20 times a solve).

    ``M`` must be triangular as ``lower`` says; that is the callers' construction and is not
    checked again here.
    """

    def __init__(self, M: sp.spmatrix, *, lower: bool, own: bool = False):
        # ``own``: M's arrays are the caller's to give away (sorted or scaled in place, not copied)
        self.lower, self._fallback, self._T = lower, None, None
        sweep = compiled_sweep()
        if sweep is not None:
            R = sp.csr_matrix(M, dtype=float)  # M's own arrays when it is a float CSR: the sweep only reads them
            if not R.has_canonical_format:
                R = R if own else R.copy()  # (its arrays may be M's)
                R.sum_duplicates()
            d = R.diagonal()
            if np.any(d == 0):
                raise ZeroDivisionError("a triangular solve needs a nonzero diagonal")
            self.n = R.shape[0]
            self._sweep = sweep
            self._R = R
            self._N = sweep_arrays(R)
            return
        self._init_gstrs(M, own)

    def _init_gstrs(self, M: sp.spmatrix, own: bool) -> None:
        # K = M (lower) or M^T (upper) in CSC: M's CSC, or M's CSR transposed (a view of its arrays)
        lower = self.lower
        K = sp.csc_matrix(M, dtype=float) if lower else sp.csr_matrix(M, dtype=float).T
        K = sp.csc_matrix((K.data if own else K.data.copy(), K.indices, K.indptr), shape=K.shape)
        K.sum_duplicates()
        d = K.diagonal()
        if np.any(d == 0):
            raise ZeroDivisionError("a triangular solve needs a nonzero diagonal")
        self.n, self.invd, self._sweep = K.shape[0], 1.0 / d, None
        if not _gstrs_works():
            self._fallback = spla.splu(sp.csc_matrix(M), permc_spec="NATURAL", diag_pivot_thresh=0.0,
                                       options=dict(SymmetricMode=True))
            return
        from scipy.sparse.linalg._dsolve import _superlu

        K.sort_indices()
        K.data *= np.repeat(self.invd, np.diff(K.indptr))  # unit diagonal: K D is M (lower) or M^T (upper)
        self._gstrs = _superlu.gstrs
        self._L = (K.nnz, K.data, K.indices.astype(np.intc, copy=False), K.indptr.astype(np.intc, copy=False))
        self._U = (0, np.zeros(0), np.zeros(0, dtype=np.intc), np.zeros(self.n + 1, dtype=np.intc))

    def _unit(self, b: np.ndarray, trans: str) -> np.ndarray:
        x, info = self._gstrs(trans, self.n, *self._L, self.n, *self._U, np.array(b, dtype=float, copy=True))
        if info:
            raise ZeroDivisionError("a triangular solve met a zero pivot")
        return x

    def solve(self, b: np.ndarray, trans: str = "N") -> np.ndarray:
        if self._sweep is not None:
            forward = (trans == "N") == self.lower  # M lower, or M^T of an upper M: a forward sweep
            if trans == "N":
                arrays = self._N
            else:
                if self._T is None:
                    self._T = sweep_arrays(sp.csr_matrix(self._R.T))
                arrays = self._T
            x = np.zeros(self.n)
            rhs = np.ascontiguousarray(b, dtype=float)
            if forward:
                self._sweep(*arrays, x, rhs, 0, self.n, 1)
            else:
                self._sweep(*arrays, x, rhs, self.n - 1, -1, -1)
            return x
        if self._fallback is not None:
            return self._fallback.solve(b, trans=trans)
        if (trans == "N") == self.lower:  # M x = b, M = K D (lower); M^T x = b, M^T = K D (upper)
            return self.invd * self._unit(b, "N")
        return self._unit(self.invd * b, "T")


_SWEEPS: list = []


def _pyamg_sweep(name: str = "gauss_seidel"):
    """PyAMG's compiled ``gauss_seidel`` (or another function of its relaxation module: ``gauss_seidel_indexed``),
    from its extension module alone when that loads.

    ``import pyamg`` runs the package's ``__init__``, which imports its solvers and its gallery: 37 ms measured
    here, where this module alone loads in 1.3 ms (a whole FMS model of 623 states takes 40 ms to build and
    check). The module is a self-contained pybind11 binding of ``relaxation.h``; it is loaded from the file beside
    the package, without registering it, and on any failure the plain import is used.
    """
    import importlib.machinery
    import importlib.util
    import os

    if _RELAXATION:  # loaded once per process (both sweeps come from it)
        return getattr(_RELAXATION[0], name)
    try:
        spec = importlib.util.find_spec("pyamg")
        if spec is not None and spec.submodule_search_locations:
            folder = os.path.join(list(spec.submodule_search_locations)[0], "amg_core")
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "relaxation" + suffix)
                if os.path.isfile(path):
                    found = importlib.util.spec_from_file_location("pyamg.amg_core.relaxation", path)
                    module = importlib.util.module_from_spec(found)
                    found.loader.exec_module(module)
                    _RELAXATION.append(module)
                    return getattr(module, name)
    except Exception:  # noqa: BLE001 -- another layout or loader: the package's own import below
        pass
    from pyamg.amg_core import relaxation

    _RELAXATION.append(relaxation)
    return getattr(relaxation, name)


#: PyAMG's relaxation module, once loaded (:func:`_pyamg_sweep`)
_RELAXATION: list = []


def sweep_arrays(R: sp.csr_matrix) -> tuple:
    """``R``'s index pointer, indices and entries as :func:`compiled_sweep` takes them: int32 indices and contiguous
    float64 entries (others would be converted on every call)."""
    return (R.indptr.astype(np.intc, copy=False), R.indices.astype(np.intc, copy=False),
            np.ascontiguousarray(R.data, dtype=float))


def compiled_sweep():
    """PyAMG's compiled ``gauss_seidel(indptr, indices, data, x, b, start, stop, step)`` (one sweep over the rows
    ``start, start + step, ...`` of ``A x = b``, ``x`` in place), or None where it does not work
    (:func:`_sweeps_work`)."""
    return _SWEEPS[0] if _sweeps_work() else None


def _sweeps_work() -> bool:
    """Whether PyAMG's compiled Gauss-Seidel sweep imports and solves as :class:`Triangle` calls it (checked
    once per process, on a small lower and upper triangle)."""
    if not _SWEEPS:
        fn = None
        try:
            gauss_seidel = _pyamg_sweep()
            # [[2, 0, 0], [-0.5, 1, 0], [0.25, -2, 4]] by rows, forward, and its transpose by rows, backward (plain
            # arrays: SciPy's sparse constructors cost a millisecond the first time in a process)
            K = np.array([[2.0, 0.0, 0.0], [-0.5, 1.0, 0.0], [0.25, -2.0, 4.0]])
            b = np.array([1.0, 2.0, 3.0])
            x, y = np.zeros(3), np.zeros(3)
            gauss_seidel(np.array([0, 1, 3, 6], dtype=np.intc), np.array([0, 0, 1, 0, 1, 2], dtype=np.intc),
                         np.array([2.0, -0.5, 1.0, 0.25, -2.0, 4.0]), x, b, 0, 3, 1)
            gauss_seidel(np.array([0, 3, 5, 6], dtype=np.intc), np.array([0, 1, 2, 1, 2, 2], dtype=np.intc),
                         np.array([2.0, -0.5, 0.25, 1.0, -2.0, 4.0]), y, b, 2, -1, -1)
            if np.allclose(K @ x, b, rtol=1e-14, atol=0) and np.allclose(K.T @ y, b, rtol=1e-14, atol=0):
                fn = gauss_seidel
        except Exception:  # noqa: BLE001 -- no PyAMG, or a binding with another signature
            fn = None
        _SWEEPS.append(fn)
    return _SWEEPS[0] is not None


_INDEXED: list = []


def compiled_indexed_sweep():
    """PyAMG's compiled ``gauss_seidel_indexed(indptr, indices, data, x, b, rows, start, stop, step)`` (one sweep
    over the rows ``rows[start], rows[start + step], ...``, ``x`` in place: a triangular solve in a permuted order
    without permuting the matrix), or None where it or :func:`compiled_sweep` does not work (checked once per
    process, on a lower triangle numbered backwards)."""
    if not _sweeps_work():
        return None
    if not _INDEXED:
        fn = None
        try:
            indexed = _pyamg_sweep("gauss_seidel_indexed")
            # [[4, -2, 0.25], [0, 1, -0.5], [0, 0, 2]] x = b: row 2 first, then 1, then 0
            x, b = np.zeros(3), np.array([3.0, 2.0, 1.0])
            indexed(np.array([0, 3, 5, 6], dtype=np.intc), np.array([0, 1, 2, 1, 2, 2], dtype=np.intc),
                    np.array([4.0, -2.0, 0.25, 1.0, -0.5, 2.0]), x, b, np.array([2, 1, 0], dtype=np.intc), 0, 3, 1)
            K = np.array([[4.0, -2.0, 0.25], [0.0, 1.0, -0.5], [0.0, 0.0, 2.0]])
            if np.allclose(K @ x, b, rtol=1e-14, atol=0):
                fn = indexed
        except Exception:  # noqa: BLE001 -- a binding without it or with another signature
            fn = None
        _INDEXED.append(fn)
    return _INDEXED[0]


_GSTRS: list = []


def _gstrs_works() -> bool:
    """Whether SciPy's private ``gstrs`` binding solves as :class:`Triangle` calls it (checked once)."""
    if not _GSTRS:
        ok = False
        try:
            from scipy.sparse.linalg._dsolve import _superlu

            K = sp.csc_matrix(np.array([[1.0, 0.0, 0.0], [-0.5, 1.0, 0.0], [0.25, -2.0, 1.0]]))
            b = np.array([1.0, 2.0, 3.0])
            args = (K.nnz, K.data, K.indices.astype(np.intc), K.indptr.astype(np.intc), 3, 0, np.zeros(0),
                    np.zeros(0, dtype=np.intc), np.zeros(4, dtype=np.intc))
            x, info = _superlu.gstrs("N", 3, *args, b.copy())
            y, info2 = _superlu.gstrs("T", 3, *args, b.copy())
            ok = (not info and not info2 and np.allclose(K @ x, b, rtol=1e-14, atol=0)
                  and np.allclose(K.T @ y, b, rtol=1e-14, atol=0))
        except Exception:  # noqa: BLE001 -- a SciPy without this binding, or with another signature
            ok = False
        _GSTRS.append(ok)
    return _GSTRS[0]


def scale_rows(A: sp.spmatrix, scale: np.ndarray) -> None:
    """Multiply row ``i`` of the CSR matrix ``A`` by ``scale[i]``, in place.

    SciPy's compiled ``csr_scale_rows`` makes one pass over the entries with no temporary; NumPy needs the scale
    repeated once per entry first (883,729 rows and 6.2M entries, the size of the expected-reward system of
    crowds with TotalRuns=6, CrowdSize=15: 7 ms against 40 ms, and 185 ms when the 50 MB copy lands in memory
    the process has not touched before). Falls back to NumPy where the binding is missing.

    Examples
    --------
    >>> A = sp.csr_matrix([[1.0, 2.0], [0.0, 3.0]])
    >>> scale_rows(A, np.array([2.0, -1.0]))
    >>> A.toarray().tolist()
    [[2.0, 4.0], [0.0, -3.0]]
    """
    scale = np.ascontiguousarray(scale, dtype=A.data.dtype)
    try:
        from scipy.sparse._sparsetools import csr_scale_rows
    except ImportError:  # pragma: no cover - a SciPy without the binding
        csr_scale_rows = None
    if csr_scale_rows is not None and A.data.flags.c_contiguous:
        csr_scale_rows(A.shape[0], A.shape[1], A.indptr, A.indices, A.data, scale)
    else:  # pragma: no cover
        A.data *= np.repeat(scale, np.diff(A.indptr))


def csr_part(A: sp.csr_matrix, rows: np.ndarray, keep: np.ndarray, scale: float = 1.0) -> sp.csr_matrix:
    """The entries of the canonical CSR ``A`` where ``keep`` (one flag per stored entry; ``rows`` their rows), times
    ``scale``: a triangle or any other part cut by one comparison, without SciPy's round trip through COO (the
    four triangles of a 4,600-state generator: 0.9 ms by ``sp.tril``, ``sp.triu`` and differences)."""
    indptr = np.zeros(A.shape[0] + 1, dtype=A.indptr.dtype)
    np.cumsum(np.bincount(rows[keep], minlength=A.shape[0]), out=indptr[1:])
    out = sp.csr_matrix((A.data[keep] * scale if scale != 1.0 else A.data[keep], A.indices[keep], indptr),
                        shape=A.shape)
    out.has_canonical_format = True
    return out


def _triangles(A: sp.spmatrix, *, upper: bool = True) -> tuple:
    """``(D + L, D + U)`` of ``A`` by rows (the second ``None`` unless ``upper``), cut by :func:`csr_part`."""
    A = sp.csr_matrix(A, dtype=float)
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    rows = np.repeat(np.arange(A.shape[0], dtype=A.indices.dtype), np.diff(A.indptr))
    lower = csr_part(A, rows, A.indices <= rows)
    return lower, (csr_part(A, rows, A.indices >= rows) if upper else None)


class GaussSeidel:
    """The forward Gauss-Seidel preconditioner ``M = D + L`` of ``A`` (its lower triangle).

    ``solve(r)`` returns ``M^-1 r``, ``solve(r, trans=True)`` ``M^-T r``, both by one sweep
    over ``M`` (:class:`Triangle`: no factorisation, no fill, no pivoting).
    """

    def __init__(self, A: sp.spmatrix):
        M, _ = _triangles(A, upper=False)
        if np.any(M.diagonal() == 0):
            raise ZeroDivisionError("Gauss-Seidel needs a nonzero diagonal")
        self.lu = Triangle(M, lower=True)

    #: how the solvers' info names it
    name = "gauss-seidel"

    def solve(self, r: np.ndarray, trans: bool = False) -> np.ndarray:
        return self.lu.solve(r, trans="T" if trans else "N")


class SymmetricGaussSeidel:
    """The symmetric Gauss-Seidel preconditioner ``M = (D + L) D^-1 (D + U)`` of ``A``.

    One forward and one backward sweep (SSOR with ``omega = 1``; Saad, *Iterative
    Methods for Sparse Linear Systems*, 2nd ed. 2003, sec. 10.2.1): ``M^-1 r =
    (D + U)^-1 D (D + L)^-1 r`` and ``M^-T r = (D + L)^-T D (D + U)^-T r``, by sweeps over
    the two triangles (:class:`Triangle`; together about one product with ``A``). Twice
    the cost of :class:`GaussSeidel` per application, but BiCGSTAB needs far fewer
    iterations on the chains of PRISM's case studies (measured, steady state to the
    rounding level: FMS n = 4, 35,910 states, 182 -> 22 iterations and 0.46 -> 0.19 s
    with the certificate; Kanban t = 3, 58,400 states, 132 -> 28 and 0.92 -> 0.22 s).

    Examples
    --------
    >>> A = sp.csr_matrix([[4.0, -1.0, 0.0], [-2.0, 5.0, -1.0], [0.0, -3.0, 6.0]])
    >>> D, L, U = np.diag(A.diagonal()), np.tril(A.toarray()), np.triu(A.toarray())
    >>> M = L @ np.linalg.inv(D) @ U
    >>> r = np.array([1.0, 2.0, 3.0])
    >>> bool(np.allclose(SymmetricGaussSeidel(A).solve(r), np.linalg.solve(M, r), rtol=1e-14))
    True
    >>> bool(np.allclose(SymmetricGaussSeidel(A).solve(r, trans=True), np.linalg.solve(M.T, r), rtol=1e-14))
    True
    """

    #: how the solvers' info names it
    name = "symmetric-gauss-seidel"

    def __init__(self, A: sp.spmatrix):
        lower, upper = _triangles(A)  # swept by rows (Triangle)
        self.d = np.asarray(A.diagonal(), dtype=float)
        if np.any(self.d == 0):
            raise ZeroDivisionError("Gauss-Seidel needs a nonzero diagonal")
        self.lower, self.upper = Triangle(lower, lower=True), Triangle(upper, lower=False)

    def solve(self, r: np.ndarray, trans: bool = False) -> np.ndarray:
        if trans:
            return self.lower.solve(self.d * self.upper.solve(r, trans="T"), trans="T")
        return self.upper.solve(self.d * self.lower.solve(r))


class Jacobi:
    """The diagonal (Jacobi) preconditioner ``M = D`` of ``A``: no set-up, one product a solve.

    Examples
    --------
    >>> A = sp.csr_matrix([[4.0, -1.0], [-2.0, 5.0]])
    >>> Jacobi(A).solve(np.array([4.0, 10.0])).tolist()
    [1.0, 2.0]
    """

    #: how the solvers' info names it
    name = "jacobi"

    def __init__(self, A: sp.spmatrix):
        d = np.asarray(A.diagonal(), dtype=float)
        if np.any(d == 0):
            raise ZeroDivisionError("Jacobi needs a nonzero diagonal")
        self.inverse = 1.0 / d

    def solve(self, r: np.ndarray, trans: bool = False) -> np.ndarray:
        return r * self.inverse


class JacobiFirst:
    """Jacobi for the first :data:`JACOBI_ITERATIONS` iterations, then :class:`SymmetricGaussSeidel`.

    A symmetric Gauss-Seidel step costs about two products with ``A`` (a product and the
    two triangles' sweeps), and its set-up two copies of the matrix; on systems where Jacobi
    converges as fast (chains that mix
    quickly, such as Herman's ring: 17 Jacobi against 23 Gauss-Seidel iterations, 0.06 s
    against 0.30 s on 8,192 states and 1.6M transitions) that is wasted. Where Jacobi is
    slow (the stiff steady states of PRISM's CTMC case studies), :func:`solve_iterative`
    goes on from its last iterate with the Gauss-Seidel sweeps, which it builds then; the
    trial costs at most ``2 * JACOBI_ITERATIONS`` products. Once upgraded it stays so
    (the certificate's solve reuses it).
    """

    def __init__(self, A: sp.spmatrix):
        self.A = A
        self.jacobi = Jacobi(A)
        self.current = self.jacobi

    @property
    def name(self) -> str:
        return self.current.name

    @property
    def trying(self) -> bool:
        return self.current is self.jacobi

    def upgrade(self) -> None:
        if self.current is self.jacobi:
            self.current = SymmetricGaussSeidel(self.A)

    def solve(self, r: np.ndarray, trans: bool = False) -> np.ndarray:
        return self.current.solve(r, trans)


#: iterations of Jacobi-preconditioned BiCGSTAB before :class:`JacobiFirst` changes to Gauss-Seidel
JACOBI_ITERATIONS = 20
#: ... unless the trial's mean rate of residual reduction would reach the target within this many more
#: iterations (:func:`_jacobi_extension`)
JACOBI_EXTENSION = 20


def _jacobi_extension(start: float, res: float, iterations: int, rtol: float) -> int | None:
    """Further Jacobi iterations for a trial that has almost converged, or ``None`` (then Gauss-Seidel).

    The trial's residual fell from ``start`` to ``res`` in ``iterations``; at that mean rate the target
    ``rtol`` takes ``k`` more, and when ``k <= JACOBI_EXTENSION`` the trial goes on for ``k + 2``: on a chain
    that mixes fast that is cheaper than the Gauss-Seidel sweeps' set-up (two copies of the matrix) and their
    iterations, each about three Jacobi ones (Herman's ring of 15 processes, 14M transitions: 20 Jacobi
    iterations reached 1e-12 of the 1e-13 asked for, and the set-up took 0.47 s, 20 Jacobi iterations' time).
    The stiff steady states of PRISM's CTMCs reduce the residual a few percent an iteration and never qualify.
    """
    if not (0.0 < res < start and math.isfinite(start) and iterations > 0 and rtol > 0.0):
        return None
    rate = math.log(res / start) / iterations  # < 0
    if res <= rtol:
        return 2
    k = math.log(rtol / res) / rate
    return int(math.ceil(k)) + 2 if k <= JACOBI_EXTENSION else None

#: the preconditioner of BiCGSTAB (:func:`solve_iterative`, the reachability and steady-state systems)
PRECONDITIONER = JacobiFirst


_THREADPOOLS: list = []


#: Vectors of at most this length never reach BLAS's threads, so no limit is set for them: finding the
#: loaded libraries costs 7 ms once per process (threadpoolctl's import and its scan of the shared
#: objects), a fifth of a 623-state FMS model's build and check. Measured with one core kept busy:
#: SciPy's BiCGSTAB on a tridiagonal system ran at the same speed with and without the limit up to
#: n = 10,000 (0.97-1.01x) and 2.7x slower without it at n = 12,000 (OpenBLAS threads its level-1
#: calls, the dot products of the loop, above 10,000 entries).
BLAS_THREADED_LENGTH = 10_000


def _blas_single_thread(n: int | None = None):
    """One BLAS thread for the vector operations of a Krylov loop of length ``n`` (on a busy
    2-core machine OpenBLAS threads made BiCGSTAB 23x slower: 7.2 s instead of 0.31 s for
    50 iterations); nothing to do when ``n <= BLAS_THREADED_LENGTH``.

    The loaded BLAS libraries are found once per process (a ``ThreadpoolController``; a new
    ``threadpool_limits`` scans the process's shared objects each time, 2 ms a call, twice
    a stationary solve); by the first Krylov solve NumPy's and SciPy's are loaded.
    """
    if n is not None and n <= BLAS_THREADED_LENGTH:
        import contextlib

        return contextlib.nullcontext()
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a dependency
        import contextlib

        return contextlib.nullcontext()
    if not _THREADPOOLS:
        _THREADPOOLS.append(_blas_controller(ThreadpoolController))
    return _THREADPOOLS[0].limit(limits=1, user_api="blas")


def _blas_controller(base):
    """A ``ThreadpoolController`` over the loaded libraries whose names say BLAS (``blas``, ``mkl``, ``blis``):
    threadpoolctl resolves the real path of every shared object of the process (96 here, 3.2 ms) to find
    them; the names of NumPy's and SciPy's OpenBLAS (``libscipy_openblas*``) say so (1.6 ms). Falls back to
    the full scan if threadpoolctl's internals differ, or if the names find nothing."""
    import os
    import re

    pattern = re.compile(r"blas|mkl|blis", re.IGNORECASE)

    class _Blas(base):
        def _find_libraries_with_linux(self):
            with open("/proc/self/maps", "rb") as fh:
                maps = fh.read()
            for path in set(self._PATH_RE.findall(maps)):
                path = path.decode("utf-8")
                if pattern.search(os.path.basename(path)):
                    self._make_controller_from_path(path)

    try:
        controller = _Blas()
        if any(c.user_api == "blas" for c in controller.lib_controllers):
            return controller
    except Exception:  # noqa: BLE001 - threadpoolctl's private layout changed: its own scan
        pass
    return base()


def solve_iterative(A: sp.spmatrix, b: np.ndarray, *, x0: np.ndarray | None = None, rtol: float = 1e-13,
                    maxiter: int | None = None, trans: bool = False, prec=None,
                    accept: float | None = None) -> tuple[np.ndarray, dict]:
    """BiCGSTAB with a Gauss-Seidel preconditioner on ``A x = b`` (or ``A^T x = b``).

    ``prec`` (a :class:`SymmetricGaussSeidel` or :class:`GaussSeidel` of ``A``) defaults
    to :data:`PRECONDITIONER`.

    With a :class:`JacobiFirst` preconditioner (the default) the first
    :data:`JACOBI_ITERATIONS` iterations are Jacobi's, and ``maxiter`` bounds the
    Gauss-Seidel iterations that follow when those did not converge.

    Iterates towards ``||b - A x|| <= rtol ||b||``; when it stops short of that (a
    breakdown or stagnation at the rounding level) the answer still counts as converged
    if ``||b - A x|| <= accept ||b||`` (default ``accept = rtol``).

    Returns
    -------
    x : ndarray
    info : dict
        ``iterations``, ``status`` (0 when ``||b - A x|| <= rtol ||b||``), ``seconds``.
    """
    t0 = time.perf_counter()
    n = A.shape[0]
    prec = prec or PRECONDITIONER(A)
    Aop = A.T.tocsr() if trans else sp.csr_matrix(A)
    M = spla.LinearOperator((n, n), lambda r: prec.solve(r, trans=trans), dtype=float)
    count = [0]

    def cb(_):
        count[0] += 1

    limit = maxiter or max(1000, n // 10)
    restarts = 0
    bnorm = float(np.linalg.norm(b)) or 1.0
    best, best_res = None, math.inf
    trial = getattr(prec, "trying", False)  # a JacobiFirst still on Jacobi: a bounded run first
    trial_stop = JACOBI_ITERATIONS
    chunk_res = math.inf
    with _blas_single_thread(n), np.errstate(over="ignore", invalid="ignore"):
        start_res = 1.0
        if trial and x0 is not None:
            start_res = float(np.linalg.norm(b - Aop @ x0)) / bnorm
        while True:
            stop = min(limit, trial_stop) if trial else min(limit, count[0] + CHUNK_ITERATIONS)
            x, status = spla.bicgstab(Aop, b, x0=x0, M=M, rtol=rtol, atol=0.0, maxiter=max(stop - count[0], 1),
                                      callback=cb)
            res = float(np.linalg.norm(b - Aop @ x)) / bnorm if np.all(np.isfinite(x)) else math.inf
            if status == 0 and not res <= FALSE_CONVERGENCE_FACTOR * max(rtol, accept or 0.0):
                status = FALSE_CONVERGENCE  # the recurrence's residual, not the true one, met the target
            improved = res < 0.5 * best_res
            if res < best_res:
                best, best_res = x, res
            if trial and status != 0 and trial_stop == JACOBI_ITERATIONS and count[0] < limit:
                more = _jacobi_extension(start_res, res, count[0], rtol)
                if more is not None:
                    trial_stop = count[0] + more
                    x0 = best
                    continue
            if trial and status != 0:
                # Jacobi did not converge within its trial: on with Gauss-Seidel from the best iterate, with
                # the whole iteration limit (the trial's iterations cost about a third of a Gauss-Seidel one)
                trial = False
                prec.upgrade()
                x0 = best
                limit += count[0]
                continue
            if status > 0 and count[0] < limit:
                # a chunk ended short of the target: on from its iterate while the chunks still reduce the residual
                if res <= STAGNATION * chunk_res:
                    chunk_res = res
                    x0 = x
                    continue
                break  # stagnated: the caller's fallback, not the rest of the iteration limit
            # a breakdown (status < 0: the shadow residual became orthogonal) is cured by restarting from
            # the current iterate, which renews the shadow residual (van der Vorst 1992, sec. 4); restarts
            # stop when they no longer halve the residual (stagnation at the rounding level)
            if status >= 0 or not improved or restarts >= MAX_RESTARTS or count[0] >= limit:
                break
            restarts += 1
            x0 = x
    if best is not None:
        x = best
        if status != 0 and best_res <= (rtol if accept is None else max(accept, rtol)):
            status = 0  # short of rtol at the rounding level, but within what was asked
    return x, {"iterations": int(count[0]), "status": int(status), "seconds": time.perf_counter() - t0,
               "preconditioner": prec.name, "restarts": restarts, "relative_residual": best_res}


#: :func:`error_bound` takes the answer itself as its certificate vector when ``b > 0`` and ``max b`` is at most
#: this times ``min b`` (the bound is then at most this much looser than with ``v = A^-1 1``, and no solve)
SELF_CERTIFICATE_SPREAD = 16.0
#: the residuals of :func:`error_bound`'s solve of ``A v = 1``: the first, and the one it goes on to (from there)
#: when that ``v`` is no certificate (``A v >= g 1`` fails for every ``g > 0``). Any such ``v`` gives a rigorous
#: bound, ``(||r||_inf / g) v``, checked by one product; a looser one a slightly larger bound (``g`` a little below
#: 1, ``v`` within the residual of ``A^-1 1``)
BOUND_VECTOR_RTOL = (1e-2, 1e-6)


def error_bound(A: sp.spmatrix, x: np.ndarray, b: np.ndarray, *, prec=None,
                trans: bool = False, v: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Componentwise bound on ``|x* - x|`` for the M-matrix system ``A x = b`` (module docstring).

    Parameters
    ----------
    A : (n, n) sparse nonsingular M-matrix
    x, b : (n,) arrays
        The approximate solution and the right-hand side.
    prec : SymmetricGaussSeidel or GaussSeidel, optional
        Reused for the solve of ``A v = 1``.
    trans : bool
        Bound for ``A^T x = b`` instead (then ``v`` solves ``A^T v = 1``).
    v : (n,) array, optional
        A positive vector with ``A v`` positive (else computed).

    Returns
    -------
    bound : (n,) ndarray
        ``(||r||_inf / g) v``, or ``inf`` everywhere when no certificate was found
        (``A v >= g 1`` with ``g > 0`` failed).
    info : dict
        ``certificate_gamma`` (``g``), ``residual_inf`` (``||r||_inf``).

    Examples
    --------
    >>> A = sp.csr_matrix([[2.0, -1.0], [-1.0, 2.0]])
    >>> b = np.array([1.0, 1.0]); x = np.array([1.0 + 1e-9, 1.0])
    >>> bound, _ = error_bound(A, x, b)
    >>> bool(np.all(np.abs(x - 1.0) <= bound))
    True
    """
    Aop = A.T.tocsr() if trans else sp.csr_matrix(A)
    n = A.shape[0]
    r = b - Aop @ x
    rinf = float(np.abs(r).max(initial=0.0))
    def gamma(v):
        v = np.atleast_1d(np.asarray(v, dtype=float))
        v = np.where(np.isfinite(v) & (v > 0), v, 0.0)
        return v, (float((Aop @ v).min(initial=math.inf)) if n else math.inf)

    itself = None
    if v is None and n and np.all(np.isfinite(x)) and np.all(x > 0) \
            and 0 < float(np.min(b)) and float(np.max(b)) <= SELF_CERTIFICATE_SPREAD * float(np.min(b)):
        # a right-hand side of positive entries of one order of magnitude (an expected number of steps: all 1):
        # the answer itself certifies, as A x = b - r > 0, and its bound is at most b_max / b_min times the one
        # of v = A^-1 1, without that solve (a Herman ring of 32,768 states: 1.05 s, as long as the system's)
        itself = gamma(x)
    if itself is not None and itself[1] > 0:
        v, g = itself
    elif v is None:
        # any positive v with A v > 0 certifies: an iterative solve of A v = 1, loose first (herman N=11: its LU
        # filled to 0.24 s where the system itself took 0.007 s by BiCGSTAB), the LU when that fails and is small
        v, g = None, -math.inf
        for rtol in BOUND_VECTOR_RTOL:
            w, _ = solve_iterative(A, np.ones(n), x0=v, rtol=rtol, trans=trans, prec=prec, maxiter=max(200, n // 50))
            v, g = gamma(w)
            if g > 0 and np.all(v > 0):
                break
        if not (g > 0 and np.all(v > 0)) and n <= CERTIFICATE_LU_MAX:
            v, g = gamma(spla.spsolve(Aop.tocsc(), np.ones(n)))
    else:
        v, g = gamma(v)
    if not (g > 0 and np.all(v > 0)):
        return np.full(n, math.inf), {"certificate_gamma": g if math.isfinite(g) else None, "residual_inf": rinf}
    return (rinf / g) * v, {"certificate_gamma": g, "residual_inf": rinf}


def block_triangular_order(A: sp.spmatrix, accept=None) -> tuple[np.ndarray, np.ndarray] | None:
    """An order of the unknowns in which ``A`` is block lower triangular by its strongly connected components.

    Returns ``(order, sizes)`` (``sizes`` of the components, in the order they take in
    ``order``) or ``None`` when ``A``'s graph is one component. The components come from
    :func:`scipy.sparse.csgraph.connected_components` (Pearce's algorithm numbers them
    as they complete, the targets of a state's edges first, so that the order of the
    labels is a topological order of the components: the transient part of many
    DTMCs, where a counter only grows, splits into thousands of small components); the
    order is verified on every entry, so a different numbering gives ``None``, never a
    wrong order (Duff & Reid, "An implementation of Tarjan's algorithm for the block
    triangularization of a matrix", ACM TOMS 4, 1978, for the use in sparse solvers).
    ``accept(sizes)``, when given, is asked first (the sizes unordered) and ``False`` gives
    ``None`` before the verification (which reads every entry: a third of a second on a
    Herman ring of 14M transitions whose largest component rules the order out anyway).

    Examples
    --------
    >>> A = sp.csr_matrix([[1.0, -0.5, 0.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 1.0]])  # 0 -> 1, 2 -> 0
    >>> order, sizes = block_triangular_order(A)
    >>> P = A[order][:, order].toarray()
    >>> bool(np.allclose(P, np.tril(P))), sizes.tolist()
    (True, [1, 1, 1])
    >>> block_triangular_order(sp.csr_matrix([[1.0, -0.5], [-0.5, 1.0]])) is None  # one component
    True
    """
    from scipy.sparse.csgraph import connected_components

    n = A.shape[0]
    k, labels = connected_components(A, directed=True, connection="strong")
    if k <= 1:
        return None
    sizes = np.bincount(labels, minlength=k)
    if accept is not None and not accept(sizes):
        return None
    C = sp.csr_matrix(A)
    found = label_order(labels, np.repeat(labels, np.diff(C.indptr)), labels[C.indices])
    if found is None:
        return None
    order, ascending = found
    return order, (sizes if ascending else sizes[::-1].copy())


def label_order(labels: np.ndarray, row_labels: np.ndarray, column_labels: np.ndarray) -> tuple | None:
    """``(order, ascending)``: the unknowns sorted by ``labels`` in the direction in which every entry's row
    label (``row_labels``, one per entry) is at or after its column label (``column_labels``), so that the
    matrix is block lower triangular in that order; None when neither direction holds."""
    if np.all(row_labels >= column_labels):
        return np.argsort(labels, kind="stable"), True
    if np.all(row_labels <= column_labels):
        return np.argsort(-labels, kind="stable"), False
    return None


def _permuted(A: sp.csr_matrix, order: np.ndarray) -> sp.csr_matrix:
    """``A[order][:, order]`` for a permutation ``order``: its rows selected and its columns relabelled in place of
    SciPy's second fancy index (40,041 unknowns: 1.7 ms against 3.9 ms)."""
    pos = np.empty(order.size, dtype=A.indices.dtype)
    pos[order] = np.arange(order.size, dtype=A.indices.dtype)
    R = A[order]
    return sp.csr_matrix((R.data, pos[R.indices], R.indptr), shape=A.shape)


def block_lu_prediction(sizes: np.ndarray, nnz: int) -> "LUPrediction":
    """The fill and work of an LU in block triangular order, for diagonal blocks of ``sizes`` and ``nnz`` entries:
    at most ``sum s^2 + nnz s_max`` entries and ``sum s^3 + 2 nnz s_max^2`` flops (:func:`_solve_block_triangular`)."""
    smax = float(sizes.max())
    sz = sizes.astype(float)
    fill = float((sz ** 2).sum() + nnz * smax)
    flops = float((sz ** 3).sum() + 2.0 * nnz * smax ** 2)
    return LUPrediction(fill, flops, "block triangular",
                        f"{sizes.size} strongly connected components, the largest {int(smax)} states")


def block_lu_pays(sizes: np.ndarray, nnz: int, budget: float | None) -> bool:
    """Whether the LU of :func:`block_lu_prediction` fits ``budget`` (bytes; None: no limit) and is predicted to be
    no slower than :data:`DIRECT_PREFERENCE` times an iterative solve of a system of ``nnz`` entries (:func:`choose`'s
    comparison)."""
    pred = block_lu_prediction(sizes, nnz)
    iterative_seconds = EXPECTED_ITERATIONS * 8.0 * nnz / ITERATIVE_FLOPS_PER_SECOND + \
        EXPECTED_ITERATIONS * ITERATION_OVERHEAD_SECONDS
    return not ((budget is not None and pred.bytes > budget) or pred.seconds > DIRECT_PREFERENCE * iterative_seconds)


def _solve_block_triangular(A: sp.csr_matrix, b: np.ndarray, *, asked: str, blocks=None):
    """``A x = b`` by a sparse LU in the block triangular order of :func:`block_triangular_order`, when cheap.

    In that order, without pivoting (an M-matrix needs none: its pivots stay positive),
    elimination fills only inside the diagonal blocks and, in a row of a later block,
    across the columns of the earlier blocks it touches: at most ``sum s^2 + nnz(A) s_max``
    entries and ``sum s^3 + 2 nnz(A) s_max^2`` flops for components of sizes ``s``. It is
    taken when that bound fits the memory budget and its predicted time is below an
    iterative solve's (:func:`choose`'s comparison). Measured on the crowds DTMC
    (TotalRuns=5, CrowdSize=10: a system of 25,103 unknowns in 8,515 components of at
    most 30): an LU of 0.23M entries in 0.016 s, where BiCGSTAB took 0.37 s (the
    envelope order predicted an LU of 66M entries). Returns ``None`` otherwise.

    ``blocks``: an ``(order, sizes)`` the caller knows to be a block triangular order of ``A`` (the chain's own
    strong components in a topological order, restricted to the unknowns: :meth:`_Predecessors.block_order
    <exactq.solvers.reachability._Predecessors.block_order>`), taken when cheap, without another search for
    ``A``'s components. With every block of one state, ``A`` is solved by sweeps over its rows in that order
    (:func:`compiled_indexed_sweep`), not permuted first. An ``order`` that is the identity says that the caller
    cut ``A`` in block order already: it is factorised as it stands, with no permuted copy.
    """
    t0 = time.perf_counter()
    n = A.shape[0]
    budget = memory_budget()

    def cheap(sizes) -> bool:
        return block_lu_pays(sizes, A.nnz, budget)

    found = blocks if blocks is not None and cheap(blocks[1]) else None
    if found is None:
        found = block_triangular_order(A, accept=cheap)
    if found is None:
        return None
    order, sizes = found
    smax = float(sizes.max())
    pred = block_lu_prediction(sizes, A.nnz)
    indexed = compiled_indexed_sweep() if smax == 1 else None
    if indexed is not None:
        # acyclic: one sweep over A's rows in the topological order solves A x = b exactly, with A as it is (nand
        # N=30, K=3, P=? [F "reliable"], 336,854 unknowns: no permuted copy of its 2.7M entries, 27 ms)
        R = A if A.has_canonical_format else sp.csr_matrix((A.data.copy(), A.indices.copy(), A.indptr.copy()),
                                                           shape=A.shape)
        R.sum_duplicates()  # (the sweep takes the last diagonal entry of a row, not their sum)
        if np.any(R.diagonal() <= 0):
            return None
        arrays = sweep_arrays(R)
        rows = order.astype(np.intc)
        x, v = np.zeros(n), np.zeros(n)
        with np.errstate(all="ignore"):
            indexed(*arrays, x, np.ascontiguousarray(b, dtype=float), rows, 0, n, 1)
            indexed(*arrays, v, np.ones(n), rows, 0, n, 1)
        lu_nnz = int(R.nnz)
        return _block_answer(A, b, x, v, pred, lu_nnz, asked, t0)
    if smax == 1:
        # every component one state: in the reverse order A is upper triangular, and Triangle sweeps its CSR
        # backwards with no conversion and no copy: less fresh memory, which a fresh process pays for in page
        # faults (nand N=30, K=3, R=? [F fin], 336,854 unknowns, in fresh processes, median of 3: 0.211 s against
        # 0.234 s in the lower order, with SuperLU's solve on the transposed CSC then)
        order = order[::-1]
    presorted = order.size == n and bool(np.all(order == np.arange(n)))  # cut in this order by the caller
    T = A if presorted else _permuted(A, order)
    if np.any(T.diagonal() <= 0):
        return None  # not an M-matrix system with a positive diagonal: the general path says what is wrong
    with np.errstate(all="ignore"):
        x = np.empty(n)
        v = np.empty(n)
        if smax == 1:
            # T itself is triangular, solved by one sweep over it (Triangle; nand N=20, K=2, 46,129 unknowns, both
            # right-hand sides: 0.005 s with SuperLU's triangular solve, against 0.011 s by spsolve_triangular and
            # 0.024 s for SuperLU's factorisation of the same triangle)
            lu_nnz = int(T.nnz)
            tri = Triangle(T, lower=False, own=not presorted)  # (T's arrays are _permuted's own copies)
            x[order], v[order] = tri.solve(b[order]), tri.solve(np.ones(n))
        else:
            # batched inverses of the diagonal blocks and a unit triangular solve (stop 28) were slower than this
            # LU without pivoting in the block order: crowds TotalRuns=5, CrowdSize=10, 40,041 unknowns in blocks
            # of at most 10: 0.033 s against 0.018 s. Panels and relaxed supernodes of one column (SuperLU's
            # defaults group columns for dense fill, which blocks of a few states never have): crowds TotalRuns=6,
            # CrowdSize=15, 883,729 unknowns in blocks of at most 15, 519 -> 284 ms; TotalRuns=5, 213,181
            # unknowns, 128 -> 69 ms; the general LUs (tandem, FMS, polling) gain nothing by it. (SuperLU wants
            # relax <= panel_size.)
            # T's rows are T^T's columns: T^T is factorised as it stands (block upper triangular, the same fill)
            # and T solved by the transposed solves, with no conversion of T to columns (crowds 6x15: both
            # solves 69 -> 45 ms, and the conversion's copy saved)
            Tt = sp.csc_matrix((T.data, T.indices, T.indptr), shape=T.shape)
            lu = spla.splu(Tt, permc_spec="NATURAL", diag_pivot_thresh=0.0, panel_size=1, relax=1,
                           options=dict(SymmetricMode=True))
            x[order] = lu.solve(b[order], trans="T")
            v[order] = lu.solve(np.ones(n), trans="T")  # the certificate's vector from the same factors
            lu_nnz = int(lu.nnz)
    return _block_answer(A, b, x, v, pred, lu_nnz, asked, t0)


def _block_answer(A, b, x, v, pred, lu_nnz: int, asked: str, t0: float):
    """:func:`_solve_block_triangular`'s answer: ``x`` with the bound certified by ``v = A^-1 1``, or None when
    either is not finite."""
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(v))):
        return None
    details = {"name": "direct", **pred.as_dict(),
               "why": ("asked for; " if asked == "direct" else "") + f"block triangular by strongly connected "
                      f"components (predicted LU {format_bytes(pred.bytes)}, ~{pred.seconds:.2g} s)",
               "seconds": time.perf_counter() - t0, "lu_nnz": lu_nnz}
    bound, binfo = error_bound(A, x, b, v=v)
    info = {"solver": {**details, **binfo}, "error_bound": float(bound.max(initial=0.0)),
            "residual": binfo["residual_inf"], "bound_vector": bound}
    return x, info


def solve_mmatrix(A: sp.spmatrix, b: np.ndarray, *, solver: str = "auto", rtol: float = 1e-13,
                  coords=None, jumps=None, what: str = "the linear system",
                  maxiter: int | None = None, blocks=None) -> tuple[np.ndarray, dict]:
    """Solve the nonsingular M-matrix system ``A x = b`` by the predicted-cheapest solver.

    Parameters
    ----------
    A : (n, n) sparse matrix
    b : (n,) array
    solver : {"auto", "direct", "bicgstab"}
    rtol : float
        Relative residual target of the iterative solver.
    what : str
        Names the system in messages.
    maxiter : int, optional
        Iteration cap of BiCGSTAB (default: :func:`solve_iterative`'s).
    blocks : (order, sizes), optional
        A block triangular order of ``A`` known to the caller (:func:`_solve_block_triangular`).

    Returns
    -------
    x : (n,) ndarray
    info : dict
        ``solver`` (``name``, ``why``, the prediction, ``iterations``), ``error_bound``
        (``max |x* - x|`` bound; for ``direct`` too, from the same certificate) and
        ``residual``.

    Raises
    ------
    ConvergenceError
        When the iterative solver fails and the LU cannot be afforded, or every solver
        gives a non-finite answer.

    Examples
    --------
    >>> A = sp.csr_matrix([[1.0, -0.5], [-0.25, 1.0]])
    >>> x, info = solve_mmatrix(A, np.array([0.5, 0.75]))
    >>> bool(np.allclose(x, np.linalg.solve(A.toarray(), [0.5, 0.75]))), info["solver"]["name"]
    (True, 'direct')
    """
    from exactq.errors import ConvergenceError

    n = A.shape[0]
    found = None
    if solver in ("auto", "direct") and n > SMALL_SYSTEM:
        out = _solve_block_triangular(sp.csr_matrix(A), np.asarray(b, dtype=float), asked=solver, blocks=blocks)
        if out is not None:
            return out
        A = sp.csr_matrix(A)
        geometric = coords is not None and jumps is not None and np.any(np.asarray(jumps) > 0)
        found = None if geometric else _feedback_set(A)  # (predict_lu dissects a chain with coordinates instead)
        h = -1 if found is None else int(found[0].sum())
        pred = None if found is None else _feedback_prediction(A, found)
        if pred is not None and h <= BORDERED_MAX_STATES:
            # h + 2 triangular solves, fewer than BiCGSTAB's first two iterations and its certificate make
            details = {**pred.as_dict(), "why": ("asked for; " if solver == "direct" else "") +
                       f"{h} feedback state{'s' if h != 1 else ''}: {h + 2} triangular solves"}
            out = _solve_bordered(A, np.asarray(b, dtype=float), details, found)
            if out is not None:
                return out
    name, details = choose(A, coords=coords, jumps=jumps, asked=solver, trial=solver == "auto", feedback=found)
    A = sp.csr_matrix(A)
    if name == "direct" and details.get("prediction", "").startswith("feedback"):
        out = _solve_bordered(A, np.asarray(b, dtype=float), details, found)
        if out is not None:
            return out
    prec = None
    tried = []
    x = v = None
    for attempt in ([name] + (["direct"] if name == "bicgstab" and solver == "auto" else [])):
        t0 = time.perf_counter()
        if attempt == "direct":
            with np.errstate(all="ignore"):
                try:
                    lu = spla.splu(A.tocsc())
                    x = lu.solve(np.asarray(b, dtype=float))
                except RuntimeError as exc:  # exactly singular: cannot happen for an M-matrix, but say it
                    tried.append(f"direct: {exc}")
                    x = None
                    continue
            v = lu.solve(np.ones(n))  # the certificate's vector from the same factors
            details.update(seconds=time.perf_counter() - t0, lu_nnz=int(lu.nnz))
        else:
            prec = PRECONDITIONER(A)
            x, it = solve_iterative(A, b, rtol=rtol, prec=prec, maxiter=details.get("trial_iterations") or maxiter)
            details.update(iterations=it["iterations"], status=it["status"], preconditioner=prec.name)
            if it["status"] != 0 or not np.all(np.isfinite(x)):
                tried.append(f"bicgstab: status {it['status']} after {it['iterations']} iterations")
                if solver == "auto":
                    pred = predict_lu(A, coords=coords, jumps=jumps)
                    budget = memory_budget()
                    if budget is not None and pred.bytes > budget:
                        raise ConvergenceError(f"{what}: BiCGSTAB did not converge ({tried[-1]}) and the sparse LU "
                                               f"would need about {format_bytes(pred.bytes)}, above the memory "
                                               f"budget {format_bytes(budget)}")
                    details["why"] += f"; {tried[-1]}, so the LU after all"
                    continue
        if x is not None and np.all(np.isfinite(x)):
            details["name"] = attempt
            break
    if x is None or not np.all(np.isfinite(x)):
        raise ConvergenceError(f"{what}: no solver gave a finite solution ({'; '.join(tried) or 'non-finite'})")
    bound, binfo = error_bound(A, x, b, prec=prec, v=v if details.get("name") == "direct" else None)
    info = {"solver": {"name": details.pop("name"), **details, **binfo},
            "error_bound": float(bound.max(initial=0.0)), "residual": binfo["residual_inf"]}
    info["bound_vector"] = bound
    return x, info


# ---------------------------------------------------------------------------------
# the registry's solvers of these systems (exactq.catalogue.register_solver)
# ---------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class LinearSystem:
    """A nonsingular M-matrix system ``A x = b`` of a chain (module docstring), as a representation.

    The unbounded reachability, expected time, expected reward and absorption systems of
    :mod:`exactq.solvers.reachability` (and through them the CSL checker's, the
    transient analysis's limits included) are solved as this representation by the
    solver the registry names (:func:`solve_linear`): ``linear`` (chosen by predicted
    cost, :func:`choose`), ``direct`` or ``bicgstab``, or a plug-in's. A solver returns
    ``(x, info)`` as :func:`solve_mmatrix` does (``info["solver"]["name"]``,
    ``info["error_bound"]``, ``info["bound_vector"]``).
    """

    A: sp.spmatrix
    b: np.ndarray
    coords: np.ndarray | None = None
    jumps: np.ndarray | None = None
    what: str = "the linear system"
    #: ``(order, sizes)``: a block triangular order of ``A`` the caller knows (the chain's strong components)
    blocks: tuple | None = None


def _system_size(system: LinearSystem) -> str | None:
    A = system.A
    if A.ndim != 2 or A.shape[0] != A.shape[1] or np.shape(system.b) != (A.shape[0],):
        return f"A must be square and b match it; got {A.shape} and {np.shape(system.b)}"
    return None


def _solve_system(system: LinearSystem, solver: str, rtol: float) -> tuple[np.ndarray, dict]:
    return solve_mmatrix(system.A, system.b, solver=solver, rtol=rtol, coords=system.coords, jumps=system.jumps,
                         what=system.what, blocks=system.blocks)


@register_solver(LinearSystem, name="linear", priority=100, family="linear", applies=_system_size,
                 doc="the M-matrix system of a reachability, expected-time or expected-reward query: a sparse LU "
                     "or preconditioned BiCGSTAB (Jacobi, then symmetric Gauss-Seidel), chosen by the LU's predicted "
                     "fill and time (each also registered by its own name)", options=("rtol",))
def solve_linear_auto(system: LinearSystem, *, rtol: float = 1e-13) -> tuple[np.ndarray, dict]:
    """:func:`solve_mmatrix` with the solver chosen by predicted cost (:func:`choose`)."""
    return _solve_system(system, "auto", rtol)


@register_solver(LinearSystem, name="direct", priority=10, family="linear", applies=_system_size,
                 doc="sparse LU (SuperLU), with the componentwise error bound from the same factors",
                 options=("rtol",))
def solve_linear_direct(system: LinearSystem, *, rtol: float = 1e-13) -> tuple[np.ndarray, dict]:
    """:func:`solve_mmatrix` with ``solver="direct"``."""
    return _solve_system(system, "direct", rtol)


@register_solver(LinearSystem, name="bicgstab", priority=10, family="linear", applies=_system_size,
                 doc="BiCGSTAB preconditioned by Jacobi, then symmetric Gauss-Seidel, with a componentwise error "
                     "bound", options=("rtol",))
def solve_linear_bicgstab(system: LinearSystem, *, rtol: float = 1e-13) -> tuple[np.ndarray, dict]:
    """:func:`solve_mmatrix` with ``solver="bicgstab"``."""
    return _solve_system(system, "bicgstab", rtol)


def linear_solvers() -> list[str]:
    """``auto`` and the names of the registry's :class:`LinearSystem` solvers (plug-ins' included).

    >>> linear_solvers()[:3]
    ['auto', 'direct', 'bicgstab']
    """
    from exactq.catalogue import solver_names

    names = [name for name in solver_names(LinearSystem, "linear") if name != "linear"]
    return ["auto"] + sorted(names, key=lambda name: (name not in LINEAR_SOLVERS,
                                                      LINEAR_SOLVERS.index(name) if name in LINEAR_SOLVERS else 0,
                                                      name))


def solve_linear(A: sp.spmatrix, b: np.ndarray, *, solver: str = "auto", rtol: float = 1e-13, coords=None,
                 jumps=None, what: str = "the linear system", blocks=None) -> tuple[np.ndarray, dict]:
    """Solve ``A x = b`` by the registry's solver named ``solver`` (``auto``: by predicted cost).

    Raises
    ------
    ModelError
        For a name that is not one of :func:`linear_solvers` (one line naming the valid ones).

    Examples
    --------
    >>> A = sp.csr_matrix([[1.0, -0.5], [-0.25, 1.0]])
    >>> x, info = solve_linear(A, np.array([0.5, 0.75]), solver="bicgstab")
    >>> bool(np.allclose(x, np.linalg.solve(A.toarray(), [0.5, 0.75]))), info["solver"]["name"]
    (True, 'bicgstab')
    """
    from exactq.catalogue import solve_representation

    valid = LINEAR_SOLVERS if solver in LINEAR_SOLVERS else linear_solvers()  # a built-in name needs no look-up
    if solver not in valid:
        raise ModelError(f"linear solver must be one of {', '.join(valid)}; got {solver!r}")
    system = LinearSystem(A, np.asarray(b, dtype=float), coords, jumps, what, blocks)
    out = solve_representation(system, using=None if solver == "auto" else solver, rtol=rtol)
    if solver in LINEAR_SOLVERS:
        return out
    return _certified(system, solver, out)


def _certified(system: LinearSystem, name: str, out) -> tuple[np.ndarray, dict]:
    """A plug-in solver's answer (``x`` or ``(x, info)``) checked finite and certified as the built-ins' are."""
    x, extra = out if isinstance(out, tuple) else (out, {})
    b = np.asarray(system.b, dtype=float)
    x = np.asarray(x, dtype=float).reshape(-1)
    if x.shape != b.shape or not np.all(np.isfinite(x)):
        raise ConvergenceError(f"{system.what}: solver {name!r} gave no finite solution of {b.size} unknowns")
    A = sp.csr_matrix(system.A)
    bound, binfo = error_bound(A, x, b)
    given = dict(extra.get("solver", extra)) if isinstance(extra, dict) else {}
    details = {k: v for k, v in given.items() if isinstance(v, (str, int, float, bool))}
    info = {"solver": {**details, "name": name, "why": "asked for", **binfo},
            "error_bound": float(bound.max(initial=0.0)), "residual": binfo["residual_inf"], "bound_vector": bound}
    return x, info
