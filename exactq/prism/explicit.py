"""PRISM's explicit model files (``.tra``, ``.sta``, ``.lab``, ``.srew``) and Matrix Market, both ways.

The formats are those of the PRISM manual, appendix "Explicit Model Files":

``.sta``
    ``(v1,...,vn)`` then one line ``i:(x1,...,xn)`` per state (``true``/``false`` for
    booleans).
``.tra``
    ``n m`` then ``i j x`` per transition, rows ascending: the rate (CTMC, off the
    diagonal) or the probability (DTMC, self-loops included).
``.lab``
    ``0="init" 1="deadlock" 2="name" ...`` then ``i: k1 k2 ...`` for every state with a label.
``.srew``
    ``# Reward structure "name"``, ``# State rewards``, ``n m`` and ``i r`` per nonzero reward.

:func:`write_explicit` writes a chain so that PRISM (``-importtrans ... -importstates
... -importlabels ... -ctmc``) or Storm (``--explicit``) can read it back;
:func:`read_explicit` reads the files into a :class:`~exactq.ctmc.CTMC` or
:class:`~exactq.ctmc.DTMC`. Reading and writing are vectorised (numpy's text
readers and writers), never a Python loop over states or transitions.
"""

from __future__ import annotations

import io
import os

import numpy as np
import scipy.sparse as sp

from exactq.ctmc import CTMC, DTMC
from exactq.errors import ModelError, file_error
from exactq.statespace import StateSpace

__all__ = ["write_explicit", "read_explicit", "write_mtx", "chain_transitions"]


def chain_transitions(chain) -> sp.coo_matrix:
    """The transition matrix PRISM's ``.tra`` holds: CTMC rates off the diagonal, or the DTMC's ``P``."""
    if isinstance(chain, DTMC):
        M = sp.coo_matrix(chain.P)
    else:
        Q = sp.csr_matrix(chain.Q)
        M = (Q - sp.diags(Q.diagonal())).tocoo()
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


def write_explicit(chain, prefix: str, *, bool_vars=(), rewards: dict | None = None) -> list[str]:
    """Write ``prefix.tra``, ``prefix.sta``, ``prefix.lab`` (and ``prefix.srew`` with rewards).

    Parameters
    ----------
    chain : CTMC or DTMC
    prefix : str
        Path without extension.
    bool_vars : iterable of str
        Variables printed as ``true``/``false``.
    rewards : dict of str -> (n,) array, optional
        State rewards to write (default: ``chain.rewards``); one ``.srew`` file per
        structure (``prefix.srew`` for one, ``prefix.NAME.srew`` for several).

    Returns
    -------
    list of str
        The files written.

    Examples
    --------
    >>> import tempfile, os
    >>> from exactq.ctmc import CTMC
    >>> c = CTMC.from_generator([[-1.0, 1.0], [2.0, -2.0]], ["n"])
    >>> d = tempfile.mkdtemp()
    >>> files = write_explicit(c, os.path.join(d, "m"))
    >>> open(files[0]).read()
    '2 2\\n0 1 1\\n1 0 2\\n'
    >>> back = read_explicit(os.path.join(d, "m.tra"))
    >>> back.Q.toarray().tolist() == c.Q.toarray().tolist()
    True
    """
    try:
        return _write_explicit(chain, prefix, bool_vars, rewards)
    except OSError as exc:  # a missing or read-only folder: one line naming the file
        raise file_error(exc, "write") from None


def _write_explicit(chain, prefix: str, bool_vars, rewards) -> list[str]:
    M = chain_transitions(chain)
    n = chain.n_states
    files = []
    tra = prefix + ".tra"
    with open(tra, "w") as fh:
        fh.write(f"{n} {M.nnz}\n")
        if M.nnz:
            buf = io.StringIO()
            np.savetxt(buf, np.column_stack([M.row.astype(float), M.col.astype(float), M.data]),
                       fmt=["%d", "%d", "%.17g"], delimiter=" ")
            fh.write(buf.getvalue())
    files.append(tra)
    names = list(chain.space.names)
    sta = prefix + ".sta"
    with open(sta, "w") as fh:
        fh.write("(" + ",".join(names) + ")\n")
        states = np.asarray(chain.states)
        cols = [np.arange(n).astype(str)]
        for k, name in enumerate(names):
            col = states[:, k]
            cols.append(np.where(col != 0, "true", "false") if name in set(bool_vars) else col.astype(str))
        body = np.char.add(np.char.add(cols[0], ":("), _join(cols[1:], ","))
        fh.write("\n".join(np.char.add(body, ")").tolist()) + "\n")
    files.append(sta)
    labels = _labels_of(chain)
    lab = prefix + ".lab"
    with open(lab, "w") as fh:
        keys = list(labels)
        fh.write(" ".join(f'{i}="{k}"' for i, k in enumerate(keys)) + "\n")
        L = np.column_stack([labels[k] for k in keys])
        rows = np.flatnonzero(L.any(axis=1))
        if rows.size:
            idx = np.where(L[rows], np.arange(len(keys)).astype(str)[None, :], "")
            lines = np.char.add(rows.astype(str), ":")
            for j in range(len(keys)):  # a loop over labels, not states
                lines = np.where(idx[:, j] != "", np.char.add(np.char.add(lines, " "), idx[:, j]), lines)
            fh.write("\n".join(lines.tolist()) + "\n")
    files.append(lab)
    rew = dict(chain.rewards if rewards is None else rewards)
    for name, vec in rew.items():
        vec = np.asarray(vec, dtype=float)
        path = prefix + ".srew" if len(rew) == 1 else f"{prefix}.{name.strip('#') or 'r'}.srew"
        nz = np.flatnonzero(vec)
        with open(path, "w") as fh:
            fh.write(f'# Reward structure "{name}"\n# State rewards\n{n} {nz.size}\n')
            if nz.size:
                buf = io.StringIO()
                np.savetxt(buf, np.column_stack([nz.astype(float), vec[nz]]), fmt=["%d", "%.17g"], delimiter=" ")
                fh.write(buf.getvalue())
        files.append(path)
    return files


def _join(cols: list, sep: str) -> np.ndarray:
    out = cols[0]
    for c in cols[1:]:
        out = np.char.add(np.char.add(out, sep), c)
    return out


def write_mtx(chain, path: str) -> str:
    """Write the generator ``Q`` (CTMC) or ``P`` (DTMC) in Matrix Market coordinate format."""
    import scipy.io

    M = sp.coo_matrix(chain.P if isinstance(chain, DTMC) else chain.Q)
    what = "transition matrix P of a DTMC" if isinstance(chain, DTMC) else "generator Q of a CTMC (rows sum to 0)"
    target = path if path.endswith(".mtx") else path + ".mtx"
    try:  # the file is opened here: scipy's mmwrite to a path in a missing folder fails silently (scipy 1.17)
        with open(target, "wb") as fh:
            scipy.io.mmwrite(fh, M, comment=f" exactq: {what}; states as in the .sta order", precision=17)
    except OSError as exc:
        raise file_error(exc, "write", target) from None
    return target


def read_explicit(tra: str, sta: str | None = None, lab: str | None = None, *, kind: str | None = None):
    """Read a chain from PRISM explicit files.

    Parameters
    ----------
    tra : str
        The ``.tra`` file; ``.sta`` and ``.lab`` files with the same stem are read too
        when present (or give them).
    sta, lab : str, optional
    kind : {"ctmc", "dtmc"}, optional
        Default: ``dtmc`` when every row of the matrix sums to 1 and ``ctmc`` otherwise.

    Returns
    -------
    CTMC or DTMC
        States sorted as exactq sorts them (lexicographically by the variables, which
        is PRISM's order too), with the labels of the ``.lab`` file.

    Raises
    ------
    ModelError
        For a malformed file (naming it).
    """
    stem = tra[:-4] if tra.endswith(".tra") else tra
    if sta is None and os.path.exists(stem + ".sta"):
        sta = stem + ".sta"
    if lab is None and os.path.exists(stem + ".lab"):
        lab = stem + ".lab"
    try:
        with open(tra) as fh:
            head = fh.readline().split()
            n, m = int(head[0]), int(head[1])
            data = np.loadtxt(fh, usecols=(0, 1, 2), ndmin=2) if m else np.zeros((0, 3))
    except (OSError, ValueError, IndexError) as exc:
        raise ModelError(f"{tra}: not a PRISM .tra file ({exc})") from None
    if data.shape[0] != m:
        raise ModelError(f"{tra}: the header announces {m} transitions; the file has {data.shape[0]}")
    rows, cols, vals = data[:, 0].astype(np.int64), data[:, 1].astype(np.int64), data[:, 2]
    if m and (rows.min() < 0 or cols.min() < 0 or rows.max() >= n or cols.max() >= n):
        raise ModelError(f"{tra}: a state index is outside 0..{n - 1}")
    if sta is not None:
        names, values = _read_sta(sta, n)
    else:
        names, values = ["s"], np.arange(n)[:, None]
    space = StateSpace(values, names)
    perm = space.index(values)
    if np.any(perm < 0) or len(np.unique(perm)) != n:
        raise ModelError(f"{sta}: the states are not distinct")
    M = sp.csr_matrix((vals, (perm[rows], perm[cols])), shape=(n, n))
    sums = np.asarray(M.sum(axis=1)).ravel()
    if kind is None:
        kind = "dtmc" if n and np.all(np.abs(sums - 1.0) <= 1e-12) else "ctmc"
    labels = _read_lab(lab, n, perm) if lab is not None else {}
    init = labels.get("init")
    initial = int(np.flatnonzero(init)[0]) if init is not None and init.any() else 0
    if kind == "dtmc":
        if np.any(np.abs(sums - 1.0) > 1e-9):
            i = int(np.flatnonzero(np.abs(sums - 1.0) > 1e-9)[0])
            raise ModelError(f"{tra}: row {i} of a dtmc sums to {sums[i]:.12g}, not 1")
        return DTMC(space=space, P=M, cut_prob=np.zeros(n), labels=labels, initial=initial)
    if kind != "ctmc":
        raise ModelError(f"kind must be ctmc or dtmc; got {kind!r}")
    M = M - sp.diags(M.diagonal())  # self-loops do not change a CTMC
    Q = (M - sp.diags(np.asarray(M.sum(axis=1)).ravel())).tocsr()
    Q.eliminate_zeros()
    jumps = np.zeros(len(names), dtype=np.int64)
    coo = M.tocoo()
    if coo.nnz:
        jumps = np.abs(space.states[coo.col] - space.states[coo.row]).max(axis=0)
    return CTMC(space=space, Q=Q, cut_rate=np.zeros(n), jumps=jumps, labels=labels, initial=initial)


def _read_sta(path: str, n: int):
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc})") from None
    head, _, body = text.partition("\n")
    head = head.strip()
    if not (head.startswith("(") and head.endswith(")")):
        raise ModelError(f"{path}: the first line must be (v1,...,vn); got {head[:40]!r}")
    names = [s.strip() for s in head[1:-1].split(",")]
    body = body.replace("true", "1").replace("false", "0")
    for ch in ":(),":
        body = body.replace(ch, " ")
    try:
        arr = np.loadtxt(io.StringIO(body), dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise ModelError(f"{path}: not a PRISM .sta file ({exc})") from None
    if arr.shape != (n, len(names) + 1):
        raise ModelError(f"{path}: expected {n} states of {len(names)} variables; got shape {arr.shape[0]} x "
                         f"{arr.shape[1] - 1}")
    order = np.argsort(arr[:, 0])
    if not np.array_equal(arr[order, 0], np.arange(n)):
        raise ModelError(f"{path}: the state indices are not 0..{n - 1}")
    return names, arr[order, 1:]


def _read_lab(path: str, n: int, perm: np.ndarray) -> dict:
    try:
        with open(path) as fh:
            head = fh.readline()
            body = fh.read()
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc})") from None
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
    states = perm[state_of[owner[is_label]]]
    for k, name in keys.items():  # a loop over labels, not states
        labels[name][states[lab_ids == k]] = True
    return labels
