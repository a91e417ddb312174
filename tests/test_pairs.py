"""The shared registry of independent-method pairs (tests/pairs/*.json).

Every solver family lists, in its own JSON file, model instances on which two
independent methods must agree (a closed form against a truncated chain, a series
against a matrix-geometric solution, ...). Each entry is run here through the public
API; the two values must agree to the entry's tolerance, each result must respect
its own bounds, and an error estimate, where given, must cover the difference
(up to the tolerance).

Entry fields: ``model``, ``params``, ``measure``, ``methods`` (two names), ``rtol``,
optional ``atol``, ``options`` (per method, a dict of solve() keywords) and ``why``.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import exactq

HERE = Path(__file__).parent / "pairs"


def _entries():
    for path in sorted(HERE.glob("*.json")):
        data = json.loads(path.read_text())
        assert data.get("source"), f"{path.name} must say where its pairs come from"
        for k, entry in enumerate(data["pairs"]):
            yield pytest.param(entry, id=f"{path.stem}-{k}-{entry['model']}-{entry['measure']}")


def _solve(entry, method):
    opts = dict(entry.get("options", {}).get(method, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve(entry["model"], entry["measure"], method=method, **opts, **entry["params"])


@pytest.mark.parametrize("entry", list(_entries()))
def test_independent_methods_agree(entry):
    a, b = (_solve(entry, m) for m in entry["methods"])
    va, vb = np.asarray(a.value, float), np.asarray(b.value, float)
    assert va.shape == vb.shape
    rtol, atol = float(entry["rtol"]), float(entry.get("atol", 0.0))
    np.testing.assert_allclose(va, vb, rtol=rtol, atol=atol, err_msg=entry.get("why", ""))
    for r in (a, b):
        if r.lower is not None:
            assert r.lower <= np.max(r.value) and np.min(r.value) <= r.upper
        if r.error_estimate is not None and not math.isinf(r.error_estimate):
            assert r.error_estimate >= 0
    # the two together must be consistent with their error estimates or the tolerance
    gap = float(np.max(np.abs(va - vb)))
    slack = sum(r.error_estimate or 0.0 for r in (a, b) if r.error_estimate is not None
                and math.isfinite(r.error_estimate))
    assert gap <= slack + rtol * float(np.max(np.abs(vb))) + atol
