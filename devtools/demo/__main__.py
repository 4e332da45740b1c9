"""``python -m devtools.demo`` (``make demo``): see the package docstring."""

from devtools.demo.cli import main

raise SystemExit(main())
