"""Held-out PRISM case studies: models exactq was never tuned on, written from their published descriptions.

Each generator returns ``(text, constants, properties)`` as in ``bench/prism_models_extra.py``;
``CASES`` maps a name to ``(generator, quick sizes, full sizes, parameter names)``. None of the
models is a copy of the PRISM benchmark suite's files or of anyone else's: the structure follows
the descriptions cited, the modules, variables and the order of the commands are this file's own.

Every model comes with an independent computation (no PRISM front end) that
``tests/core/test_prism_heldout.py`` compares with exactq's values:

``central_server``
    Buzen's central-server model (a closed product-form queueing network, CTMC):
    :func:`buzen` (the convolution algorithm) for every stationary measure at any size, and
    :func:`central_server_chain` (the chain enumerated directly) for the transient ones.
``peer2peer``
    Kwiatkowska, Norman & Parker's BitTorrent-like file distribution (CTMC): the blocks
    spread independently, so every measure follows from one block's (N+1)-state birth
    chain (:func:`p2p_block_measures`) and a lumped chain over the K blocks' levels
    (:func:`p2p_lumped_chain`).
``gambler``
    Gambler's ruin (DTMC), the classic trap for value iteration that stops on a small change
    (Haddad & Monmege): closed forms (:func:`gambler_closed_forms`) and an exact step-by-step
    recursion for the step-bounded properties (:func:`gambler_bounded`).
``loss_network``
    A multi-rate Erlang loss system (the stochastic knapsack, CTMC): the Kaufman-Roberts
    recursion (:func:`kaufman_roberts`) for the stationary measures, :func:`loss_chain` for the
    transient ones.
``zeroconf``
    Zeroconf address configuration (Bohnenkamp, van der Stok, Hermanns & Vaandrager; the DTMC
    of Kwiatkowska, Norman, Parker & Sproston): closed forms (:func:`zeroconf_closed_forms`).
"""

from __future__ import annotations

import math

__all__ = ["CASES", "central_server", "buzen", "central_server_chain", "peer2peer", "p2p_block_measures",
           "p2p_lumped_chain", "gambler", "gambler_closed_forms", "gambler_bounded", "loss_network",
           "kaufman_roberts", "loss_chain", "zeroconf", "zeroconf_closed_forms", "generator_by_search"]


def generator_by_search(start, successors):
    """A CTMC's generator by breadth-first search: ``successors(state)`` lists ``(next, rate)``.
    Returns ``(states, Q)`` with ``Q`` a ``scipy.sparse.csr_matrix`` (self-loops dropped) and
    state 0 the start. A reference for the tests, not a fast builder."""
    import numpy as np
    import scipy.sparse as sp

    states, where, rows, cols, vals = [start], {start: 0}, [], [], []
    k = 0
    while k < len(states):
        for y, r in successors(states[k]):
            if r == 0 or y == states[k]:
                continue
            if y not in where:
                where[y] = len(states)
                states.append(y)
            rows.append(k)
            cols.append(where[y])
            vals.append(float(r))
        k += 1
    m = len(states)
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(m, m))
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    return states, Q.tocsr()


# ----------------------------------------------------------------------------- central server
CS_CPU_RATE = 10.0      # service rate of the central server (the CPU)
CS_LEAVE = 0.1          # a CPU burst ends the job (replaced at once by a new one: a closed network)


def cs_disk_rate(j: int) -> float:
    """Service rate of I/O device j (1-based): devices get slower with j."""
    return 4.0 / (1.0 + 0.5 * (j - 1))


def central_server(n: int, m: int) -> tuple[str, dict, list]:
    """Buzen's central-server model (Buzen, "Computational algorithms for closed queueing networks
    with exponential servers", CACM 16(9), 1973), a closed network of exponential servers.

    ``N`` jobs circulate between a central server (the CPU, rate 10) and ``M`` I/O devices
    (device j at rate 4 / (1 + (j-1)/2)), each a single FCFS server. After a CPU burst a job
    ends with probability 0.1 and is replaced by a new job at the CPU (a self-loop of the chain
    whose action ``[leave]`` counts throughput), or goes to device j with probability 0.9/M; a
    device sends the job back to the CPU. One module per device holds that device's queue; the
    CPU's queue is the formula ``N - (sum of the devices)``. The product form makes every
    stationary measure computable by Buzen's convolution (:func:`buzen`).
    """
    devs = [f"d{j}" for j in range(1, m + 1)]
    lines = ["ctmc", "// Central-server model after Buzen (1973), written for exactq.",
             "const int N; // jobs", f"const int M = {m}; // I/O devices", f"const double cpu = {CS_CPU_RATE:g};",
             f"const double leave = {CS_LEAVE:g};", "const double route = (1-leave)/M; // to each device",
             "const int H = floor(N/2);"]
    lines += [f"const double mu{j} = {cs_disk_rate(j)!r};" for j in range(1, m + 1)]
    lines += ["", f"formula c = N - ({'+'.join(devs)}); // jobs at the CPU", ""]
    for j, d in enumerate(devs, start=1):
        lines += [f"module device{j}", f"  {d} : [0..N] init 0;",
                  f"  [] {d}>0 -> mu{j} : ({d}'={d}-1); // back to the CPU",
                  f"  [] c>0 -> cpu*route : ({d}'={d}+1); // a CPU burst sends the job here", "endmodule", ""]
    lines += ["module jobs", "  [leave] c>0 -> cpu*leave : true; // a job ends, a new one takes its place",
              "endmodule", "", 'label "cpu_idle" = c=0;', 'label "d1_busy" = d1>0;',
              'rewards "cpu_queue" true : c; endrewards', 'rewards "throughput" [leave] true : 1; endrewards',
              'rewards "d1_queue" true : d1; endrewards', 'rewards "time" true : 1; endrewards']
    props = ['S=? [ "cpu_idle" ]', 'S=? [ d1 >= H ]', 'R{"cpu_queue"}=? [ S ]', 'R{"throughput"}=? [ S ]',
             'R{"d1_queue"}=? [ S ]', 'P=? [ F<=1 "cpu_idle" ]', 'R{"cpu_queue"}=? [ C<=2 ]',
             'R{"d1_queue"}=? [ I=1 ]', 'R{"time"}=? [ F "cpu_idle" ]', 'R{"throughput"}=? [ C<=1 ]']
    return "\n".join(lines) + "\n", {"N": n}, props


def _cs_demands(m: int) -> list:
    """Relative loads x_i = visit ratio / service rate: the CPU first, then the devices."""
    return [1.0 / CS_CPU_RATE] + [(1 - CS_LEAVE) / m / cs_disk_rate(j) for j in range(1, m + 1)]


def buzen(n: int, m: int) -> dict:
    """Stationary measures of :func:`central_server` by Buzen's convolution algorithm.

    G(k) = sum over the populations of prod_i x_i^{n_i}, by folding one station at a time:
    g_i(k) = g_{i-1}(k) + x_i g_i(k-1). Then P(n_i >= k) = x_i^k G(N-k)/G(N),
    the utilisation U_i = x_i G(N-1)/G(N), the mean queue sum_k x_i^k G(N-k)/G(N), and the
    throughput of ``[leave]``: 0.1 * 10 * U_cpu. The loads are scaled by their maximum (the
    ratios do not change) so that G stays within floating point. Returns property -> value.
    """
    xs = _cs_demands(m)
    s = max(xs)
    xs = [x / s for x in xs]
    g = [1.0] + [0.0] * n
    for x in xs:
        for k in range(1, n + 1):
            g[k] += x * g[k - 1]

    def tail(i, k):                     # P(n_i >= k)
        return xs[i] ** k * g[n - k] / g[n]

    mean = lambda i: sum(tail(i, k) for k in range(1, n + 1))  # noqa: E731
    return {'S=? [ "cpu_idle" ]': 1.0 - tail(0, 1), 'S=? [ d1 >= H ]': tail(1, n // 2),
            'R{"cpu_queue"}=? [ S ]': mean(0), 'R{"throughput"}=? [ S ]': CS_CPU_RATE * CS_LEAVE * tail(0, 1),
            'R{"d1_queue"}=? [ S ]': mean(1)}


def central_server_chain(n: int, m: int):
    """The chain of :func:`central_server` enumerated directly: states are the devices' queues
    (a tuple), the start has every job at the CPU. Returns ``(states, Q)``."""
    route = CS_CPU_RATE * (1 - CS_LEAVE) / m

    def succ(d):
        out = []
        c = n - sum(d)
        for j in range(m):
            if d[j] > 0:
                out.append((d[:j] + (d[j] - 1,) + d[j + 1:], cs_disk_rate(j + 1)))
            if c > 0:
                out.append((d[:j] + (d[j] + 1,) + d[j + 1:], route))
        return out

    return generator_by_search((0,) * m, succ)


# ----------------------------------------------------------------------------- peer-to-peer
P2P_MU = 2.0            # download rate of a block from one source
P2P_SOURCES = 4         # at most four concurrent sources per block


def peer2peer(n: int, k: int) -> tuple[str, dict, list]:
    """A BitTorrent-like file distribution (the PRISM case study of Kwiatkowska, Norman and Parker,
    2006: prismmodelchecker.org/casestudies/peer2peer.php), a CTMC.

    A file of ``K`` blocks; one seeder holds them all, ``N`` clients start with none. A client
    without block j downloads it at rate ``2 * min(4, 1 + h_j)``, ``h_j`` the clients that hold
    block j already (the seeder and at most three clients serve it concurrently). The published
    model has one module per client; here there is one module per *block* (its ``N`` holder bits),
    written once and copied by renaming; the finished state has a self-loop ``[finished]`` (not a
    deadlock). Labels ``"done"`` (every client holds every block) and
    ``"done1"`` (client 1 does); reward ``"frac"`` the fraction of all blocks received, ``"time"``.
    """
    bits = lambda j: [f"b{j}_{i}" for i in range(1, n + 1)]  # noqa: E731
    lines = ["ctmc", "// BitTorrent-like file distribution after Kwiatkowska, Norman and Parker, written for exactq.",
             f"const int N = {n}; // clients", f"const int K = {k}; // blocks", f"const double mu = {P2P_MU:g};", ""]
    for j in range(1, k + 1):
        lines.append(f"formula holders{j} = {'+'.join(bits(j))};")
    lines += ["", "module block1"]
    lines += [f"  {b} : [0..1] init 0; // client {i} holds block 1" for i, b in enumerate(bits(1), start=1)]
    lines += [f"  [] {b}=0 -> mu*min({P2P_SOURCES}, 1+holders1) : ({b}'=1);" for b in bits(1)]
    lines += ["endmodule", ""]
    for j in range(2, k + 1):
        ren = ", ".join(f"{a}={b}" for a, b in zip(bits(1), bits(j)))
        lines.append(f"module block{j} = block1 [ {ren} ] endmodule  // holders1 expands, then renames")
    done = " & ".join(f"holders{j}=N" for j in range(1, k + 1))
    done1 = " & ".join(f"b{j}_1=1" for j in range(1, k + 1))
    frac = "+".join(f"holders{j}" for j in range(1, k + 1))
    # the finished state gets an explicit self-loop: without it PRISM and exactq keep its rewards in C<=t
    # and I=t (a deadlock fixed by a self-loop) while Storm gives it reward 0, and the tools would differ
    lines += ["", "module tracker", f"  [finished] {done} -> 1 : true;", "endmodule",
              "", f'label "done" = {done};', f'label "done1" = {done1};',
              f'rewards "frac" true : ({frac})/(N*K); endrewards', 'rewards "time" true : 1; endrewards']
    props = ['P=? [ F<=1 "done" ]', 'P=? [ F<=2 "done" ]', 'P=? [ F<=1 "done1" ]', 'R{"time"}=? [ F "done" ]',
             'R{"frac"}=? [ C<=1 ]', 'R{"frac"}=? [ I=0.5 ]', 'S=? [ "done" ]']
    return "\n".join(lines) + "\n", {}, props


def p2p_block_generator(n: int):
    """One block's birth chain on its holders h = 0..N: h -> h+1 at rate (N-h) * 2 * min(4, 1+h)."""
    import numpy as np

    A = np.zeros((n + 1, n + 1))
    for h in range(n):
        A[h, h + 1] = (n - h) * P2P_MU * min(P2P_SOURCES, 1 + h)
        A[h, h] = -A[h, h + 1]
    return A


def p2p_block_measures(n: int, k: int) -> dict:
    """:func:`peer2peer`'s transient measures from one block's chain (the K blocks are independent
    and identical): P(done by t) = F(t)^K with F(t) = P(h(t) = N); P(client 1 done by t) =
    (E h(t) / N)^K (client 1 holds a block with probability E h / N, by symmetry); the expected
    fraction at t is E h(t) / N and its integral over [0, t] comes from Van Loan's augmented
    exponential. Returns property -> value."""
    import numpy as np
    from scipy.linalg import expm

    A = p2p_block_generator(n)
    e0 = np.zeros(n + 1)
    e0[0] = 1.0
    h = np.arange(n + 1) / n
    pt = lambda t: e0 @ expm(A * t)  # noqa: E731
    aug = np.zeros((n + 2, n + 2))
    aug[:n + 1, :n + 1] = A
    aug[:n + 1, n + 1] = h
    integral = (e0 @ expm(aug * 1.0)[:n + 1, n + 1])
    return {'P=? [ F<=1 "done" ]': pt(1.0)[n] ** k, 'P=? [ F<=2 "done" ]': pt(2.0)[n] ** k,
            'P=? [ F<=1 "done1" ]': (pt(1.0) @ h) ** k, 'R{"frac"}=? [ C<=1 ]': integral,
            'R{"frac"}=? [ I=0.5 ]': pt(0.5) @ h, 'S=? [ "done" ]': 1.0}


def p2p_lumped_chain(n: int, k: int):
    """The K blocks lumped: a state counts the blocks at each level h = 0..N (a tuple summing to K);
    a block at level h < N moves up at rate (N-h) * 2 * min(4, 1+h). Returns ``(states, Q)``;
    the expected time to "done" is the absorption time into (0, ..., 0, K)."""
    rate = [(n - h) * P2P_MU * min(P2P_SOURCES, 1 + h) for h in range(n)]

    def succ(c):
        return [(c[:h] + (c[h] - 1, c[h + 1] + 1) + c[h + 2:], c[h] * rate[h]) for h in range(n) if c[h]]

    return generator_by_search((k,) + (0,) * n, succ)


# ----------------------------------------------------------------------------- gambler's ruin
GAMBLER_STEPS = 1000    # the step bound of the bounded properties
GAMBLER_GAIN = 20       # ... which ask for a gain of 20 within 1000 bets


def gambler(n: int, bias: int) -> tuple[str, dict, list]:
    """Gambler's ruin, a DTMC: a fortune x in 0..N starts at N/2 and each bet wins 1 with
    probability p = 1/2 + BIAS/1000 or loses 1; ruin (x = 0) and riches (x = N) absorb.

    The fair walk is the example on which value iteration that stops when an iteration changes
    little stops far from the value (Haddad & Monmege, "Interval iteration algorithm for MDPs and
    IMDPs", TCS 735, 2018; also Wimmer et al. and Baier et al. on sound value iteration): from
    zero, the probability of riches grows by about 1/N^2 per iteration. Closed forms in
    :func:`gambler_closed_forms`.
    """
    text = """dtmc
// Gambler's ruin, written for exactq.
const int N; // the fortune that ends the game with riches
const int BIAS; // p = 1/2 + BIAS/1000
const double p = 1/2 + BIAS/1000;
const int X0 = floor(N/2);
const int T = %d; // bets of the bounded properties
const int GAIN = %d;

module gambler
  x : [0..N] init X0;
  [bet] x>0 & x<N -> p : (x'=x+1) + 1-p : (x'=x-1);
  [over] x=0 | x=N -> true;
endmodule

label "rich" = x=N;
label "ruined" = x=0;
rewards "bets" [bet] true : 1; endrewards
rewards "fortune" true : x; endrewards
""" % (GAMBLER_STEPS, GAMBLER_GAIN)
    props = ['P=? [ F "rich" ]', 'P=? [ F "ruined" ]', 'R{"bets"}=? [ F "rich" | "ruined" ]', 'S=? [ "rich" ]',
             'P=? [ F<=T x>=X0+GAIN ]', 'R{"bets"}=? [ C<=T ]', 'R{"fortune"}=? [ I=T ]',
             'P=? [ x>X0-GAIN U "rich" ]']
    return text, {"N": n, "BIAS": bias}, props


def gambler_closed_forms(n: int, bias: int) -> dict:
    """Ruin probabilities and the expected duration from x0 = floor(N/2): with r = q/p,
    P(riches) = (1 - r^x0) / (1 - r^N) (x0/N when fair), the duration x0 (N - x0) when fair and
    x0/(q-p) - N/(q-p) P(riches) otherwise; ruin (r^x0 - r^N) / (1 - r^N) on its own (1 - P(riches) would
    lose it to rounding when it is tiny); P(x > x0 - g until riches) is the ruin problem on
    (x0 - g, N) started g above its floor. Returns property -> value."""
    p = 0.5 + bias / 1000
    q = 1 - p
    x0 = n // 2

    def win(x, top):                   # P(reach top before 0 from x)
        if bias == 0:
            return x / top
        r = q / p
        return -math.expm1(x * math.log(r)) / -math.expm1(top * math.log(r))

    def lose(x, top):                  # P(reach 0 before top from x) = (r^x - r^top) / (1 - r^top), not 1 - win
        if bias == 0:
            return (top - x) / top
        lr = math.log(q / p)
        return math.exp(x * lr) * -math.expm1((top - x) * lr) / -math.expm1(top * lr)

    w = win(x0, n)
    dur = x0 * (n - x0) if bias == 0 else x0 / (q - p) - n / (q - p) * w
    g = GAMBLER_GAIN
    return {'P=? [ F "rich" ]': w, 'P=? [ F "ruined" ]': lose(x0, n), 'R{"bets"}=? [ F "rich" | "ruined" ]': dur,
            'S=? [ "rich" ]': w, 'P=? [ x>X0-GAIN U "rich" ]': win(g, n - x0 + g) if x0 - g > 0 else w}


def gambler_bounded(n: int, bias: int) -> dict:
    """The step-bounded properties of :func:`gambler`, by pushing the distribution forward T steps
    exactly (numpy, on the states within T of x0): P(gain of 20 within T), E[min(T, duration)],
    E[x_T]. Returns property -> value."""
    import numpy as np

    p = 0.5 + bias / 1000
    x0, T, g = n // 2, GAMBLER_STEPS, GAMBLER_GAIN
    live = np.zeros(n + 1, dtype=bool)
    live[1:n] = True

    def step(d):
        mv = np.where(live, d, 0.0)
        nd = np.where(live, 0.0, d)
        nd[2:] += p * mv[1:-1]
        nd[:-2] += (1 - p) * mv[1:-1]
        return nd

    dist = np.zeros(n + 1)              # the chain itself: expected bets and the fortune at T
    dist[x0] = 1.0
    steps = 0.0
    for _ in range(T):
        steps += dist[live].sum()
        dist = step(dist)
    d = np.zeros(n + 1)                 # the bounded reach: mass that reaches x0 + g is taken out
    d[x0] = 1.0
    hit = 0.0
    for t in range(T + 1):
        if x0 + g <= n:
            hit += d[x0 + g:].sum()
            d[x0 + g:] = 0.0
        if t < T:
            d = step(d)
    return {'P=? [ F<=T x>=X0+GAIN ]': hit, 'R{"bets"}=? [ C<=T ]': steps,
            'R{"fortune"}=? [ I=T ]': float(np.arange(n + 1) @ dist)}


# ----------------------------------------------------------------------------- loss network
#: classes of the loss system: (channels per call, offered load per channel of capacity, service rate)
LOSS_CLASSES = ((1, 0.3, 1.0), (2, 0.1, 0.5), (4, 0.1, 2.0))


def loss_network(c: int) -> tuple[str, dict, list]:
    """A multi-rate Erlang loss system (the stochastic knapsack: Kaufman, "Blocking in a shared
    resource environment", IEEE Trans. Comm. 29(10), 1981; Roberts 1981), a CTMC.

    ``C`` channels shared by three classes of calls; a class-k call needs b_k channels (1, 2, 4),
    arrives at rate a_k mu_k (offered loads a_k = 0.3 C, 0.1 C, 0.1 C) and is lost when fewer than
    b_k channels are free; it holds its channels for an exponential time of rate mu_k (1, 0.5, 2).
    One module per class, written out (in the order 3, 1, 2; departures before arrivals). The occupancy distribution has the product form of the Kaufman-Roberts
    recursion (:func:`kaufman_roberts`).
    """
    lines = ["ctmc", "// Multi-rate Erlang loss system (stochastic knapsack), written for exactq.",
             "const int C; // channels"]
    for k, (b, load, mu) in enumerate(LOSS_CLASSES, start=1):
        lines += [f"const int b{k} = {b};", f"const double mu{k} = {mu:g};", f"const double lam{k} = {load:g}*C*mu{k};"]
    lines += ["", "formula occ = n1*b1 + n2*b2 + n3*b3; // busy channels", "formula free = C - occ;", "",
              "// One module per class, each written out: renaming class1 would rename the n1 and b1 inside",
              "// the formula free as well (formulas are expanded before renaming, in PRISM and Storm alike).", ""]
    for k in (3, 1, 2):
        lines += [f"module class{k}", f"  n{k} : [0..floor(C/b{k})] init 0; // calls in progress",
                  f"  [end{k}] n{k}>0 -> n{k}*mu{k} : (n{k}'=n{k}-1);",
                  f"  [arrive{k}] free >= b{k} -> lam{k} : (n{k}'=n{k}+1);", "endmodule", ""]
    lines += ['label "block3" = free < b3;', 'label "full" = free = 0;',
              'rewards "occupancy" true : occ; endrewards',
              'rewards "admitted" [arrive1] true : 1; [arrive2] true : 1; [arrive3] true : 1; endrewards',
              'rewards "wide" true : n3; endrewards', 'rewards "time" true : 1; endrewards']
    props = ['S=? [ "block3" ]', 'S=? [ "full" ]', 'S=? [ free < b2 ]', 'R{"occupancy"}=? [ S ]',
             'R{"admitted"}=? [ S ]', 'R{"wide"}=? [ S ]', 'P=? [ F<=1 "block3" ]', 'R{"occupancy"}=? [ C<=1 ]',
             'R{"time"}=? [ F "full" ]', 'R{"admitted"}=? [ C<=0.5 ]']
    return "\n".join(lines) + "\n", {"C": c}, props


def kaufman_roberts(c: int) -> dict:
    """Stationary measures of :func:`loss_network` by the Kaufman-Roberts recursion on the
    occupancy j = 0..C: j q(j) = sum_k a_k b_k q(j - b_k). Class-k blocking B_k = sum of q(j) over
    j > C - b_k; the mean number of class-k calls a_k (1 - B_k); admissions per unit time
    sum_k lambda_k (1 - B_k). Rescaled as it goes so that q stays within floating point.
    Returns property -> value."""
    import numpy as np

    a = [load * c for (_, load, _) in LOSS_CLASSES]
    b = [bb for (bb, _, _) in LOSS_CLASSES]
    q = np.zeros(c + 1)
    q[0] = 1.0
    for j in range(1, c + 1):
        q[j] = sum(a[k] * b[k] * q[j - b[k]] for k in range(3) if j >= b[k]) / j
        if q[j] > 1e250:
            q[:j + 1] /= q[j]
    q /= q.sum()
    block = [q[c - bb + 1:].sum() for bb in b]
    lam = [a[k] * LOSS_CLASSES[k][2] for k in range(3)]
    return {'S=? [ "block3" ]': block[2], 'S=? [ "full" ]': q[c], 'S=? [ free < b2 ]': block[1],
            'R{"occupancy"}=? [ S ]': float(np.arange(c + 1) @ q),
            'R{"admitted"}=? [ S ]': sum(lam[k] * (1 - block[k]) for k in range(3)),
            'R{"wide"}=? [ S ]': a[2] * (1 - block[2])}


def loss_chain(c: int):
    """The chain of :func:`loss_network` enumerated directly: states (n1, n2, n3), start empty.
    Returns ``(states, Q)``."""
    lam = [load * c * mu for (_, load, mu) in LOSS_CLASSES]

    def succ(n):
        occ = sum(n[k] * LOSS_CLASSES[k][0] for k in range(3))
        out = []
        for k, (b, _, mu) in enumerate(LOSS_CLASSES):
            if c - occ >= b:
                out.append((n[:k] + (n[k] + 1,) + n[k + 1:], lam[k]))
            if n[k]:
                out.append((n[:k] + (n[k] - 1,) + n[k + 1:], n[k] * mu))
        return out

    return generator_by_search((0, 0, 0), succ)


# ----------------------------------------------------------------------------- zeroconf
ZC_ADDRESSES = 65024    # the IPv4 link-local range 169.254.1.0 - 169.254.254.255


def zeroconf(probes: int, hosts: int) -> tuple[str, dict, list]:
    """Zeroconf dynamic address configuration (Cheshire, Aboba & Guttman's IETF draft; the DTMC
    analysed by Bohnenkamp, van der Stok, Hermanns & Vaandrager, DSN 2003, and by Kwiatkowska,
    Norman, Parker & Sproston, FORMATS 2003).

    A new host picks one of 65,024 addresses at random; ``M`` hosts hold one already, so it is in
    use with probability q = M / 65024. The host sends ``N`` probes, one per step; each probe (or
    the owner's answer) is lost with probability 0.1 when the address is in use (no answer
    otherwise). An answer makes the host pick a new address; after N unanswered probes it takes
    the address, wrongly if it is in use. Rewards ``"probes"`` and ``"attempts"``. Closed forms in
    :func:`zeroconf_closed_forms`.
    """
    text = """dtmc
// Zeroconf address configuration after Bohnenkamp et al. (2003), written for exactq.
const int N; // probes before the host takes an address
const int M; // hosts already configured
const double q = M/%d; // the chosen address is in use
const double loss = 0.1; // a probe or its answer is lost

module host
  phase : [0..2] init 0; // 0: choose an address, 1: probing, 2: configured
  used : bool init false; // the chosen address is in use
  sent : [0..N] init 0; // probes sent for this address
  [choose] phase=0 -> q : (phase'=1) & (used'=true) & (sent'=0) + 1-q : (phase'=1) & (used'=false) & (sent'=0);
  [probe] phase=1 & sent<N & used -> loss : (sent'=sent+1) + 1-loss : (phase'=0);
  [probe] phase=1 & sent<N & !used -> (sent'=sent+1);
  [take] phase=1 & sent=N -> (phase'=2);
  [idle] phase=2 -> true;
endmodule

label "error" = phase=2 & used;
label "configured" = phase=2;
rewards "probes" [probe] true : 1; endrewards
rewards "attempts" [choose] true : 1; endrewards
""" % ZC_ADDRESSES
    props = ['P=? [ F "error" ]', 'R{"probes"}=? [ F "configured" ]', 'R{"attempts"}=? [ F "configured" ]',
             'P=? [ F<=N+2 "configured" ]', 'S=? [ "error" ]', 'P=? [ F<=2*N+4 "error" ]']
    return text, {"N": probes, "M": hosts}, props


def zeroconf_closed_forms(probes: int, hosts: int) -> dict:
    """Closed forms for :func:`zeroconf`: an attempt on a used address goes unanswered with
    probability l^N (l = 0.1), so an attempt fails (a new address) with f = q (1 - l^N); attempts
    are geometric, error = q l^N / (1 - f), expected attempts 1 / (1 - f). Probes per attempt: N on
    a free address, sum_{i<N} l^i on a used one (probe i+1 goes out iff the first i were lost).
    The first attempt ends configured after N + 2 steps with probability 1 - f (a failed attempt
    takes at least 2 steps, so no later one fits); an error within 2N + 4 steps sums, over the
    failed attempts that fit before it (i losses then an answer: i + 2 steps), their
    probabilities times q l^N.
    Returns property -> value."""
    q = hosts / ZC_ADDRESSES
    ln = 0.1
    n = probes
    f = q * (1 - ln ** n)
    per_used = sum(ln ** i for i in range(n))        # on a used address probe i+1 goes out iff i were lost
    probes_per_attempt = (1 - q) * n + q * per_used
    # error within 2N+4 steps: failed attempts each take (i+2) steps (choose + i+1 probes, i < N),
    # the erring attempt takes N + 2 (choose, N probes, take); enumerate the failed prefixes that fit
    bound = 2 * n + 4
    err = 0.0
    prefix = {0: 1.0}                                # steps used -> probability of the failed attempts so far
    while prefix:
        nxt = {}
        for used_steps, pr in prefix.items():
            if used_steps + n + 2 <= bound:
                err += pr * q * ln ** n
            for i in range(n):                       # answered after probe i+1: i losses then an answer
                s = used_steps + i + 2
                if s + n + 2 <= bound:
                    nxt[s] = nxt.get(s, 0.0) + pr * q * ln ** i * (1 - ln)
        prefix = nxt
    return {'P=? [ F "error" ]': q * ln ** n / (1 - f), 'R{"probes"}=? [ F "configured" ]': probes_per_attempt / (1 - f),
            'R{"attempts"}=? [ F "configured" ]': 1 / (1 - f), 'P=? [ F<=N+2 "configured" ]': 1 - f,
            'S=? [ "error" ]': q * ln ** n / (1 - f), 'P=? [ F<=2*N+4 "error" ]': err}


#: name -> (generator, quick sizes, full sizes, the size parameters' names). The full sizes aim at Storm's
#: default engine taking about 0.1-100 s on a 2-core machine. States at the full sizes: central_server
#: C(N+M, M) = 46,376 / 316,251 / 176,851 / 230,230; peer2peer 2^(NK) = 4,096 / 32,768 / 65,536 / 1,048,576;
#: gambler N + 1; loss_network 5,456 / 39,711 / 176,851; zeroconf 3N + 5 (197, 3,077: never 0.1 s, a check of
#: long chains and of the step-bounded properties).
CASES = {
    "central_server": (central_server, ((4, 2), (8, 3)), ((30, 4), (50, 4), (100, 3), (20, 6)), ("N", "M")),
    "peer2peer": (peer2peer, ((2, 2), (3, 2)), ((3, 4), (5, 3), (4, 4), (4, 5)), ("N", "K")),
    "gambler": (gambler, ((30, 0), (40, 25)), ((1000, 0), (10000, 0), (100000, 0), (100000, 1)), ("N", "BIAS")),
    "loss_network": (loss_network, ((12,), (20,)), ((60,), (120,), (200,)), ("C",)),
    "zeroconf": (zeroconf, ((2, 20), (4, 1000)), ((64, 1000), (1024, 20000)), ("N", "M")),
}
