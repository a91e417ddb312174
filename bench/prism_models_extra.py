"""More classic PRISM case studies, written for exactq from their published descriptions.

Each function returns the text of a PRISM model, its constants and the properties that
``bench/prism.py`` and ``tests/core/test_prism_case_studies_extra.py`` check on it: a few
of every kind (steady state, bounded and unbounded reachability, rewards). None of them is
a copy of the PRISM benchmark suite's files: the structure follows the papers cited, the
variables, modules and the order of the steps are this file's own, and where the
formulation differs from the usual PRISM one the docstring says so.

Every model comes with an independent computation of some of its properties (a closed
form, or a function here that solves the same system without the PRISM front end), used by
the tests:

``mapk_cascade``
    Huang & Ferrell's MAPK cascade as a CTMC over molecule counts; independently built
    from its reaction list by :func:`mapk_reactions` (mass action, breadth-first).
``brp``
    The bounded retransmission protocol; :func:`brp_closed_forms`.
``nand``
    Von Neumann NAND multiplexing; :func:`nand_output_distribution` (binomial and
    hypergeometric convolutions, stage by stage).
``cell``
    A wireless cell with guard channels; :func:`cell_stationary` (product form).
``dice`` / ``two_dice``
    Knuth & Yao's die from a fair coin; probabilities 1/6 and (6 - |k - 7|)/36, expected
    flips 11/3 and 22/3.
"""

from __future__ import annotations

import math

__all__ = ["CASES", "mapk_cascade", "mapk_reactions", "brp", "brp_closed_forms", "nand", "nand_output_distribution",
           "cell", "cell_stationary", "dice", "two_dice",
           "knuth_yao_done_within"]


# ----------------------------------------------------------------------------- MAPK cascade
#: The ten enzymatic steps of the cascade (Huang & Ferrell 1996, Fig. 1): (substrate, enzyme, complex, product).
#: Each is E + S <-> ES -> E + P with rates a (binding, mass action), d (unbinding) and k (catalysis).
MAPK_STEPS = (
    ("kkk", "e1", "kkk_e1", "kkkp"),        # MAPKKK phosphorylated by E1
    ("kkkp", "e2", "kkkp_e2", "kkk"),       # MAPKKK* dephosphorylated by E2
    ("kk", "kkkp", "kk_kkkp", "kkp"),       # MAPKK -> MAPKK-P by MAPKKK*
    ("kkp", "kkpt", "kkp_kkpt", "kk"),      # MAPKK-P -> MAPKK by the MAPKK phosphatase
    ("kkp", "kkkp", "kkp_kkkp", "kkpp"),    # MAPKK-P -> MAPKK-PP by MAPKKK*
    ("kkpp", "kkpt", "kkpp_kkpt", "kkp"),   # MAPKK-PP -> MAPKK-P by the phosphatase
    ("k", "kkpp", "k_kkpp", "kp"),          # MAPK -> MAPK-P by MAPKK-PP
    ("kp", "kpt", "kp_kpt", "k"),           # MAPK-P -> MAPK by the MAPK phosphatase
    ("kp", "kkpp", "kp_kkpp", "kpp"),       # MAPK-P -> MAPK-PP by MAPKK-PP
    ("kpp", "kpt", "kpp_kpt", "kp"),        # MAPK-PP -> MAPK-P by the phosphatase
)
MAPK_RATES = {"d": 150.0, "k": 150.0}       # Huang & Ferrell: every d_i = k_i = 150 s^-1


def mapk_cascade(n: int, enzymes: int = 1) -> tuple[str, dict, list]:
    """The MAPK cascade (Huang & Ferrell, PNAS 93(19), 1996) as a CTMC over molecule counts.

    Three levels of kinases (MAPKKK, MAPKK, MAPK; ``n`` molecules each, all inactive at
    the start) and four enzymes (E1, E2 and the two phosphatases; ``enzymes`` molecules
    each). Each of the ten enzymatic steps of :data:`MAPK_STEPS` is E + S <-> ES -> E + P:
    binding at rate ``a * #E * #S`` with ``a = 1/n`` (the volume grows with ``n``),
    unbinding at ``150 * #ES``, catalysis at ``150 * #ES`` (the published d and k).

    Written as one module per level; a step whose enzyme belongs to the level above
    (MAPKKK* acting on MAPKK, MAPKK-PP on MAPK) synchronises the two levels, the
    enzyme's module contributing its count and the substrate's module the rest of the
    rate, so that the product is the mass-action rate. Free enzyme counts are formulas
    (total minus complexes). Rewards: ``"activated"`` (number of MAPK-PP), ``"time"``
    and ``"phosphorylations"`` (catalytic steps that add a phosphate to MAPK).
    """
    lv = {1: ["kkk", "kkk_e1", "kkkp", "kkkp_e2"],
          2: ["kk", "kk_kkkp", "kkp", "kkp_kkkp", "kkp_kkpt", "kkpp", "kkpp_kkpt"],
          3: ["k", "k_kkpp", "kp", "kp_kkpp", "kp_kpt", "kpp", "kpp_kpt"]}
    level = {v: l for l, vs in lv.items() for v in vs}
    total = {"e1": "E", "e2": "E", "kkpt": "E", "kpt": "E", "kkkp": None, "kkpp": None}
    lines = ["ctmc", "// MAPK cascade after Huang and Ferrell (1996), written for exactq.",
             "const int N; // molecules of each kinase", f"const int E = {enzymes}; // molecules of each enzyme",
             "const double a = 1/N; // binding rate: mass action in a volume proportional to N",
             f"const double d = {MAPK_RATES['d']:g};", f"const double kcat = {MAPK_RATES['k']:g};", ""]
    # free enzymes that no module owns: totals minus their complexes
    lines += ["formula e1_free = E - kkk_e1;", "formula e2_free = E - kkkp_e2;",
              "formula kkpt_free = E - kkp_kkpt - kkpp_kkpt;", "formula kpt_free = E - kp_kpt - kpp_kpt;", ""]
    free = {"e1": "e1_free", "e2": "e2_free", "kkpt": "kkpt_free", "kpt": "kpt_free"}
    cmds = {1: [], 2: [], 3: []}
    for j, (s, e, c, p) in enumerate(MAPK_STEPS, start=1):
        ls = level[s]
        if e in free:                         # enzyme not a kinase: a command of the substrate's level
            cmds[ls] += [
                f"  [bind{j}] {s}>0 & {free[e]}>0 -> a*{s}*{free[e]} : ({s}'={s}-1) & ({c}'={c}+1);",
                f"  [unbind{j}] {c}>0 -> d*{c} : ({c}'={c}-1) & ({s}'={s}+1);",
                f"  [cat{j}] {c}>0 -> kcat*{c} : ({c}'={c}-1) & ({p}'={p}+1);"]
        else:                                 # the enzyme is a kinase of the level above: synchronise
            le = level[e]
            cmds[le] += [f"  [bind{j}] {e}>0 -> {e} : ({e}'={e}-1);",
                         f"  [unbind{j}] {e}<N -> 1 : ({e}'={e}+1);",
                         f"  [cat{j}] {e}<N -> 1 : ({e}'={e}+1);"]
            cmds[ls] += [f"  [bind{j}] {s}>0 -> a*{s} : ({s}'={s}-1) & ({c}'={c}+1);",
                         f"  [unbind{j}] {c}>0 -> d*{c} : ({c}'={c}-1) & ({s}'={s}+1);",
                         f"  [cat{j}] {c}>0 -> kcat*{c} : ({c}'={c}-1) & ({p}'={p}+1);"]
    names = {1: "mapkkk", 2: "mapkk", 3: "mapk"}
    first = {"kkk", "kk", "k"}
    for l in (1, 2, 3):
        lines.append(f"module {names[l]}")
        for v in lv[l]:
            hi = "E" if v.endswith(("_e1", "_e2", "_kkpt", "_kpt")) else "N"
            lines.append(f"  {v} : [0..{hi}] init {'N' if v in first else 0};")
        lines += cmds[l] + ["endmodule", ""]
    lines += ['label "activated" = kpp = N;',
              'rewards "activated" true : kpp; endrewards',
              'rewards "time" true : 1; endrewards',
              'rewards "phosphorylations" [cat7] true : 1; [cat9] true : 1; endrewards']
    props = ['S=? [ kpp = N ]', 'R{"activated"}=? [ S ]', 'P=? [ F<=5 kpp = N ]', 'P=? [ kpp_kpt = 0 U kpp = N ]',
             'R{"time"}=? [ F kpp = N ]', 'R{"phosphorylations"}=? [ C<=5 ]', 'R{"activated"}=? [ I=5 ]']
    return "\n".join(lines) + "\n", {"N": n}, props


def mapk_reactions(n: int, enzymes: int = 1):
    """The MAPK cascade's CTMC built from its reaction list alone (no PRISM).

    Species counts start at ``n`` for kkk, kk, k and ``enzymes`` for each enzyme; every
    step of :data:`MAPK_STEPS` gives three mass-action reactions. Returns
    ``(states, Q, index)``: the reachable count vectors (a list of tuples, breadth-first
    from the initial one), the generator as a ``scipy.sparse.csr_matrix`` and the species
    names in the order of the tuples. A reference for the tests, not a fast builder.
    """
    import numpy as np
    import scipy.sparse as sp

    species = sorted({x for st in MAPK_STEPS for x in st})
    ix = {s: i for i, s in enumerate(species)}
    start = [0] * len(species)
    for s in ("kkk", "kk", "k"):
        start[ix[s]] = n
    for e in ("e1", "e2", "kkpt", "kpt"):
        start[ix[e]] = enzymes
    reactions = []                            # (reactants, products, rate constant)
    for s, e, c, p in MAPK_STEPS:
        reactions += [((s, e), (c,), 1.0 / n), ((c,), (s, e), MAPK_RATES["d"]), ((c,), (e, p), MAPK_RATES["k"])]
    states, where, rows, cols, vals = [tuple(start)], {tuple(start): 0}, [], [], []
    k = 0
    while k < len(states):
        x = states[k]
        for reac, prod, rate in reactions:
            r = rate
            for s in reac:
                r *= x[ix[s]]
            if r == 0:
                continue
            y = list(x)
            for s in reac:
                y[ix[s]] -= 1
            for s in prod:
                y[ix[s]] += 1
            y = tuple(y)
            if y not in where:
                where[y] = len(states)
                states.append(y)
            rows.append(k)
            cols.append(where[y])
            vals.append(r)
        k += 1
    m = len(states)
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(m, m))
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    return states, Q.tocsr(), species


# ----------------------------------------------------------------------------- bounded retransmission
BRP_FRAME_OK = 0.98   # channel K delivers a frame (Helmink, Sellink & Vaandrager; D'Argenio et al. 1997)
BRP_ACK_OK = 0.99     # channel L delivers an acknowledgement


def brp(n: int, max_retries: int) -> tuple[str, dict, list]:
    """The bounded retransmission protocol (Helmink, Sellink & Vaandrager, TYPES 1993/1994).

    A file of ``N`` chunks is sent over a lossy channel: each frame is lost with
    probability 0.02, each acknowledgement with probability 0.01 (the probabilities of
    D'Argenio, Jeannet, Jensen & Larsen's analysis). A chunk is retransmitted after a
    time-out at most ``MAX`` times; then the sender gives up and reports "not OK" (1), or
    "don't know" (2) when the failing chunk was the last one (the receiver may have got
    it); after all ``N`` acknowledgements it reports OK (3). The receiver notes that it
    has received a frame (``recv``) and the last chunk number it got (``got``).

    The time-outs, synchronisation and the alternating bit of the original protocol are
    abstracted: one step per event (send, deliver, acknowledge, time out). The report
    states are absorbing, one bottom SCC each.
    """
    text = """dtmc
// Bounded retransmission protocol after Helmink, Sellink and Vaandrager, written for exactq.
const int N; // chunks in the file
const int MAX; // retransmissions allowed per chunk
const double pframe = 0.98;
const double pack = 0.99;

module sender
  ph : [0..2] init 0; // 0: ready to send chunk i, 1: waiting, 2: reported
  i : [1..N] init 1;
  tries : [0..MAX] init 0; // retransmissions of chunk i so far
  srep : [0..3] init 0; // report: 0 none, 1 not OK, 2 don't know, 3 OK
  [send] ph=0 -> (ph'=1);
  [ackd] ph=1 & i<N -> (ph'=0) & (i'=i+1) & (tries'=0);
  [ackd] ph=1 & i=N -> (ph'=2) & (srep'=3);
  [timeout] ph=1 & tries<MAX -> (ph'=0) & (tries'=tries+1);
  [timeout] ph=1 & tries=MAX & i<N -> (ph'=2) & (srep'=1);
  [timeout] ph=1 & tries=MAX & i=N -> (ph'=2) & (srep'=2);
  [done] ph=2 -> true;
endmodule

module channel
  ch : [0..3] init 0; // 0: idle, 1: frame travelling, 2: acknowledgement travelling, 3: lost
  [send] ch=0 -> pframe : (ch'=1) + 1-pframe : (ch'=3);
  [deliver] ch=1 -> pack : (ch'=2) + 1-pack : (ch'=3);
  [ackd] ch=2 -> (ch'=0);
  [timeout] ch=3 -> (ch'=0);
endmodule

module receiver
  recv : bool init false;
  got : [0..N] init 0;
  [deliver] true -> (recv'=true) & (got'=i);
endmodule

label "reported" = ph=2;
label "failed" = srep=1 | srep=2;
rewards "frames" [send] true : 1; endrewards
"""
    props = ['P=? [ F "failed" ]', 'P=? [ F srep=2 ]', 'P=? [ F srep>0 & !recv ]', 'P=? [ F srep=2 & got=N ]',
             'P=? [ F<=4*N srep=3 ]', 'R{"frames"}=? [ F "reported" ]', 'S=? [ srep=3 ]', 'R{"frames"}=? [ C<=20 ]']
    return text, {"N": n, "MAX": max_retries}, props


def brp_closed_forms(n: int, max_retries: int) -> dict:
    """Closed forms for :func:`brp`, property text -> value.

    An attempt succeeds (the acknowledgement comes back) with probability
    s = 0.98 * 0.99; a chunk fails after MAX + 1 failed attempts, q = (1 - s)^(MAX+1).
    The sender fails with 1 - (1 - q)^N, reports "don't know" with (1 - q)^(N-1) q; the
    receiver got nothing only if every frame of chunk 1 was lost, 0.02^(MAX+1); the last
    chunk failed although the receiver got it with (1 - q)^(N-1) (q - 0.02^(MAX+1)). The
    expected frames: sum over chunks i of (1 - q)^(i-1) (1 - (1-s)^(MAX+1)) / s.
    """
    s = BRP_FRAME_OK * BRP_ACK_OK
    q = (1 - s) ** (max_retries + 1)
    lost = (1 - BRP_FRAME_OK) ** (max_retries + 1)
    per_chunk = (1 - (1 - s) ** (max_retries + 1)) / s
    frames = sum((1 - q) ** (i - 1) for i in range(1, n + 1)) * per_chunk
    return {'P=? [ F "failed" ]': 1 - (1 - q) ** n, 'P=? [ F srep=2 ]': (1 - q) ** (n - 1) * q,
            'P=? [ F srep>0 & !recv ]': lost, 'P=? [ F srep=2 & got=N ]': (1 - q) ** (n - 1) * (q - lost),
            'R{"frames"}=? [ F "reported" ]': frames, 'S=? [ srep=3 ]': (1 - q) ** n}


# ----------------------------------------------------------------------------- NAND multiplexing
NAND_PERR = 0.02     # a gate's von Neumann fault: its output inverted (Han & Jonker 2002; Norman et al. 2005)
NAND_PROB1 = 0.9     # an initial input is stimulated (1)


def nand(n: int, k: int) -> tuple[str, dict, list]:
    """Von Neumann NAND multiplexing (Norman, Parker, Kwiatkowska & Shukla, IEEE TCAD 24(5), 2005).

    ``N`` NAND gates per stage and ``M = 2K + 1`` stages (the executive stage and ``K``
    restorative pairs). Every input of the first stage is stimulated with probability 0.9;
    a later stage takes two copies of the previous stage's outputs, each randomly
    permuted. Each gate's output is inverted (a von Neumann fault) with probability 0.02.
    The chain computes one gate per step and keeps counts only: ``ones`` outputs equal to
    1 so far, ``xl`` and ``yl`` stimulated inputs left in the two bundles; a gate draws
    each of its two inputs without replacement (probabilities ``xl/R`` and ``yl/R``, ``R``
    gates left), which is a uniform random pairing. The correct output of the whole unit
    is 0; the run is reliable when fewer than 10% of the final outputs are 1.

    The published PRISM model draws the first input deterministically and the second at
    random, in two steps per gate; the distribution of the outputs is the same.
    """
    text = """dtmc
// NAND multiplexing after Norman, Parker, Kwiatkowska and Shukla (2005), written for exactq.
const int N; // gates per stage
const int K; // restorative stage pairs
const int M = 2*K+1; // stages
const double perr = 0.02;
const double prob1 = 0.9;
const double p11 = prob1*prob1; // both inputs of a first-stage gate stimulated

formula R = N - g; // gates left in this stage
formula px = xl/R;
formula py = yl/R;

module multiplex
  stage : [1..M] init 1;
  g : [0..N] init 0; // gates done in this stage
  ones : [0..N] init 0; // outputs equal to 1 so far in this stage
  xl : [0..N] init 0; // stimulated inputs left in the first bundle
  yl : [0..N] init 0; // ... in the second bundle
  fin : bool init false;

  [gate] !fin & stage=1 & g<N -> p11*perr + (1-p11)*(1-perr) : (g'=g+1) & (ones'=ones+1)
                               + p11*(1-perr) + (1-p11)*perr : (g'=g+1);
  [gate] !fin & stage>1 & g<N & xl>0 & yl>0 ->
        px*py*perr : (g'=g+1) & (ones'=ones+1) & (xl'=xl-1) & (yl'=yl-1)
      + px*py*(1-perr) : (g'=g+1) & (xl'=xl-1) & (yl'=yl-1)
      + px*(1-py)*(1-perr) : (g'=g+1) & (ones'=ones+1) & (xl'=xl-1)
      + px*(1-py)*perr : (g'=g+1) & (xl'=xl-1)
      + (1-px)*py*(1-perr) : (g'=g+1) & (ones'=ones+1) & (yl'=yl-1)
      + (1-px)*py*perr : (g'=g+1) & (yl'=yl-1)
      + (1-px)*(1-py)*(1-perr) : (g'=g+1) & (ones'=ones+1)
      + (1-px)*(1-py)*perr : (g'=g+1);
  [gate] !fin & stage>1 & g<N & xl>0 & yl=0 ->
        px*(1-perr) : (g'=g+1) & (ones'=ones+1) & (xl'=xl-1)
      + px*perr : (g'=g+1) & (xl'=xl-1)
      + (1-px)*(1-perr) : (g'=g+1) & (ones'=ones+1)
      + (1-px)*perr : (g'=g+1);
  [gate] !fin & stage>1 & g<N & xl=0 & yl>0 ->
        py*(1-perr) : (g'=g+1) & (ones'=ones+1) & (yl'=yl-1)
      + py*perr : (g'=g+1) & (yl'=yl-1)
      + (1-py)*(1-perr) : (g'=g+1) & (ones'=ones+1)
      + (1-py)*perr : (g'=g+1);
  [gate] !fin & stage>1 & g<N & xl=0 & yl=0 -> 1-perr : (g'=g+1) & (ones'=ones+1) + perr : (g'=g+1);
  [next] !fin & g=N & stage<M -> (stage'=stage+1) & (g'=0) & (xl'=ones) & (yl'=ones) & (ones'=0);
  [finish] !fin & g=N & stage=M -> (fin'=true);
  [] fin -> true;
endmodule

label "reliable" = fin & ones/N < 0.1;
rewards "error_fraction" [finish] true : ones/N; endrewards
rewards "gates" [gate] true : 1; endrewards
"""
    props = ['P=? [ F "reliable" ]', 'R{"error_fraction"}=? [ F fin ]', 'P=? [ F<=N+1 stage=2 & xl>=N-1 ]',
             'S=? [ "reliable" ]', 'R{"gates"}=? [ C<=N ]']
    return text, {"N": n, "K": k}, props


def nand_output_distribution(n: int, k: int, perr: float = NAND_PERR, prob1: float = NAND_PROB1):
    """The distribution of the number of 1-outputs after the last stage of :func:`nand`.

    Stage 1: each gate's inputs are both 1 with probability prob1^2, independently.
    Later stages with z ones in each bundle: the number of gates with both inputs 1 is
    hypergeometric(N, z, z); a gate outputs 1 with probability perr when both inputs are
    1 and 1 - perr otherwise, so the new count is Binomial(b, perr) + Binomial(N - b,
    1 - perr). Returns ``(stage1, final)`` as numpy arrays of length N + 1.
    """
    import numpy as np
    from scipy.stats import binom, hypergeom

    def outputs_given_both(b):
        one = binom.pmf(np.arange(b + 1), b, perr)
        other = binom.pmf(np.arange(n - b + 1), n - b, 1 - perr)
        return np.convolve(one, other)

    p11 = prob1 * prob1
    stage1 = np.zeros(n + 1)
    for b in range(n + 1):
        stage1 += binom.pmf(b, n, p11) * outputs_given_both(b)
    dist = stage1
    for _ in range(2 * k):
        new = np.zeros(n + 1)
        for z in range(n + 1):
            if dist[z] == 0:
                continue
            pb = hypergeom.pmf(np.arange(n + 1), n, z, z)
            for b in range(n + 1):
                if pb[b] > 0:
                    new += dist[z] * pb[b] * outputs_given_both(b)
        dist = new
    return stage1, dist


# ----------------------------------------------------------------------------- cell with guard channels
CELL_NEW, CELL_HANDOFF, CELL_MU = 49.0, 21.0, 1.0   # Haring, Marie, Puigjaner & Trivedi (2001): per-call rates


def cell(n: int) -> tuple[str, dict, list]:
    """A cell of a wireless network with guard channels (Haring, Marie, Puigjaner & Trivedi, IEEE Trans.
    Vehicular Technology 50(3), 2001).

    ``N`` channels; new calls arrive at rate 49 and are admitted while fewer than 80% of the
    channels are busy, hand-off calls (rate 21) while any channel is free; each call ends
    or leaves the cell at rate 1. A birth-death chain on the number of calls: its steady
    state has a product form (:func:`cell_stationary`).
    """
    text = """ctmc
// Cell with guard channels after Haring, Marie, Puigjaner and Trivedi (2001), written for exactq.
const int N; // channels
const double new_rate = 49;
const double handoff_rate = 21;
const double mu = 1;
module cell
  calls : [0..N] init 0;
  [new] calls < 0.8*N -> new_rate : (calls'=calls+1);
  [handoff] calls < N -> handoff_rate : (calls'=calls+1);
  [leave] calls > 0 -> calls*mu : (calls'=calls-1);
endmodule
label "full" = calls = N;
label "guarded" = calls >= 0.8*N;
rewards "calls" true : calls; endrewards
rewards "admitted" [new] true : 1; [handoff] true : 1; endrewards
"""
    props = ['S=? [ "full" ]', 'S=? [ "guarded" ]', 'R{"calls"}=? [ S ]', 'R{"admitted"}=? [ S ]',
             'P=? [ F<=1 "guarded" ]', 'R{"calls"}=? [ I=0.5 ]', 'R{"admitted"}=? [ C<=1 ]']
    return text, {"N": n}, props


def cell_stationary(n: int):
    """The product form of :func:`cell`: pi_k proportional to prod_{j<k} lambda_j / ((j+1) mu), with
    lambda_j = 70 below 0.8 N and 21 above; computed in log space. Returns the numpy array pi."""
    import numpy as np

    j = np.arange(n)
    lam = np.where(j < 0.8 * n, CELL_NEW + CELL_HANDOFF, CELL_HANDOFF)
    logw = np.concatenate([[0.0], np.cumsum(np.log(lam) - np.log((j + 1) * CELL_MU))])
    w = np.exp(logw - logw.max())
    return w / w.sum()


# ----------------------------------------------------------------------------- dice
def dice(restart: int = 0) -> tuple[str, dict, list]:
    """Knuth & Yao's die from a fair coin (Knuth & Yao 1976).

    Three flips pick one of eight leaves of a binary tree; six are the faces, the other
    two go back to the tree's second level, so that each face has probability 1/6 and
    the expected number of flips is 11/3. With ``restart = 1`` the die is thrown again
    after each result (one step showing it): the chain is recurrent and periodic (every
    cycle has an even length) and the long-run fraction of time showing a face is
    1/(11/3 + 1) = 3/14, 1/28 for each face.
    """
    text = """dtmc
// Knuth and Yao's die from a fair coin, written for exactq.
const int RESTART; // 1: throw again after each result
module die
  node : [0..7] init 0; // 0: root, 1-2: second level, 3-6: third level, 7: a face shown
  face : [0..6] init 0;
  [flip] node=0 -> 0.5 : (node'=1) + 0.5 : (node'=2);
  [flip] node=1 -> 0.5 : (node'=3) + 0.5 : (node'=4);
  [flip] node=2 -> 0.5 : (node'=5) + 0.5 : (node'=6);
  [flip] node=3 -> 0.5 : (node'=1) + 0.5 : (node'=7) & (face'=1);
  [flip] node=4 -> 0.5 : (node'=7) & (face'=2) + 0.5 : (node'=7) & (face'=3);
  [flip] node=5 -> 0.5 : (node'=7) & (face'=4) + 0.5 : (node'=7) & (face'=5);
  [flip] node=6 -> 0.5 : (node'=2) + 0.5 : (node'=7) & (face'=6);
  [show] node=7 & RESTART=0 -> true;
  [again] node=7 & RESTART=1 -> (node'=0) & (face'=0);
endmodule
label "shown" = node=7;
rewards "flips" [flip] true : 1; endrewards
"""
    if restart:
        props = ['S=? [ "shown" ]', 'S=? [ "shown" & face=1 ]', 'R{"flips"}=? [ S ]', 'P=? [ F<=3 "shown" ]']
    else:
        props = ['P=? [ F "shown" & face=1 ]', 'P=? [ F "shown" & face=6 ]', 'R{"flips"}=? [ F "shown" ]',
                 'P=? [ F<=3 "shown" ]', 'P=? [ F<=5 "shown" ]', 'S=? [ face=3 ]']
    return text, {"RESTART": restart}, props


def two_dice(interleaved: int = 0) -> tuple[str, dict, list]:
    """Two of Knuth & Yao's dice (a DTMC), the sum of two fair dice from fair coins.

    Two copies of the die of :func:`dice` (by renaming). With ``interleaved = 0`` both
    dice flip in every step (one synchronised action; a die that shows its face stays
    put), so the sum is known after ``max`` of the two dice's flips. With
    ``interleaved = 1`` the dice are independent modules and in each step one of the two
    enabled commands is taken with equal probability, as PRISM and Storm resolve a
    DTMC's local choices. Either way the sum is k with probability (6 - |k - 7|)/36 and
    the expected number of flips is 22/3.
    """
    if interleaved:
        die1 = ["  [flip1] n1=0 -> 0.5 : (n1'=1) + 0.5 : (n1'=2);",
                "  [flip1] n1=1 -> 0.5 : (n1'=3) + 0.5 : (n1'=4);",
                "  [flip1] n1=2 -> 0.5 : (n1'=5) + 0.5 : (n1'=6);",
                "  [flip1] n1=3 -> 0.5 : (n1'=1) + 0.5 : (n1'=7) & (f1'=1);",
                "  [flip1] n1=4 -> 0.5 : (n1'=7) & (f1'=2) + 0.5 : (n1'=7) & (f1'=3);",
                "  [flip1] n1=5 -> 0.5 : (n1'=7) & (f1'=4) + 0.5 : (n1'=7) & (f1'=5);",
                "  [flip1] n1=6 -> 0.5 : (n1'=2) + 0.5 : (n1'=7) & (f1'=6);",
                "  [wait1] n1=7 -> true;"]
        rename = "module die2 = die1 [ n1=n2, f1=f2, flip1=flip2, wait1=wait2 ] endmodule"
        rewards = 'rewards "flips" [flip1] true : 1; [flip2] true : 1; endrewards'
    else:
        die1 = ["  [flip] n1=0 -> 0.5 : (n1'=1) + 0.5 : (n1'=2);",
                "  [flip] n1=1 -> 0.5 : (n1'=3) + 0.5 : (n1'=4);",
                "  [flip] n1=2 -> 0.5 : (n1'=5) + 0.5 : (n1'=6);",
                "  [flip] n1=3 -> 0.5 : (n1'=1) + 0.5 : (n1'=7) & (f1'=1);",
                "  [flip] n1=4 -> 0.5 : (n1'=7) & (f1'=2) + 0.5 : (n1'=7) & (f1'=3);",
                "  [flip] n1=5 -> 0.5 : (n1'=7) & (f1'=4) + 0.5 : (n1'=7) & (f1'=5);",
                "  [flip] n1=6 -> 0.5 : (n1'=2) + 0.5 : (n1'=7) & (f1'=6);",
                "  [flip] n1=7 -> true;"]
        rename = "module die2 = die1 [ n1=n2, f1=f2 ] endmodule"
        rewards = 'rewards "flips" [flip] n1<7 : 1; [flip] n2<7 : 1; endrewards'
    text = "\n".join(["dtmc", "// Two of Knuth and Yao's dice, written for exactq.", "module die1",
                      "  n1 : [0..7] init 0;", "  f1 : [0..6] init 0;"] + die1 +
                     ["endmodule", rename, "formula done = n1=7 & n2=7;", 'label "done" = done;', rewards]) + "\n"
    props = ['P=? [ F done & f1+f2=7 ]', 'P=? [ F done & f1+f2=2 ]', 'P=? [ F done & f1+f2=10 ]',
             'R{"flips"}=? [ F "done" ]', 'P=? [ F<=6 "done" ]', 'S=? [ done & f1=f2 ]']
    return text, {}, props


def knuth_yao_done_within(flips: int) -> float:
    """P(one Knuth-Yao die shows its face within ``flips`` flips): 0 before 3, then
    1 - (1/4)^(j+1) from 3 + 2j flips on (3/4 of the paths end at each odd depth >= 3)."""
    if flips < 3:
        return 0.0
    return 1.0 - 0.25 ** ((flips - 3) // 2 + 1)


#: name -> (generator, quick sizes, full sizes, the size parameters' names); a size is a tuple of the
#: generator's arguments. The full sizes are those at which Storm's default engine takes about 0.1-100 s
#: on a 2-core machine (MAPK at N = 4, 99,535 states, takes it longer; NAND at N = 40, K = 4 has 1.5M states);
#: the dice never take 0.1 s and are quick sizes only.
CASES = {
    "mapk_cascade": (mapk_cascade, ((1,), (2,)), ((2,), (3,)), ("N",)),
    "brp": (brp, ((16, 2), (32, 4)), ((64, 5), (256, 10), (1024, 10)), ("N", "MAX")),
    "nand": (nand, ((5, 1), (10, 2)), ((20, 2), (30, 3)), ("N", "K")),
    "cell": (cell, ((50,), (1000,)), ((10000,), (100000,)), ("N",)),
    "dice": (dice, ((0,), (1,)), (), ("RESTART",)),
    "two_dice": (two_dice, ((0,), (1,)), (), ("interleaved",)),
}
