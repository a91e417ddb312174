"""Benchmark (not a test): state keys wider than 64 bits, the representations compared.

A state space of ``n`` states whose box needs two 61-bit words per state (a wide
PRISM model: leader election, crowds), and ``4 n`` lookups (the targets of the
transitions), each representation timed on the same data in one run (medians of
``--repeat``):

``narrow``
    The reference: one int64 mixed-radix key per state (what a box of at most 2^61
    points uses), sorted, and ``np.searchsorted``.
``hashed`` (chosen)
    The words hashed into one int64 key (:func:`exactq.statespace.hash_words`),
    sorted; a lookup is ``searchsorted`` on the keys plus a comparison of the words
    at the position found (exact; a collision at construction re-seeds).
``void``
    The words as one opaque 16-byte value (``np.void``): ``np.unique`` and
    ``np.searchsorted`` on the structured array (exact, no hashing).
``pydict``
    The obvious code: a Python dict from tuples of words to indices.

Usage::

    python bench/statespace_keys.py                 # n = 10^6
    python bench/statespace_keys.py --n 200000 --out bench/results_statespace_keys.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from exactq.statespace import hash_words  # noqa: E402


def narrow(words, queries):
    keys = words[:, 0] >> 3  # one word (a different data set of the same size: the reference cost)
    q = queries[:, 0] >> 3
    t0 = time.perf_counter()
    order = np.argsort(keys)  # what StateSpace does (np.unique's hashing path is far slower in numpy 2.4)
    u = keys[order]
    keep = np.ones(len(u), dtype=bool)
    keep[1:] = u[1:] != u[:-1]
    u = u[keep]
    t1 = time.perf_counter()
    pos = np.minimum(np.searchsorted(u, q), len(u) - 1)
    ok = u[pos] == q
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, bool(ok.all())


def hashed(words, queries):
    t0 = time.perf_counter()
    keys = hash_words(words)
    order = np.argsort(keys)
    keys, w = keys[order], words[order]
    t1 = time.perf_counter()
    qk = hash_words(queries)
    pos = np.minimum(np.searchsorted(keys, qk), len(keys) - 1)
    ok = (keys[pos] == qk) & np.all(w[pos] == queries, axis=1)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, bool(ok.all())


def void(words, queries):
    dt = np.dtype((np.void, words.dtype.itemsize * words.shape[1]))
    t0 = time.perf_counter()
    u = np.unique(np.ascontiguousarray(words).view(dt).ravel())
    t1 = time.perf_counter()
    q = np.ascontiguousarray(queries).view(dt).ravel()
    pos = np.minimum(np.searchsorted(u, q), len(u) - 1)
    ok = u[pos] == q
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, bool(ok.all())


def pydict(words, queries):
    t0 = time.perf_counter()
    table = {tuple(r): i for i, r in enumerate(words.tolist())}
    t1 = time.perf_counter()
    idx = [table.get(tuple(r), -1) for r in queries.tolist()]
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, min(idx) >= 0


METHODS = {"narrow": narrow, "hashed": hashed, "void": void, "pydict": pydict}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    words = rng.integers(0, 2**61, size=(args.n, 2), dtype=np.int64)
    queries = words[rng.integers(0, args.n, size=4 * args.n)]
    doc = {"benchmark": "bench/statespace_keys.py", "n_states": args.n, "n_lookups": 4 * args.n, "words": 2,
           "repeat": args.repeat, "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                               "loadavg_1min": os.getloadavg()[0]}, "results": {}}
    names = args.methods.split(",")
    runs = {name: [] for name in names}
    for _ in range(args.repeat):  # interleaved, so that every method sees the same machine
        for name in names:
            runs[name].append(METHODS[name](words, queries))
    for name in names:
        runs_ = runs[name]
        doc["results"][name] = {"build_seconds": statistics.median(r[0] for r in runs_),
                                "lookup_seconds": statistics.median(r[1] for r in runs_),
                                "exact": all(r[2] for r in runs_)}
        r = doc["results"][name]
        print(f"{name:8} build {r['build_seconds']:.3f} s  lookup {r['lookup_seconds']:.3f} s  exact {r['exact']}",
              file=sys.stderr, flush=True)
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
