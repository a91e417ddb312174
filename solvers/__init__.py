"""Numerical methods of exactq, installed as ``exactq.solvers``.

Importing the package imports every module in it, which registers their methods in
the catalogue: adding a method is adding one module here.
"""

from exactq.catalogue import import_all as _import_all

_import_all(__name__, __path__)
