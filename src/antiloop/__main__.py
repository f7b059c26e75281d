"""``python -m antiloop``: the command line."""

from antiloop.cli import main

raise SystemExit(main())
