"""The classic CTMC case studies, written for exactq from their published descriptions.

Each function returns the text of a PRISM model (``ctmc``) and the properties checked
on it by ``bench/prism.py`` and by the tests. None of them is a copy of the PRISM
benchmark suite's or QVBS files: the structure follows the papers cited, the numbers
are the published ones where the papers give them, and where a paper's model uses
immediate transitions or details not needed for a benchmark the simplification is
said in the docstring.
"""

from __future__ import annotations

__all__ = ["CASES", "tandem", "polling", "cluster", "embedded", "kanban", "fms"]


def tandem(c: int) -> tuple[str, dict, list]:
    """Tandem queueing network (Hermanns, Meyer-Kayser & Siegle, PMCCS 1999).

    A M/Cox2/1 queue feeding a M/M/1 queue, each of capacity ``c``; arrivals at rate
    ``4c``; the first server's Coxian: phase 1 at rate 2, after which a job leaves with
    probability 0.9 and otherwise needs phase 2 (rate 2); the second server at rate 4.
    A job moves on only when the second queue has room (blocking). About 2c^2 states.
    """
    text = """ctmc
// Tandem queue after Hermanns, Meyer-Kayser and Siegle (1999), written for exactq.
const int c;
const double lambda = 4*c;
const double mu1a = 0.1*2;
const double mu1b = 0.9*2;
const double mu2 = 2;
const double kappa = 4;

module serverC
  sc : [0..c];
  ph : [1..2];
  [] (sc<c) -> lambda : (sc'=sc+1);
  [route] (sc>0)&(ph=1) -> mu1b : (sc'=sc-1);
  [] (sc>0)&(ph=1) -> mu1a : (ph'=2);
  [route] (sc>0)&(ph=2) -> mu2 : (ph'=1)&(sc'=sc-1);
endmodule

module serverM
  sm : [0..c];
  [route] (sm<c) -> 1 : (sm'=sm+1);
  [] (sm>0) -> kappa : (sm'=sm-1);
endmodule

label "full" = sc=c;
rewards "customers" true : sc + sm; endrewards
rewards "moved" [route] true : 1; endrewards
"""
    props = ['R{"customers"}=? [ S ]', 'S=? [ sc=c ]', 'R{"moved"}=? [ S ]', 'P=? [ F<=0.25 sc=c ]',
             'R{"customers"}=? [ C<=1 ]', 'R{"customers"}=? [ I=0.5 ]']
    return text, {"c": c}, props


def polling(n: int) -> tuple[str, dict, list]:
    """Cyclic server polling system (Ibe & Trivedi, IEEE JSAC 8(9), 1990).

    ``n`` stations of one buffer place each, a single server travelling from station
    to station (rate gamma = 200); a station with a job is served (rate mu = 1) before
    the server moves on; jobs arrive at an empty station at rate mu/n. Stations are one
    module renamed ``n - 1`` times. 1.5 n 2^n states.
    """
    lines = ["ctmc", "// Cyclic polling after Ibe and Trivedi (1990), written for exactq.", f"const int N = {n};",
             "const double gamma = 200;", "const double mu = 1;", "const double lambda = mu/N;", "",
             "module server", "  s : [1..N];", "  a : [0..1]; // 0: travelling to station s, 1: serving it"]
    for i in range(1, n + 1):
        nxt = i % n + 1
        lines += [f"  [loop{i}] (s={i})&(a=0) -> gamma : (s'={nxt});",
                  f"  [poll{i}] (s={i})&(a=0) -> gamma : (a'=1);",
                  f"  [serve{i}] (s={i})&(a=1) -> mu : (s'={nxt})&(a'=0);"]
    lines += ["endmodule", "", "module station1", "  s1 : bool;", "  [] !s1 -> lambda : (s1'=true);",
              "  [loop1] !s1 -> 1 : true;", "  [poll1] s1 -> 1 : true;", "  [serve1] s1 -> 1 : (s1'=false);",
              "endmodule"]
    for i in range(2, n + 1):
        lines.append(f"module station{i} = station1 [ s1=s{i}, loop1=loop{i}, poll1=poll{i}, serve1=serve{i} ] "
                     "endmodule")
    waiting = " + ".join(f"(s{i}?1:0)" for i in range(1, n + 1))
    lines += ["", 'label "served1" = s=1 & a=1;', f'rewards "waiting" true : {waiting}; endrewards',
              'rewards "services" [serve1] true : 1; endrewards']
    props = ['S=? [ s1 & !(s=1 & a=1) ]', 'R{"waiting"}=? [ S ]', 'R{"services"}=? [ S ]',
             'P=? [ !"served1" U<=5 "served1" ]']
    return "\n".join(lines) + "\n", {}, props


def cluster(n: int) -> tuple[str, dict, list]:
    """Workstation cluster (Haverkort, Hermanns & Katoen, SRDS 2000).

    Two sub-clusters of ``n`` workstations, each behind a switch, the switches joined
    by a backbone. Workstations fail at rate 1/500 each, switches at 1/4000, the
    backbone at 1/5000; one repair unit repairs one component at a time (workstations
    at rate 2, switches 0.25, the backbone 0.125), starting a repair at rate 10. The
    minimum quality of service: at least 3n/4 workstations working and connected. The
    right side is the left one renamed, the switches the backbone renamed.
    """
    text = """ctmc
// Workstation cluster after Haverkort, Hermanns and Katoen (2000), written for exactq.
const int N;
const double ws_fail = 1/500;
const double switch_fail = 1/4000;
const double line_fail = 1/5000;

module Left
  left_n : [0..N] init N;
  left : bool; // a left workstation is being repaired
  [] left_n>0 -> ws_fail*left_n : (left_n'=left_n-1);
  [startLeft] !left & left_n<N -> 1 : (left'=true);
  [repairLeft] left & left_n<N -> 1 : (left'=false) & (left_n'=left_n+1);
endmodule

module Right = Left [ left_n=right_n, left=right, startLeft=startRight, repairLeft=repairRight ] endmodule

module Line
  line : bool; // under repair
  line_n : bool init true; // working
  [] line_n -> line_fail : (line_n'=false);
  [startLine] !line & !line_n -> 1 : (line'=true);
  [repairLine] line & !line_n -> 1 : (line'=false) & (line_n'=true);
endmodule

module ToLeft = Line [ line=toleft, line_n=toleft_n, line_fail=switch_fail, startLine=startToLeft,
                       repairLine=repairToLeft ] endmodule
module ToRight = Line [ line=toright, line_n=toright_n, line_fail=switch_fail, startLine=startToRight,
                        repairLine=repairToRight ] endmodule

module Repairman
  r : bool; // busy
  [startLeft] !r -> 10 : (r'=true);
  [startRight] !r -> 10 : (r'=true);
  [startToLeft] !r -> 10 : (r'=true);
  [startToRight] !r -> 10 : (r'=true);
  [startLine] !r -> 10 : (r'=true);
  [repairLeft] r -> 2 : (r'=false);
  [repairRight] r -> 2 : (r'=false);
  [repairToLeft] r -> 0.25 : (r'=false);
  [repairToRight] r -> 0.25 : (r'=false);
  [repairLine] r -> 0.125 : (r'=false);
endmodule

formula left_ok = left_n >= 3*N/4 & toleft_n;
formula right_ok = right_n >= 3*N/4 & toright_n;
formula both_ok = left_n + right_n >= 3*N/4 & toleft_n & line_n & toright_n;
label "minimum" = left_ok | right_ok | both_ok;
rewards "percent_op" true : 100 * (left_n + right_n) / (2*N); endrewards
rewards "repairs" [repairLeft] true : 1; [repairRight] true : 1; endrewards
"""
    props = ['S=? [ !"minimum" ]', 'R{"percent_op"}=? [ S ]', 'R{"repairs"}=? [ S ]',
             'P=? [ F<=10 !"minimum" ]']
    return text, {"N": n}, props


def embedded(max_count: int) -> tuple[str, dict, list]:
    """Embedded control system (Muppala, Ciardo & Trivedi, 1994).

    Three sensors (two needed), two actuators (one needed), an input, a main and an
    output processor; hours as the time unit. Sensors fail at 1/month, actuators at
    1/(2 months), processors permanently at 1/year and transiently at 1/day (reboot
    in 30 s), the bus at 1/year. When the input or output processor is down the main
    processor skips its cycle (one per minute); more than ``max_count`` consecutive
    skips shut the system down. Nothing is repaired, so the failed states absorb.
    """
    text = """ctmc
// Embedded control system after Muppala, Ciardo and Trivedi (1994), written for exactq.
const int MAX_COUNT;
const double sensor_fail = 1/(30*24);
const double actuator_fail = 1/(2*30*24);
const double proc_fail = 1/(365*24);
const double trans_fail = 1/24;
const double reboot = 120;
const double timeout = 60;
const double bus_fail = 1/(365*24);

formula down = s<2 | act<1 | i=0 | o=0 | m=0 | !bus;

module sensors
  s : [0..3] init 3;
  [] s>0 -> s*sensor_fail : (s'=s-1);
endmodule
module actuators
  act : [0..2] init 2;
  [] act>0 -> act*actuator_fail : (act'=act-1);
endmodule
module input // 2 working, 1 transient fault (rebooting), 0 failed
  i : [0..2] init 2;
  [] i>0 -> proc_fail : (i'=0);
  [] i=2 -> trans_fail : (i'=1);
  [] i=1 -> reboot : (i'=2);
endmodule
module output = input [ i=o ] endmodule
module main
  m : [0..2] init 2;
  count : [0..MAX_COUNT+1];
  [] m>0 -> proc_fail : (m'=0);
  [] m=2 -> trans_fail : (m'=1);
  [] m=1 -> reboot : (m'=2);
  [] m=2 & i=2 & o=2 & count>0 -> timeout : (count'=0);
  [] m=2 & !(i=2 & o=2) & count<=MAX_COUNT -> timeout : (count'=count+1) & (m'=count=MAX_COUNT ? 0 : 2);
endmodule
module bus_m
  bus : bool init true;
  [] bus -> bus_fail : (bus'=false);
endmodule

label "down" = down;
rewards "up_time" !down : 1; endrewards
rewards "skips" count>0 : 1; endrewards
"""
    props = ['P=? [ F<=168 "down" ]', 'R{"up_time"}=? [ C<=168 ]', 'R{"skips"}=? [ I=24 ]',
             'S=? [ "down" ]', 'P=? [ F[24,168] "down" ]']
    return text, {"MAX_COUNT": max_count}, props


def kanban(t: int) -> tuple[str, dict, list]:
    """Kanban manufacturing system (Ciardo & Tilgner, 1996).

    Four stations with ``t`` kanbans each: station 1 feeds stations 2 and 3 (a fork),
    which feed station 4 (a join). At every station a part is machined (rate 1) and is
    good with probability 0.8 or goes back for rework (rework at rate 0.3); a finished
    part moves on, with its kanban freed, when the next station(s) have a free kanban
    (rate 1); raw parts enter station 1 at rate 1 and finished parts leave station 4 at
    rate 1. Per station: x parts in the machine, y in rework, z finished.
    """
    lines = ["ctmc", "// Kanban system after Ciardo and Tilgner (1996), written for exactq.", "const int t;", ""]
    for k in range(1, 5):
        lines += [f"module station{k}", f"  x{k} : [0..t];", f"  y{k} : [0..t];", f"  z{k} : [0..t];",
                  f"  [] x{k}>0 -> 0.8 : (x{k}'=x{k}-1)&(z{k}'=z{k}+1) + 0.2 : (x{k}'=x{k}-1)&(y{k}'=y{k}+1);",
                  f"  [] y{k}>0 -> 0.3 : (y{k}'=y{k}-1)&(x{k}'=x{k}+1);"]
        free = f"x{k}+y{k}+z{k}<t"
        if k == 1:
            lines += [f"  [] {free} -> 1 : (x1'=x1+1);", "  [fork] z1>0 -> 1 : (z1'=z1-1);"]
        elif k in (2, 3):
            lines += [f"  [fork] {free} -> 1 : (x{k}'=x{k}+1);", f"  [join] z{k}>0 -> 1 : (z{k}'=z{k}-1);"]
        else:
            lines += [f"  [join] {free} -> 1 : (x4'=x4+1);", "  [out] z4>0 -> 1 : (z4'=z4-1);"]
        lines.append("endmodule")
    lines += ['rewards "throughput" [out] true : 1; endrewards',
              'rewards "wip" true : x1+y1+z1+x2+y2+z2+x3+y3+z3+x4+y4+z4; endrewards']
    props = ['R{"throughput"}=? [ S ]', 'R{"wip"}=? [ S ]', 'S=? [ z4 = t ]', 'P=? [ F<=5 z4 > 0 ]']
    return "\n".join(lines) + "\n", {"t": t}, props


def fms(n: int) -> tuple[str, dict, list]:
    """Flexible manufacturing system (Ciardo & Trivedi, 1993), simplified.

    Three part types, ``n`` pallets each. P1 parts are machined on M1 (3 machines,
    rate 1/4 each), P2 on M2 (1 machine, rate 1/6), P3 on M3 (2 machines, rate 1/2
    each). A machined P1 and a machined P2 are assembled into one P12 on M3 (rate 1/2,
    M3 shared with P3), or leave separately (P1 at rate 1/5, P2 at rate 1/5); finished
    parts are unloaded and their pallets reloaded (rate 1). The paper's immediate
    transitions (the choices at the assembly) are exponential here.
    """
    text = """ctmc
// Flexible manufacturing system after Ciardo and Trivedi (1993), simplified, written for exactq.
const int n;

module p1
  w1 : [0..n] init n;  // waiting for M1
  m1 : [0..3];         // on M1
  d1 : [0..n];         // machined
  u1 : [0..n];         // to unload
  [] w1>0 & m1<3 -> 1 : (w1'=w1-1)&(m1'=m1+1);
  [] m1>0 -> m1/4 : (m1'=m1-1)&(d1'=d1+1);
  [] d1>0 -> 1/5 : (d1'=d1-1)&(u1'=u1+1);
  [assemble] d1>0 -> 1 : (d1'=d1-1);
  [done12] true -> 1 : (w1'=w1+1);
  [] u1>0 -> 1 : (u1'=u1-1)&(w1'=w1+1);
endmodule

module p2
  w2 : [0..n] init n;
  m2 : [0..1];
  d2 : [0..n];
  u2 : [0..n];
  [] w2>0 & m2<1 -> 1 : (w2'=w2-1)&(m2'=m2+1);
  [] m2>0 -> 1/6 : (m2'=m2-1)&(d2'=d2+1);
  [] d2>0 -> 1/5 : (d2'=d2-1)&(u2'=u2+1);
  [assemble] d2>0 -> 1 : (d2'=d2-1);
  [done12] true -> 1 : (w2'=w2+1);
  [] u2>0 -> 1 : (u2'=u2-1)&(w2'=w2+1);
endmodule

module m3 // the two M3 machines: a12 assemblies and b3 P3 parts in service
  a12 : [0..2];
  b3 : [0..2];
  [assemble] a12+b3<2 -> 1 : (a12'=a12+1);
  [done12] a12>0 -> a12/2 : (a12'=a12-1);
  [start3] a12+b3<2 -> 1 : (b3'=b3+1);
  [done3] b3>0 -> b3/2 : (b3'=b3-1);
endmodule

module p3
  w3 : [0..n] init n;
  u3 : [0..n];
  [start3] w3>0 -> 1 : (w3'=w3-1);
  [done3] true -> 1 : (u3'=u3+1);
  [] u3>0 -> 1 : (u3'=u3-1)&(w3'=w3+1);
endmodule

rewards "productivity" [done12] true : 1; [done3] true : 1; endrewards
rewards "m3_busy" true : a12 + b3; endrewards
"""
    props = ['R{"productivity"}=? [ S ]', 'R{"m3_busy"}=? [ S ]', 'S=? [ w3 = n ]', 'P=? [ F<=10 u1 = n ]']
    return text, {"n": n}, props


#: name -> (generator, quick sizes, full sizes, the size parameter's name). The full sizes are those at which
#: both tools' sparse LU finishes in minutes on a 2-core machine; the tandem queue also runs at c = 700
#: (982,101 states) with ``--first-steady`` (bench/prism.py).
CASES = {
    "tandem": (tandem, (31, 127), (31, 127, 255), "c"),
    "polling": (polling, (5, 8), (5, 8, 10), "N"),
    "cluster": (cluster, (8, 16), (8, 16, 32), "N"),
    "embedded": (embedded, (2, 8), (2, 8, 32), "MAX_COUNT"),
    "kanban": (kanban, (1, 2), (1, 2), "t"),
    "fms": (fms, (2, 3), (2, 3, 4), "n"),
}
