"""Compare the values of a bench/prism.py results file for the held-out cases (bench/prism_heldout.py) with
the independent computations of that file, at every size that ran (the tests do so at the quick sizes only).

    python bench/prism_heldout_check.py bench/results_prism_heldout.json

Prints, per case and size, the largest relative difference of exactq's and of Storm's sparse-LU values to the
independent ones, and each property above 1e-9.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prism_heldout as H  # noqa: E402


def independent(case: str, size: tuple) -> dict:
    if case == "central_server":
        return H.buzen(*size)
    if case == "peer2peer":
        import numpy as np
        import scipy.sparse.linalg as spla

        out = H.p2p_block_measures(*size)
        states, Q = H.p2p_lumped_chain(*size)
        keep = np.array([s[-1] != size[1] for s in states])
        h = spla.spsolve((-Q[keep][:, keep]).tocsc(), np.ones(keep.sum()))
        out['R{"time"}=? [ F "done" ]'] = h[0]
        return out
    if case == "gambler":
        return {**H.gambler_closed_forms(*size), **H.gambler_bounded(*size)}
    if case == "loss_network":
        return H.kaufman_roberts(*size)
    if case == "zeroconf":
        return H.zeroconf_closed_forms(*size)
    return {}


def rel(a, b):
    if not isinstance(a, (int, float)):
        return None
    return 0.0 if a == b else abs(a - b) / max(abs(b), 1e-300)


def main(path: str) -> int:
    with open(path) as fh:
        doc = json.load(fh)
    for e in doc["runs"]:
        size = tuple(e["size"]) if isinstance(e["size"], list) else (e["size"],)
        want = independent(e["case"], size)
        worst = {"exactq": 0.0, "storm_best": 0.0}
        notes = []
        for v in worst:
            for r in e.get(v, {}).get("results", []):
                if r["property"] in want:
                    d = rel(r["value"], float(want[r["property"]]))
                    if d is None:
                        continue
                    worst[v] = max(worst[v], d)
                    if d > 1e-9:
                        notes.append(f"    {v:10} {r['property']:40} {r['value']!r} vs {float(want[r['property']])!r} "
                                     f"({d:.1e})")
        ran = {v: "results" in e.get(v, {}) for v in worst}
        shown = {v: f"{worst[v]:.2g}" if ran[v] else "-" for v in worst}
        print(f"{e['case']:15} {e['size_label']:>10}  {len(want)} independent values; max rel diff exactq "
              f"{shown['exactq']:8}  storm_best {shown['storm_best']}")
        for n in notes:
            print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results_prism_heldout.json"))
