"""``python -m agent_memory.cli`` runs the command line (same as ``agent-memory`` and ``python -m agent_memory``)."""

from . import main

raise SystemExit(main())
