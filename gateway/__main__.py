"""`python -m gateway`: the same as the `agui-gateway` command."""

from gateway.server.cli import main

raise SystemExit(main())
