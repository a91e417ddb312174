"""Model families of exactq, installed as ``exactq.models``.

Importing the package imports every module in it, which registers the models (and
their reproductions) in the catalogue: adding a model is adding one module here.
Models check at registration that the methods they offer exist, so the catalogue
loads the solvers first (models never import solvers themselves).
"""

from exactq.catalogue import import_all as _import_all, load_solvers as _load_solvers

_load_solvers()
_import_all(__name__, __path__)
