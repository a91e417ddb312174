"""Model families of exactq, installed as ``exactq.models``.

Importing the package imports every module in it, which registers the models (and
their reproductions) in the catalogue: adding a model is adding one module here.
Methods are registered first (``exactq.catalogue`` imports ``exactq.solvers`` before
this package).
"""

import importlib as _importlib
import pkgutil as _pkgutil

import exactq.solvers  # noqa: F401  (methods before models)

for _m in sorted(m.name for m in _pkgutil.iter_modules(__path__)):
    _importlib.import_module(f"{__name__}.{_m}")
