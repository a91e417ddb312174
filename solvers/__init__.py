"""Numerical methods of exactq, installed as ``exactq.solvers``.

Each module registers its methods and solvers in the catalogue when it is imported:
adding a method is adding one module here (and regenerating the index,
``python -m exactq.catalogue_index``). Importing this package imports none of them:
the catalogue imports a solver module when one of its methods is chosen, or a
representation it solves is solved (:mod:`exactq.catalogue`).
"""
