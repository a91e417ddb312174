"""A chain's explicit files, both ways: PRISM's (``.tra``, ``.sta``, ``.lab``, ``.srew``, ``.trew``) and Matrix Market.

The PRISM layouts are those of the PRISM manual, appendix "Explicit Model Files", as
PRISM itself writes them:

``.sta``
    ``(v1,...,vn)`` then one line ``i:(x1,...,xn)`` per state, ``i`` from 0, states in
    lexicographic order of their values (``true``/``false`` for booleans).
``.tra``
    ``n m`` then ``i j x`` per transition, rows ascending: the rate (CTMC, off the
    diagonal) or the probability (DTMC, self-loops included).
``.lab``
    ``0="init" 1="deadlock" 2="name" ...`` then ``i: k1 k2 ...`` for every state with a label.
``.srew``
    ``# Reward structure "name"`` (no name for an unnamed structure), ``# State rewards``,
    ``n m`` and ``i r`` per nonzero state reward.
``.trew``
    ``# Reward structure "name"``, ``# Transition rewards``, ``n m`` and ``i j r`` per
    nonzero transition reward.

The Matrix Market export (``.mtx``) holds the generator ``Q`` of a CTMC (its diagonal
included) or the matrix ``P`` of a DTMC, rows and columns in the order of the ``.sta``
file written beside it; the labels (``.lab``) and rewards (``.srew``, ``.trew``) are
written beside it too, in PRISM's layouts, so that the ``.mtx`` reads back as the same
chain (:func:`read_mtx`).

One reward structure goes to ``PREFIX.srew`` (and ``PREFIX.trew``); several go to
``PREFIX.1.srew``, ``PREFIX.2.srew``, ... in the structures' order (their names are in
the files' first line), with ``PREFIX.K.trew`` beside the ``K``-th structure's
``.srew`` when it has transition rewards. Files of this scheme left by an earlier
export to the same prefix that the new one does not write are removed, so that a
reader never mixes two exports.

*Transition rewards.* exactq's chains keep, per state, the expected transition reward
per unit time (per step in a DTMC): ``t_i = sum_j q_ij r_ij``. That is all that
PRISM's reward properties of a Markov chain use (``S``, ``C<=t`` and ``F`` add
``t_i`` to the state reward; ``I=t`` ignores it), so the ``.trew`` file gives every
transition out of state ``i`` the same reward ``t_i / E_i`` (``E_i = sum_j q_ij``, the
exit rate; ``1`` in a DTMC): the same values for every reward property, though not the
split of the original model between its commands.

:func:`write_explicit` and :func:`write_mtx` write a chain so that PRISM
(``-importtrans m.tra -importstates m.sta -importlabels m.lab -importstaterewards
m.srew -ctmc``) or exactq (``exactq check m.tra ...``, ``exactq check m.mtx ...``)
reads it back; :func:`read_explicit`, :func:`read_mtx` and :func:`read_model` read
the files. Reading and writing are vectorised (numpy's text readers and writers),
never a Python loop over states or transitions.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from exactq.ctmc import CTMC, DTMC
from exactq.errors import FileError, ModelError, file_error
from exactq.statespace import StateSpace

__all__ = ["write_explicit", "write_mtx", "read_explicit", "read_mtx", "read_model", "ExplicitFiles",
           "chain_transitions", "reward_files"]

#: bytes a read needs per transition (the parsed triplets, the CSR matrix and its temporaries) and per state
#: and variable (the parsed .sta rows and the state space's keys); a lower bound for the budget check
READ_BYTES_PER_TRANSITION = 96
READ_BYTES_PER_STATE_VAR = 48
#: rows formatted at a time by the writers (bounds the memory of the text)
WRITE_CHUNK = 1 << 18
#: |row sum| a CTMC generator read from a .mtx may have, relative to the row's largest entry
MTX_ROW_TOL = 1e-9
_NAME = re.compile(r'^#\s*Reward structure(?:\s+"([^"]*)")?\s*$')
_TRA_KIND = re.compile(r"^#\s*Transitions\s*\((\w+)\)\s*$")


# ============================================================================ the chain, in PRISM's order
@dataclass
class _Flat:
    """What the files hold, in the order of the ``.sta`` file (lexicographic in the states)."""

    kind: str
    names: list
    states: np.ndarray
    matrix: sp.csr_matrix  # Q (diagonal included) or P
    labels: dict
    rewards: dict  # name -> (state (n,), transition (n,) or None)
    bool_vars: tuple = ()


def chain_transitions(chain) -> sp.coo_matrix:
    """The transition matrix PRISM's ``.tra`` holds: CTMC rates off the diagonal, or the DTMC's ``P``."""
    M = _tra_matrix(sp.csr_matrix(chain.P if isinstance(chain, DTMC) else chain.Q), isinstance(chain, DTMC))
    return M


def _tra_matrix(M: sp.csr_matrix, dtmc: bool) -> sp.coo_matrix:
    M = sp.coo_matrix(M if dtmc else M - sp.diags(M.diagonal()))
    M.eliminate_zeros()
    order = np.lexsort((M.col, M.row))
    return sp.coo_matrix((M.data[order], (M.row[order], M.col[order])), shape=M.shape)


def _labels_of(chain) -> dict:
    labels = dict(getattr(chain, "labels", {}) or {})
    n = chain.n_states
    if "init" not in labels:
        init = np.zeros(n, dtype=bool)
        if np.ndim(chain.initial) == 0:
            init[int(chain.initial)] = True
        else:
            init[np.asarray(chain.initial) > 0] = True
        labels["init"] = init
    if "deadlock" not in labels:
        if isinstance(chain, DTMC):
            labels["deadlock"] = np.zeros(n, dtype=bool)
        else:
            labels["deadlock"] = (sp.csr_matrix(chain.Q).getnnz(axis=1) - (chain.Q.diagonal() != 0)) == 0
    ordered = {"init": labels.pop("init"), "deadlock": labels.pop("deadlock")}
    ordered.update(labels)
    return {k: np.asarray(v, dtype=bool) for k, v in ordered.items()}


def _reward_parts(value, n: int):
    """``(state, transition or None)`` of a reward structure, a ``(state, transition)`` pair or a state vector."""
    if hasattr(value, "state"):
        state, trans = value.state, getattr(value, "transition", None)
    elif isinstance(value, tuple) and len(value) == 2:
        state, trans = value
    else:
        state, trans = value, None
    state = np.broadcast_to(np.asarray(state, dtype=float), (n,))
    if trans is not None:
        trans = np.broadcast_to(np.asarray(trans, dtype=float), (n,))
        if not np.any(trans):
            trans = None
    return state, trans


def _flatten(chain, rewards, bool_vars) -> _Flat:
    dtmc = isinstance(chain, DTMC)
    n = chain.n_states
    states = np.asarray(chain.states)
    order = np.lexsort(states.T[::-1]) if states.shape[1] else np.arange(n)
    M = sp.csr_matrix(chain.P if dtmc else chain.Q)
    labels = _labels_of(chain)
    rew = {name: _reward_parts(v, n) for name, v in dict(chain.rewards if rewards is None else rewards).items()}
    if not np.array_equal(order, np.arange(n)):  # a lumped or model-ordered chain: into PRISM's order
        M = M[order][:, order].tocsr()
        states = states[order]
        labels = {k: v[order] for k, v in labels.items()}
        rew = {k: (s[order], None if t is None else t[order]) for k, (s, t) in rew.items()}
    return _Flat("dtmc" if dtmc else "ctmc", list(chain.space.names), states, M, labels, rew, tuple(bool_vars))


# ============================================================================ writing
def write_explicit(chain, prefix: str, *, bool_vars=(), rewards: dict | None = None) -> list[str]:
    """Write ``prefix.tra``, ``prefix.sta``, ``prefix.lab`` (and the rewards' ``.srew``/``.trew``).

    Parameters
    ----------
    chain : CTMC or DTMC
    prefix : str
        Path without extension.
    bool_vars : iterable of str
        Variables printed as ``true``/``false``.
    rewards : dict, optional
        The reward structures to write (default: ``chain.rewards``, state rewards
        only): name -> a :class:`~exactq.query.RewardStructure` (state and transition
        rewards), a ``(state, transition)`` pair, or a state-reward vector. See the
        module docstring for the file names and the transition rewards.

    Returns
    -------
    list of str
        The files written.

    Warns
    -----
    UserWarning
        When the ``.tra`` cannot say what the chain is: a CTMC whose every exit rate is
        1 reads back as a DTMC unless ``kind="ctmc"`` is given (the Matrix Market
        export says its kind). Also when a transition reward sits on a state without
        a transition to carry it.

    Examples
    --------
    >>> import tempfile, os
    >>> from exactq.ctmc import CTMC
    >>> c = CTMC.from_generator([[-1.0, 1.0], [2.0, -2.0]], ["n"])
    >>> d = tempfile.mkdtemp()
    >>> files = write_explicit(c, os.path.join(d, "m"))
    >>> [os.path.basename(f) for f in files]
    ['m.tra', 'm.sta', 'm.lab']
    >>> open(files[0]).read(), open(files[1]).read()
    ('2 2\\n0 1 1\\n1 0 2\\n', '(n)\\n0:(0)\\n1:(1)\\n')
    >>> back = read_explicit(os.path.join(d, "m.tra"))
    >>> back.Q.toarray().tolist() == c.Q.toarray().tolist()
    True
    """
    flat = _flatten(chain, rewards, bool_vars)
    try:
        files = [_write_tra(prefix + ".tra", flat), _write_sta(prefix + ".sta", flat), _write_lab(prefix + ".lab", flat)]
        files += _write_rewards(prefix, flat)
    except OSError as exc:  # a missing or read-only folder: one line naming the file
        raise file_error(exc, "write") from None
    if flat.kind == "ctmc":
        T = _tra_matrix(flat.matrix, False)
        exits = np.asarray(T.tocsr().sum(axis=1)).ravel()
        if flat.states.shape[0] and np.all(exits == 1.0):
            warnings.warn(f"{prefix}.tra: every state of this CTMC has exit rate 1, so the .tra file reads as a "
                          "DTMC as well; read it with kind='ctmc' (or export --format mtx, which says its kind)",
                          UserWarning, stacklevel=2)
    return files


def write_mtx(chain, path: str, *, bool_vars=(), rewards: dict | None = None) -> list[str]:
    """Write ``Q`` (CTMC) or ``P`` (DTMC) in Matrix Market coordinate format, with the ``.sta`` it refers to.

    Parameters
    ----------
    chain : CTMC or DTMC
    path : str
        ``PREFIX.mtx`` or ``PREFIX``; ``PREFIX.sta``, ``PREFIX.lab`` and the rewards'
        ``.srew``/``.trew`` files are written beside it (as :func:`write_explicit`
        writes them).
    bool_vars, rewards
        As for :func:`write_explicit`.

    Returns
    -------
    list of str
        The files written, the ``.mtx`` first.

    Examples
    --------
    >>> import tempfile, os
    >>> from exactq.ctmc import CTMC
    >>> c = CTMC.from_generator([[-1.0, 1.0], [2.0, -2.0]], ["n"])
    >>> files = write_mtx(c, os.path.join(tempfile.mkdtemp(), "m"))
    >>> [os.path.basename(f) for f in files]
    ['m.mtx', 'm.sta', 'm.lab']
    >>> read_mtx(files[0]).Q.toarray().tolist()
    [[-1.0, 1.0], [2.0, -2.0]]
    """
    import scipy.io

    flat = _flatten(chain, rewards, bool_vars)
    target = path if path.endswith(".mtx") else path + ".mtx"
    prefix = target[:-4]
    what = ("transition matrix P of a DTMC (rows sum to 1)" if flat.kind == "dtmc"
            else "generator Q of a CTMC (rows sum to 0)")
    sta = os.path.basename(prefix) + ".sta"
    try:  # the file is opened here: scipy's mmwrite to a path in a missing folder fails silently (scipy 1.17)
        with open(target, "wb") as fh:
            scipy.io.mmwrite(fh, flat.matrix.tocoo(), comment=f" exactq: {what}; states as in {sta}",
                             precision=17)
        files = [target, _write_sta(prefix + ".sta", flat), _write_lab(prefix + ".lab", flat)]
        files += _write_rewards(prefix, flat)
    except OSError as exc:
        raise file_error(exc, "write") from None
    return files


def _write_lines(fh, fmt: str, *columns) -> None:
    """One line ``fmt.format(*row)`` per row of the columns, a chunk of rows at a time.

    ``map`` of ``str.format`` over the columns' values (twice as fast as ``np.savetxt``,
    which loops over the rows in Python); the chunks bound the memory the text takes.
    """
    n = len(columns[0])
    for start in range(0, n, WRITE_CHUNK):
        parts = [np.asarray(c[start:start + WRITE_CHUNK]).tolist() for c in columns]
        fh.write("\n".join(map(fmt.format, *parts)))
        fh.write("\n")


def _write_tra(path: str, flat: _Flat) -> str:
    M = _tra_matrix(flat.matrix, flat.kind == "dtmc")
    with open(path, "w") as fh:
        fh.write(f"{flat.states.shape[0]} {M.nnz}\n")
        _write_lines(fh, "{} {} {:.17g}", M.row, M.col, M.data)  # 17 digits: the doubles exactly, as PRISM
    return path


def _write_sta(path: str, flat: _Flat) -> str:
    n = flat.states.shape[0]
    bools = set(flat.bool_vars)
    cols = [flat.states[:, k] if name not in bools else np.where(flat.states[:, k] != 0, "true", "false")
            for k, name in enumerate(flat.names)]
    with open(path, "w") as fh:
        fh.write("(" + ",".join(flat.names) + ")\n")
        _write_lines(fh, "{}:(" + ",".join(["{}"] * len(cols)) + ")", np.arange(n), *cols)
    return path


def _write_lab(path: str, flat: _Flat) -> str:
    labels = flat.labels
    keys = list(labels)
    with open(path, "w") as fh:
        fh.write(" ".join(f'{i}="{k}"' for i, k in enumerate(keys)) + "\n")
        L = np.column_stack([labels[k] for k in keys])
        rows = np.flatnonzero(L.any(axis=1))
        if rows.size:
            idx = np.where(L[rows], np.arange(len(keys)).astype(str)[None, :], "")
            lines = np.char.add(rows.astype(str), ":")
            for j in range(len(keys)):  # a loop over labels, not states
                lines = np.where(idx[:, j] != "", np.char.add(np.char.add(lines, " "), idx[:, j]), lines)
            fh.write("\n".join(lines.tolist()) + "\n")
    return path


def reward_files(prefix: str, count: int) -> list[str]:
    """The ``.srew`` file of each of ``count`` reward structures under ``prefix`` (``.trew``: the same stems).

    Examples
    --------
    >>> reward_files("m", 1), reward_files("m", 2)
    (['m.srew'], ['m.1.srew', 'm.2.srew'])
    """
    return [prefix + ".srew"] if count == 1 else [f"{prefix}.{k}.srew" for k in range(1, count + 1)]


def _header(name: str, what: str) -> str:
    unnamed = re.fullmatch(r"#\d+", name) is not None  # exactq's name of PRISM's unnamed structures
    return f"# Reward structure{'' if unnamed else f' {chr(34)}{name}{chr(34)}'}\n# {what}\n"


def _write_rewards(prefix: str, flat: _Flat) -> list[str]:
    n = flat.states.shape[0]
    written = []
    srews = reward_files(prefix, len(flat.rewards))
    T = _tra_matrix(flat.matrix, flat.kind == "dtmc").tocsr()
    exits = np.asarray(T.sum(axis=1)).ravel()
    for (name, (state, trans)), srew in zip(flat.rewards.items(), srews):
        nz = np.flatnonzero(state)
        with open(srew, "w") as fh:
            fh.write(_header(name, "State rewards") + f"{n} {nz.size}\n")
            _write_lines(fh, "{} {:.17g}", nz, state[nz])
        written.append(srew)
        if trans is None:
            continue
        lost = (trans != 0) & (exits <= 0)
        if lost.any():
            warnings.warn(f"reward structure {name!r}: {int(lost.sum())} state(s) have a transition reward but no "
                          f"transition to carry it in {prefix}.trew (e.g. state {int(np.flatnonzero(lost)[0])} of the "
                          ".sta file); those rewards are not exported", UserWarning, stacklevel=3)
        per = np.divide(trans, exits, out=np.zeros(n), where=exits > 0)
        R = T.tocoo()
        vals = per[R.row]
        keep = vals != 0
        trew = srew[:-5] + ".trew"
        with open(trew, "w") as fh:
            fh.write(_header(name, "Transition rewards") + f"{n} {int(keep.sum())}\n")
            _write_lines(fh, "{} {} {:.17g}", R.row[keep], R.col[keep], vals[keep])
        written.append(trew)
    _remove_stale(prefix, written)
    return written


def _remove_stale(prefix: str, written: list) -> None:
    """Remove reward files of the naming scheme that this export did not write (an earlier export's)."""
    keep = set(written)
    stale = [prefix + ".srew", prefix + ".trew"]
    k = 1
    while os.path.exists(f"{prefix}.{k}.srew") or os.path.exists(f"{prefix}.{k}.trew"):
        stale += [f"{prefix}.{k}.srew", f"{prefix}.{k}.trew"]
        k += 1
    for path in stale:
        if path not in keep and os.path.exists(path):
            os.remove(path)


# ============================================================================ reading
@dataclass
class ExplicitFiles:
    """A chain read from explicit files (:func:`read_model`).

    Attributes
    ----------
    chain : CTMC or DTMC
        States in lexicographic order, with the labels of the ``.lab`` file and, as
        ``chain.rewards``, the state rewards of each structure.
    rewards : dict of str -> RewardStructure
        Every reward structure with its state and transition rewards (the expected
        transition reward per unit time, or per step, of each state), in file order.
    bool_vars : tuple of str
        The variables the ``.sta`` file gives as ``true``/``false``.
    files : list of str
        The files read.
    """

    chain: object
    rewards: dict = field(default_factory=dict)
    bool_vars: tuple = ()
    files: list = field(default_factory=list)


def read_explicit(tra: str, sta: str | None = None, lab: str | None = None, *, kind: str | None = None):
    """Read a chain from PRISM explicit files.

    Parameters
    ----------
    tra : str
        The ``.tra`` file; the ``.sta``, ``.lab``, ``.srew`` and ``.trew`` files with
        the same stem (see the module docstring) are read too when present (or give
        ``sta`` and ``lab``).
    sta, lab : str, optional
    kind : {"ctmc", "dtmc"}, optional
        Default: the kind a ``# Transitions (CTMC)`` header line says, else ``dtmc``
        when every row of the matrix sums to 1 and ``ctmc`` otherwise.

    Returns
    -------
    CTMC or DTMC
        States sorted as exactq sorts them (lexicographically by the variables, which
        is PRISM's order too), with the labels of the ``.lab`` file and the state
        rewards (:func:`read_model` gives the transition rewards too).

    Raises
    ------
    ModelError
        For a malformed file (naming it).
    FileError
        For a file that cannot be read.
    """
    return read_model(tra, sta=sta, lab=lab, kind=kind).chain


def read_mtx(path: str, sta: str | None = None, lab: str | None = None, *, kind: str | None = None):
    """Read a chain from a Matrix Market file (``Q`` or ``P``) and the ``.sta``/``.lab`` beside it.

    Parameters
    ----------
    path : str
        The ``.mtx`` file (as :func:`write_mtx` writes it, or any square real matrix).
    sta, lab : str, optional
        Default: the files with the same stem, when present.
    kind : {"ctmc", "dtmc"}, optional
        Default: what exactq's comment line says, else ``ctmc`` when the rows sum to 0
        and ``dtmc`` when they sum to 1.

    Returns
    -------
    CTMC or DTMC
    """
    return read_model(path, sta=sta, lab=lab, kind=kind).chain


def read_model(path: str, *, sta: str | None = None, lab: str | None = None, kind: str | None = None,
               srew=None, trew=None) -> ExplicitFiles:
    """Read a chain and its reward structures from a ``.tra`` or ``.mtx`` file and the files beside it.

    Parameters
    ----------
    path : str
        ``PREFIX.tra`` (PRISM's explicit transitions) or ``PREFIX.mtx`` (Matrix Market).
    sta, lab : str, optional
        Default: ``PREFIX.sta`` and ``PREFIX.lab`` when present.
    kind : {"ctmc", "dtmc"}, optional
        See :func:`read_explicit` and :func:`read_mtx`.
    srew, trew : list of str, optional
        The reward files, one per structure in order (``trew`` entries may be
        ``None``). Default: ``PREFIX.srew``/``PREFIX.trew``, or ``PREFIX.1.srew``,
        ``PREFIX.2.srew``, ... with the ``.trew`` of the same stems, when present.

    Returns
    -------
    ExplicitFiles
    """
    from exactq.query import RewardStructure

    if kind is not None and kind not in ("ctmc", "dtmc"):
        raise ModelError(f"kind must be ctmc or dtmc; got {kind!r}")
    stem = path[:-4] if path.endswith((".tra", ".mtx")) else path
    if sta is None and os.path.exists(stem + ".sta"):
        sta = stem + ".sta"
    if lab is None and os.path.exists(stem + ".lab"):
        lab = stem + ".lab"
    if path.endswith(".mtx"):
        M, n, kind, full = _read_mtx(path, kind)
    else:
        M, n, kind = _read_tra(path, kind)
        full = False
    files = [path]
    if sta is not None:
        names, values, bool_vars = _read_sta(sta, n)
        files.append(sta)
    else:
        names, values, bool_vars = ["s"], np.arange(n)[:, None], ()
    space = StateSpace(values, names)
    perm = space.index(values)
    if np.any(perm < 0) or len(np.unique(perm)) != n:
        raise ModelError(f"{sta}: the states are not distinct")
    P = sp.csr_matrix((M.data, (perm[M.row], perm[M.col])), shape=(n, n))  # duplicates add up, as in PRISM
    labels = {}
    if lab is not None:
        labels = _read_lab(lab, n, perm)
        files.append(lab)
    init = labels.get("init")
    initial = int(np.flatnonzero(init)[0]) if init is not None and init.any() else 0
    structures = _read_rewards(stem, n, perm, P, srew, trew, files)
    state_rewards = {k: s for k, (s, _) in structures.items()}
    rewards = {k: RewardStructure(k, s, t) for k, (s, t) in structures.items()}
    where = path
    if kind == "dtmc":
        sums = np.asarray(P.sum(axis=1)).ravel()
        bad = np.abs(sums - 1.0) > 1e-9
        if P.nnz and P.data.min() < 0:
            i = int(P.tocoo().row[np.argmin(P.tocoo().data)])
            raise ModelError(f"{where}: row {i} of a dtmc has a negative probability")
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ModelError(f"{where}: row {i} of a dtmc sums to {sums[i]:.12g}, not 1")
        chain = DTMC(space=space, P=P, cut_prob=np.zeros(n), labels=labels, initial=initial, rewards=state_rewards)
        return ExplicitFiles(chain, rewards, bool_vars, files)
    off = P - sp.diags(P.diagonal())
    off.eliminate_zeros()
    if off.nnz and off.data.min() < 0:
        i = int(off.tocoo().row[np.argmin(off.tocoo().data)])
        raise ModelError(f"{where}: row {i} of a ctmc has a negative rate off the diagonal")
    if full:  # a generator with its diagonal: rows must sum to 0
        sums = np.asarray(P.sum(axis=1)).ravel()
        scale = np.maximum(abs(P).max(axis=1).toarray().ravel(), 1.0)
        bad = np.abs(sums) > MTX_ROW_TOL * scale
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ModelError(f"{where}: row {i} of a ctmc generator sums to {sums[i]:.6g}, not 0")
        Q = P.tocsr()
    else:  # PRISM's .tra: the rates; self-loops do not change a CTMC
        Q = (off - sp.diags(np.asarray(off.sum(axis=1)).ravel())).tocsr()
    Q.eliminate_zeros()
    jumps = np.zeros(len(names), dtype=np.int64)
    coo = off.tocoo()
    if coo.nnz:
        jumps = np.abs(space.states[coo.col] - space.states[coo.row]).max(axis=0)
    chain = CTMC(space=space, Q=Q, cut_rate=np.zeros(n), jumps=jumps, labels=labels, initial=initial,
                 rewards=state_rewards)
    return ExplicitFiles(chain, rewards, bool_vars, files)


def _require_read(n: int, m: int, n_vars: int, path: str) -> None:
    from exactq.budget import require_memory

    require_memory(READ_BYTES_PER_TRANSITION * float(m) + READ_BYTES_PER_STATE_VAR * float(n) * (n_vars + 2),
                   f"reading {path} ({n} states, {m} transitions)")


def _open(path: str):
    try:
        return open(path, encoding="utf-8")
    except OSError as exc:
        raise file_error(exc, "read") from None


def _read_tra(path: str, kind):
    """``(coo of the file's triplets, n, kind)``."""
    with _open(path) as fh:
        try:
            line = fh.readline()
            header_kind = None
            while line.lstrip().startswith("#"):  # PRISM's optional header: "# Transitions (CTMC)"
                m = _TRA_KIND.match(line.strip())
                if m:
                    header_kind = m.group(1).lower()
                line = fh.readline()
            head = line.split()
            if len(head) != 2:
                what = "an MDP's (states, choices, transitions)" if len(head) == 3 else repr(line.strip()[:40])
                raise ModelError(f"{path}: the first line of a Markov chain's .tra file is 'n m' (states, "
                                 f"transitions); got {what}")
            n, m = int(head[0]), int(head[1])
            if n < 1 or m < 0:
                raise ValueError(f"{n} states, {m} transitions")
            _require_read(n, m, 1, path)
            data = np.loadtxt(fh, usecols=(0, 1, 2), ndmin=2, comments="#") if m else np.zeros((0, 3))
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise ModelError(f"{path}: not a PRISM .tra file ({exc})") from None
    if header_kind is not None and header_kind not in ("ctmc", "dtmc"):
        raise ModelError(f"{path}: exactq reads Markov chains (ctmc, dtmc); the file holds a {header_kind}")
    if data.shape[0] != m:
        raise ModelError(f"{path}: the header announces {m} transitions; the file has {data.shape[0]}")
    rows, cols, vals = data[:, 0].astype(np.int64), data[:, 1].astype(np.int64), data[:, 2]
    if m and (rows.min() < 0 or cols.min() < 0 or rows.max() >= n or cols.max() >= n):
        raise ModelError(f"{path}: a state index is outside 0..{n - 1}")
    if m and not np.all(np.isfinite(vals)):
        raise ModelError(f"{path}: a rate or probability is not finite")
    M = sp.coo_matrix((vals, (rows, cols)), shape=(n, n))
    if kind is None:
        kind = header_kind
    if kind is None:
        sums = np.asarray(M.tocsr().sum(axis=1)).ravel()
        kind = "dtmc" if np.all(np.abs(sums - 1.0) <= 1e-12) else "ctmc"
    return M, n, kind


def _read_mtx(path: str, kind):
    """``(coo, n, kind, True)``: the matrix as written (a generator keeps its diagonal)."""
    import scipy.io

    comment = ""
    with _open(path) as fh:
        try:
            for line in fh:
                if not line.startswith("%"):
                    break
                comment += line
        except UnicodeDecodeError as exc:
            raise ModelError(f"{path}: not a Matrix Market file ({exc})") from None
    try:
        rows, cols, entries, fmt, field_, _ = scipy.io.mminfo(path)
    except (ValueError, OSError, IndexError) as exc:
        raise ModelError(f"{path}: not a Matrix Market file ({exc})") from None
    if rows != cols or rows < 1:
        raise ModelError(f"{path}: a chain's matrix is square; the file holds a {rows} x {cols} matrix")
    if field_ not in ("real", "integer"):
        raise ModelError(f"{path}: a chain's matrix is real; the file holds a {field_} matrix")
    _require_read(rows, entries, 1, path)
    try:
        A = scipy.io.mmread(path)
    except (ValueError, OSError) as exc:
        raise ModelError(f"{path}: not a Matrix Market file ({exc})") from None
    M = sp.coo_matrix(A, dtype=float)
    if M.nnz and not np.all(np.isfinite(M.data)):
        raise ModelError(f"{path}: an entry is not finite")
    if kind is None:
        if "exactq: generator Q of a CTMC" in comment:
            kind = "ctmc"
        elif "exactq: transition matrix P of a DTMC" in comment:
            kind = "dtmc"
        else:
            sums = np.asarray(M.tocsr().sum(axis=1)).ravel()
            if np.all(np.abs(sums - 1.0) <= 1e-9):
                kind = "dtmc"
            elif np.all(np.abs(sums) <= MTX_ROW_TOL * np.maximum(abs(M).tocsr().max(axis=1).toarray().ravel(), 1)):
                kind = "ctmc"
            else:
                raise ModelError(f"{path}: the rows sum neither to 0 (a CTMC generator) nor to 1 (a DTMC); "
                                 "give the kind")
    return M, rows, kind, kind == "ctmc"


def _read_sta(path: str, n: int):
    """``(names, (n, d) values in index order, bool variables)``."""
    with _open(path) as fh:
        try:
            text = fh.read()
        except UnicodeDecodeError as exc:
            raise ModelError(f"{path}: not a PRISM .sta file ({exc})") from None
    head, body = _skip_comments(text)  # PRISM's optional "# States" header
    head = head.strip()
    if not (head.startswith("(") and head.endswith(")")):
        raise ModelError(f"{path}: the first line must be (v1,...,vn); got {head[:40]!r}")
    names = [s.strip() for s in head[1:-1].split(",")]
    first, _ = _skip_comments(body)
    values = first[first.find("(") + 1:first.rfind(")")].split(",")  # PRISM types a variable by its first state
    bool_vars = tuple(nm for nm, v in zip(names, values) if v.strip() in ("true", "false"))
    body = body.replace("true", "1").replace("false", "0")
    for ch in ":(),":
        body = body.replace(ch, " ")
    try:
        arr = np.loadtxt(io.StringIO(body), dtype=np.int64, ndmin=2, comments="#")
    except ValueError as exc:
        raise ModelError(f"{path}: not a PRISM .sta file ({exc})") from None
    if arr.shape != (n, len(names) + 1):
        raise ModelError(f"{path}: expected {n} states of {len(names)} variables; got shape {arr.shape[0]} x "
                         f"{arr.shape[1] - 1}")
    order = np.argsort(arr[:, 0])
    if not np.array_equal(arr[order, 0], np.arange(n)):
        raise ModelError(f"{path}: the state indices are not 0..{n - 1}")
    return names, arr[order, 1:], bool_vars


def _skip_comments(text: str) -> tuple[str, str]:
    """``(first line that is neither blank nor a # comment, the rest)`` (a loop over the leading comments only)."""
    rest = text
    while True:
        line, sep, rest = rest.partition("\n")
        if (line.strip() and not line.lstrip().startswith("#")) or not sep:
            return line, rest


def _read_lab(path: str, n: int, perm: np.ndarray) -> dict:
    with _open(path) as fh:
        try:
            head = fh.readline()
            while head.lstrip().startswith("#"):  # PRISM's optional "# Labels" header
                head = fh.readline()
            body = fh.read()
        except UnicodeDecodeError as exc:
            raise ModelError(f"{path}: not a PRISM .lab file ({exc})") from None
    keys = {}
    for item in head.split():
        idx, _, name = item.partition("=")
        try:
            keys[int(idx)] = name.strip('"')
        except ValueError:
            raise ModelError(f"{path}: the first line must list labels as i=\"name\"; got {item!r}") from None
    toks = np.array(body.replace(":", " : ").split())
    labels = {name: np.zeros(n, dtype=bool) for name in keys.values()}
    if toks.size == 0:
        return labels
    colon = toks == ":"
    state_pos = np.flatnonzero(colon) - 1
    owner = np.cumsum(colon) - 1  # the label tokens belong to the last state before them
    is_label = ~colon
    is_label[state_pos] = False
    try:
        state_of = toks[state_pos].astype(np.int64)
        lab_ids = toks[is_label].astype(np.int64)
    except ValueError as exc:
        raise ModelError(f"{path}: not a PRISM .lab file ({exc})") from None
    if state_of.size and (state_of.min() < 0 or state_of.max() >= n):
        raise ModelError(f"{path}: a state index is outside 0..{n - 1}")
    unknown = np.setdiff1d(lab_ids, np.array(list(keys), dtype=np.int64))
    if unknown.size:
        raise ModelError(f"{path}: label index {int(unknown[0])} is not declared on the first line")
    states = perm[state_of[owner[is_label]]]
    for k, name in keys.items():  # a loop over labels, not states
        labels[name][states[lab_ids == k]] = True
    return labels


def _found_reward_files(stem: str):
    """The ``(srew, trew)`` pairs of the naming scheme present beside ``stem`` (either may be None)."""
    one = (stem + ".srew", stem + ".trew")
    if any(os.path.exists(p) for p in one):
        return [tuple(p if os.path.exists(p) else None for p in one)]
    out = []
    k = 1
    while True:
        pair = (f"{stem}.{k}.srew", f"{stem}.{k}.trew")
        if not any(os.path.exists(p) for p in pair):
            return out
        out.append(tuple(p if os.path.exists(p) else None for p in pair))
        k += 1


def _read_rewards(stem: str, n: int, perm: np.ndarray, P: sp.csr_matrix, srew, trew, files: list) -> dict:
    """name -> (state rewards, expected transition reward per state or None), in file order."""
    if srew is None and trew is None:
        pairs = _found_reward_files(stem)
    else:
        srew = list(srew or [])
        trew = list(trew or [])
        k = max(len(srew), len(trew))
        pairs = list(zip(srew + [None] * (k - len(srew)), trew + [None] * (k - len(trew))))
    out = {}
    for k, (s_path, t_path) in enumerate(pairs, start=1):
        name = None
        state = np.zeros(n)
        trans = None
        if s_path is not None:
            name, data = _read_reward_file(s_path, n, 2, "State rewards")
            idx = data[:, 0].astype(np.int64)
            state[perm[idx]] = data[:, 1]
            files.append(s_path)
        if t_path is not None:
            t_name, data = _read_reward_file(t_path, n, 3, "Transition rewards")
            if s_path is not None and t_name != name:
                raise ModelError(f"{t_path}: reward structure {t_name or 'unnamed'!r} does not match "
                                 f"{name or 'unnamed'!r} of {s_path}")
            name = t_name
            R = sp.csr_matrix((data[:, 2], (perm[data[:, 0].astype(np.int64)], perm[data[:, 1].astype(np.int64)])),
                              shape=(n, n))
            trans = np.asarray(P.multiply(R).sum(axis=1)).ravel()  # sum_j q_ij r_ij (a reward off a transition: 0)
            files.append(t_path)
        key = name or f"#{k}"
        if key in out:
            raise ModelError(f"{s_path or t_path}: reward structure {key!r} appears twice")
        out[key] = (state, trans)
    return out


def _read_reward_file(path: str, n: int, width: int, what: str):
    """``(name or None, (m, width) data)`` of a ``.srew`` (width 2) or ``.trew`` (width 3) file."""
    with _open(path) as fh:
        try:
            name = None
            line = fh.readline()
            while line.lstrip().startswith("#"):
                m = _NAME.match(line.strip())
                if m:
                    name = m.group(1) or None
                elif line.strip().startswith("#") and "rewards" in line and what.split()[0] not in line:
                    raise ModelError(f"{path}: the file says {line.strip()[2:]!r}; expected {what.lower()}")
                line = fh.readline()
            head = line.split()
            if len(head) != 2:
                raise ValueError(f"the first line must be 'n m' (states, nonzero rewards); got {line.strip()[:40]!r}")
            n_file, m = int(head[0]), int(head[1])
            data = np.loadtxt(fh, ndmin=2, comments="#") if m else np.zeros((0, width))
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise ModelError(f"{path}: not a PRISM {what.lower()} file ({exc})") from None
    if n_file != n:
        raise ModelError(f"{path}: the rewards are for {n_file} states; the chain has {n}")
    if data.shape != (m, width):
        raise ModelError(f"{path}: the header announces {m} rewards of {width} columns; the file has "
                         f"{data.shape[0]} x {data.shape[1]}")
    idx = data[:, :width - 1]
    if m and (idx.min() < 0 or idx.max() >= n):
        raise ModelError(f"{path}: a state index is outside 0..{n - 1}")
    if m and not np.all(np.isfinite(data[:, -1])):
        raise ModelError(f"{path}: a reward is not finite")
    return name, data
