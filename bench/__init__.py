"""Benchmarks that compare the gateway with other servers doing the same work on this machine."""
