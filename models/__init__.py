"""Model families of exactq, installed as ``exactq.models``.

Importing the package imports every module in it, which registers the models (and
their reproductions) in the catalogue: adding a model is adding one module here.
Methods are registered first (``exactq.catalogue`` imports ``exactq.solvers`` before
this package).
"""

import exactq.solvers  # noqa: F401  (methods before models)
from exactq.catalogue import import_all as _import_all

_import_all(__name__, __path__)
