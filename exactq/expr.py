"""Deprecated: native state expressions are read by the PRISM front end now (:mod:`exactq.prism.native`).

There is one expression language (:mod:`exactq.query`); this module keeps the names
that code written against the old native parser imports, ``parse_expression``,
``evaluate``, ``Expression`` and ``FUNCTIONS``, as thin aliases of
:mod:`exactq.prism.native`, whose semantics (PRISM precedence, comparison chains,
short-circuit evaluation, faults as errors) they had. Import them from there.
"""

from __future__ import annotations

import warnings

from .prism.native import Expression, evaluate, parse_expression
from .prism.syntax import EXTENDED_FUNCTIONS as FUNCTIONS

__all__ = ["Expression", "parse_expression", "evaluate", "FUNCTIONS"]

warnings.warn("exactq.expr is deprecated: use exactq.prism.native (parse_expression, evaluate); the expressions "
              "are those of the one query language", DeprecationWarning, stacklevel=2)
