"""``python -m exactq``: the command line (same as the ``exactq`` script)."""

from .cli import main

raise SystemExit(main())
