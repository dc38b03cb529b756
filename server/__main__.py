"""`python -m server`: the same as the `agui-gateway` command."""

from server.cli import main

raise SystemExit(main())
