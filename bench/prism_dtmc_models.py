"""Classic DTMC case studies, written for exactq from their published descriptions.

Each function returns the text of a PRISM model (``dtmc``), its constants and the
properties checked on it by ``bench/prism_build.py`` and by the tests. None of them is
a copy of the PRISM benchmark suite's files: the structure follows the papers cited,
and where the formulation differs from the suite's (variables, the order of the
phases, what is reset) the docstring says so. All three stress the builder: Herman's
ring is one synchronisation of every module with 2^tokens transitions per state;
leader election synchronises every module on every step and has a state box far
wider than 64 bits; crowds is one module with many variables (a wide box) and many
commands.

Each model also has a closed form for one property, which the tests use as an
independent check of the built chain.
"""

from __future__ import annotations

__all__ = ["CASES", "herman", "leader_sync", "crowds", "herman_three_tokens", "leader_expected_rounds",
           "crowds_observed_twice"]


def herman(n: int) -> tuple[str, dict, list]:
    """Herman's self-stabilising token ring (Herman, IPL 35(2), 1990).

    ``n`` (odd) processes in a ring, each with one bit ``x_i``; process ``i`` holds a
    token when ``x_i = x_{i-1}``. In every synchronous step, each process with a token
    sets its bit by a fair coin, each process without one copies its left
    neighbour's bit. The number of tokens is odd and never grows; the ring is stable
    when one token is left. Every configuration is an initial state
    (``init true endinit``), as in the self-stabilisation setting: 2^n states.
    """
    if n < 3 or n % 2 == 0:
        raise ValueError(f"Herman's ring needs an odd number of processes >= 3; got {n}")
    lines = ["dtmc", "// Herman's self-stabilising ring (Herman 1990), written for exactq.", f"const int N = {n};", ""]
    lines += ["module proc1", "  x1 : bool;", f"  [step] x1 = x{n} -> 0.5 : (x1'=true) + 0.5 : (x1'=false);",
              f"  [step] x1 != x{n} -> (x1'=x{n});", "endmodule"]
    for i in range(2, n + 1):
        lines.append(f"module proc{i} = proc1 [ x1=x{i}, x{n}=x{i - 1} ] endmodule")
    tokens = " + ".join(f"(x{i} = x{(i - 2) % n + 1} ? 1 : 0)" for i in range(1, n + 1))
    lines += ["", f"formula tokens = {tokens};", 'label "stable" = tokens = 1;', 'label "three" = tokens = 3;',
              'rewards "steps" true : 1; endrewards', "", "init true endinit"]
    props = ['filter(max, R{"steps"}=? [ F "stable" ], "init")', 'filter(min, P=? [ F<=10 "stable" ], "init")',
             'filter(forall, P>=1 [ F "stable" ], "init")']
    return "\n".join(lines) + "\n", {}, props


def herman_three_tokens(n: int, a: int, b: int) -> float:
    """Expected steps to stability from three tokens at distances ``a, b, n - a - b``.

    ``4abc/n`` (McIver & Morgan, IPL 94(2), 2005, for the fair coin).
    """
    c = n - a - b
    return 4.0 * a * b * c / n


def leader_sync(n: int, k: int) -> tuple[str, dict, list]:
    """Synchronous leader election in a ring (Itai & Rodeh, Inform. Comput. 88(1), 1990).

    ``n`` processes in a ring, all moving in lock step. In a round, each process
    picks a value uniformly in ``0..k-1``; the values are then passed ``n - 1`` times
    around the ring (each process reads its right neighbour's value in transit), each
    process keeping the largest value seen and whether it was seen once only. If the
    maximum is unique, its owner is elected; otherwise a new round starts. (The
    suite's model elects on *a* unique value; this one elects the unique maximum, as
    the paper's algorithm does.) The expected number of rounds is
    ``k^n / (n sum_{j<k} j^(n-1))``.
    """
    if n < 2 or k < 2:
        raise ValueError(f"leader election needs n >= 2 processes and k >= 2 values; got n={n}, k={k}")
    lines = ["dtmc", "// Synchronous leader election after Itai and Rodeh (1990), written for exactq.",
             f"const int N = {n};", f"const int K = {k};", "",
             "module control",
             "  phase : [0..3]; // 0: pick, 1: pass values around, 2: decide, 3: elected",
             "  c : [0..N-1];   // values passed so far",
             "  [pick] phase=0 -> (phase'=1) & (c'=0);",
             "  [read] phase=1 & c<N-1 -> (c'=c+1);",
             "  [elect] phase=1 & c=N-1 & u1 -> (phase'=3);",
             "  [retry] phase=1 & c=N-1 & !u1 -> (phase'=0) & (c'=0);",
             "  [done] phase=3 -> true;",
             "endmodule", "",
             "module p1",
             "  p1 : [0..K-1]; // own value",
             "  v1 : [0..K-1]; // value in transit",
             "  m1 : [0..K-1]; // largest value seen",
             "  u1 : bool;     // ... and seen once only",
             "  [pick] true -> " + " + ".join(f"1/K : (p1'={j}) & (v1'={j}) & (m1'={j}) & (u1'=true)"
                                             for j in range(k)) + ";",
             "  [read] v2 > m1 -> (v1'=v2) & (m1'=v2) & (u1'=true);",
             "  [read] v2 = m1 -> (v1'=v2) & (u1'=false);",
             "  [read] v2 < m1 -> (v1'=v2);",
             "  [retry] true -> (p1'=0) & (v1'=0) & (m1'=0) & (u1'=false);",
             "endmodule"]
    for i in range(2, n + 1):
        right = i % n + 1
        lines.append(f"module p{i} = p1 [ p1=p{i}, v1=v{i}, m1=m{i}, u1=u{i}, v2=v{right} ] endmodule")
    lines += ["", 'label "elected" = phase=3;', 'label "leader1" = phase=3 & p1=m1;',
              'rewards "rounds" [pick] true : 1; endrewards', 'rewards "steps" true : 1; endrewards']
    props = ['P=? [ F "elected" ]', 'R{"rounds"}=? [ F "elected" ]', 'P=? [ F<=3*(N+1) "elected" ]',
             'P=? [ F "leader1" ]', 'P>=1 [ F "elected" ]']
    return "\n".join(lines) + "\n", {}, props


def leader_expected_rounds(n: int, k: int) -> float:
    """``1 / P(unique maximum)`` of ``n`` values uniform in ``0..k-1``."""
    p = n * sum(j ** (n - 1) for j in range(k)) / k ** n
    return 1.0 / p


def crowds(total_runs: int, crowd_size: int) -> tuple[str, dict, list]:
    """Crowds, anonymous web browsing (Reiter & Rubin, ACM TISSEC 1(1), 1998).

    A crowd of ``crowd_size`` honest members and a share ``badC`` of corrupt ones;
    member 0 initiates ``total_runs`` runs of the protocol. In a run the message is
    first sent to a random member; a member holding it forwards it to a random
    member with probability ``PF`` and otherwise delivers it. A corrupt member that
    receives the message records its predecessor (``obs_j`` counts the runs in which
    honest member ``j`` was seen) and delivers it. One module, unlabelled commands.
    (The suite's model pads the counters to a maximal crowd; this one has one counter
    per honest member.)
    """
    if crowd_size < 2 or total_runs < 1:
        raise ValueError(f"crowds needs crowd_size >= 2 and total_runs >= 1; got {crowd_size}, {total_runs}")
    n = crowd_size
    lines = ["dtmc", "// Crowds after Reiter and Rubin (1998), written for exactq.",
             "const double PF = 0.8;   // probability of forwarding", "const double badC = 0.091; // share of corrupt members",
             "const double goodC = 1 - badC;", "const int TotalRuns;", f"const int CrowdSize = {n};", "",
             "module crowds",
             "  runs : [0..TotalRuns];   // runs started",
             "  phase : [0..2];          // 0: between runs, 1: a member holds the message, 2: all runs done",
             "  first : bool;            // the holder is the initiator, who always forwards",
             "  holder : [0..CrowdSize-1];"]
    lines += [f"  obs{j} : [0..TotalRuns];" for j in range(n)]
    lines += ["  [] phase=0 & runs<TotalRuns -> (phase'=1) & (first'=true) & (holder'=0) & (runs'=runs+1);",
              "  [] phase=0 & runs=TotalRuns -> (phase'=2);",
              "  [] phase=2 -> true;"]
    to_good = lambda w: " + ".join(f"{w}/CrowdSize : (holder'={h}) & (first'=false)" for h in range(n))  # noqa: E731
    for j in range(n):
        lines.append(f"  [] phase=1 & first & holder={j} -> badC : (obs{j}'=obs{j}+1) & (phase'=0) + "
                     f"{to_good('goodC')};")
        lines.append(f"  [] phase=1 & !first & holder={j} -> PF*badC : (obs{j}'=obs{j}+1) & (phase'=0) + "
                     f"{to_good('PF*goodC')} + (1-PF) : (phase'=0);")
    lines += ["endmodule", "", 'label "done" = phase=2;', 'label "twice" = obs0 > 1;',
              'rewards "hops" phase=1 : 1; endrewards']
    others = " | ".join(f"obs{j} > 1" for j in range(1, n))
    props = ['P=? [ F "done" & obs0 > 1 ]', f'P=? [ F "done" & ({others}) ]', 'R{"hops"}=? [ F "done" ]',
             'P=? [ F<=20 "twice" ]']
    return "\n".join(lines) + "\n", {"TotalRuns": total_runs}, props


def crowds_observed_twice(total_runs: int, crowd_size: int, pf: float = 0.8, bad: float = 0.091) -> float:
    """``P(obs0 > 1)`` at the end: each run observes the initiator with probability ``q`` independently.

    ``q = bad + (1 - bad) * (1/n) * pf*bad / (1 - pf*(1 - bad))``: the first hop's
    receiver is corrupt, or the message reaches an honest member and later a corrupt
    member receives it from member 0 (each honest holder is uniform, so a run ends
    at a corrupt member with the initiator as predecessor with that share).
    """
    good = 1 - bad
    q = bad + good * (1 / crowd_size) * pf * bad / (1 - pf * good)
    r = total_runs
    return 1 - (1 - q) ** r - r * q * (1 - q) ** (r - 1)


#: name -> (generator, quick sizes, full sizes, size names). Sizes are tuples of the generator's arguments.
CASES = {
    "herman": (herman, ((7,), (11,)), ((7,), (11,), (13,), (15,)), ("N",)),
    "leader_sync": (leader_sync, ((3, 4), (4, 4)), ((3, 4), (4, 6), (5, 4), (6, 4), (6, 6)), ("N", "K")),
    "crowds": (crowds, ((3, 5), (4, 5)), ((3, 5), (4, 10), (5, 10), (5, 15), (6, 15)), ("TotalRuns", "CrowdSize")),
}
