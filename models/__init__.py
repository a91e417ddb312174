"""Model families of exactq, installed as ``exactq.models``.

Each module registers its models (and their reproductions) in the catalogue when it
is imported: adding a model is adding one module here (and regenerating the index,
``python -m exactq.catalogue_index``). Importing this package imports none of them:
the catalogue imports a model's module when the model is named
(:func:`exactq.catalogue.get_model`), and every module when asked
(:func:`exactq.catalogue.load_all`). Models never import solvers themselves.
"""
