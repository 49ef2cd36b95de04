"""``python -m guard`` runs the carbguard command line."""

from guard.cli import main

raise SystemExit(main())
