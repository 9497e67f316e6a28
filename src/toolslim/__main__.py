"""`python -m toolslim` runs the command line."""

from toolslim.cli import main

raise SystemExit(main())
