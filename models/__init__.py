"""Model families of exactq, installed as ``exactq.models``; importing registers them."""

from . import basic, jsq  # noqa: F401
