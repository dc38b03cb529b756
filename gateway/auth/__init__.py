"""Who is calling: static bearer token, OAuth 2.0 JWT validation and AWS SigV4 behind one Authenticator seam."""

from __future__ import annotations

from typing import Any

from gateway.auth.base import ANONYMOUS, AnyOf, Authenticator, Principal
from gateway.auth.oauth import METADATA_PATH, OAuthValidator
from gateway.auth.sigv4 import SigV4Verifier, load_keys
from gateway.auth.static import StaticToken


def build_authenticator(settings: Any) -> Authenticator:
    """The static token, OAuth, SigV4, any of them (a request's scheme chooses), or nobody required."""
    members: list[Authenticator] = []
    if settings.auth_token:
        members.append(StaticToken(settings.auth_token))
    if settings.oauth_discovery_url or settings.oauth_jwks_url:
        members.append(OAuthValidator(settings))
    sigv4 = None
    if settings.sigv4_credentials:
        sigv4 = SigV4Verifier(load_keys(settings.sigv4_credentials), settings.sigv4_region, settings.sigv4_service)
    return AnyOf(members, sigv4) if members or sigv4 else Authenticator()


__all__ = ["ANONYMOUS", "METADATA_PATH", "Authenticator", "Principal", "build_authenticator"]
