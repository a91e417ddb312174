"""Numerical methods of exactq, installed as ``exactq.solvers``.

Importing the package imports every module in it, which registers their methods in
the catalogue: adding a method is adding one module here.
"""

import importlib as _importlib
import pkgutil as _pkgutil

for _m in sorted(m.name for m in _pkgutil.iter_modules(__path__)):
    _importlib.import_module(f"{__name__}.{_m}")
