"""The PRISM-language front end: users' own Markov chains in the lingua franca of the field.

PRISM, Storm, ePMC and Modest read the PRISM language; this package reads its
Markov-chain fragment (``ctmc`` and ``dtmc`` models, see :mod:`exactq.prism.syntax`),
builds the chain with exactq's vectorised engine (:mod:`exactq.prism.builder`) and
checks PRISM properties on it with exactq's solvers (:mod:`exactq.prism.properties`,
:func:`exactq.solvers.csl.check_chain`).

- :func:`load_prism` — a model file as a model (``exactq.solve``, ``exactq.check``);
- :func:`load_explicit`, :func:`~exactq.prism.explicit.write_explicit`,
  :func:`~exactq.prism.explicit.read_explicit` — PRISM's explicit files;
- :func:`register` — plug-in models at run time (``exactq.register_model``; it lives in
  :mod:`exactq.plugins`, which needs no PRISM parser).
"""

from exactq.plugins import register  # (registration lives in the core: exactq.plugins)

from .lexer import PrismModelError, PrismSyntaxError, PrismUnsupportedError, PrismWarning
from .models import ChainModel, ExplicitModel, PrismModel, is_prism_path, load_explicit, load_prism, parse_constants

__all__ = ["load_prism", "load_explicit", "register", "PrismModel", "ExplicitModel", "ChainModel",
           "PrismSyntaxError", "PrismUnsupportedError", "PrismModelError", "PrismWarning", "is_prism_path",
           "parse_constants"]
