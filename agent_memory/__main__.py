"""``python -m agent_memory`` runs the command line (same as ``agent-memory``)."""

from .cli import main

raise SystemExit(main())
