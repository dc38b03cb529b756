"""`python -m gateway`: the same entry point as the `agui-gateway` console script."""

from gateway.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
