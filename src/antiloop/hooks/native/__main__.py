"""``python -m antiloop.hooks.native``: build ``antiloop-hook`` beside this interpreter."""

from antiloop.hooks.native import main

raise SystemExit(main())
