"""Who is calling: static bearer token and OAuth 2.0 JWT validation behind one Authenticator seam."""

from __future__ import annotations

from typing import Any

from gateway.auth.base import ANONYMOUS, AnyOf, Authenticator, Principal
from gateway.auth.oauth import METADATA_PATH, OAuthValidator
from gateway.auth.static import StaticToken


def build_authenticator(settings: Any) -> Authenticator:
    """The static token, OAuth, both (either accepts), or nobody required, as the settings say."""
    members: list[Authenticator] = []
    if settings.auth_token:
        members.append(StaticToken(settings.auth_token))
    if settings.oauth_discovery_url or settings.oauth_jwks_url:
        members.append(OAuthValidator(settings))
    return AnyOf(members) if members else Authenticator()


__all__ = ["ANONYMOUS", "METADATA_PATH", "Authenticator", "Principal", "build_authenticator"]
