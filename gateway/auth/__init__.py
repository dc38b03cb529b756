"""Who is calling: static bearer token and OAuth 2.0 JWT validation behind one Authenticator seam."""

from gateway.auth.base import ANONYMOUS, Authenticator, Principal, build_authenticator

__all__ = ["ANONYMOUS", "Authenticator", "Principal", "build_authenticator"]
