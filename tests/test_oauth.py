"""OAuth with real signed tokens from a local issuer on loopback (discovery + JWKS), against a real gateway."""

from __future__ import annotations

import base64
import json

import pytest

from tests.support import post_sse, run_body

METADATA = "/.well-known/oauth-protected-resource"


@pytest.fixture
def gateway_oauth(start_gateway, issuer):
    return start_gateway(
        "--oauth-discovery-url",
        issuer.issuer + "/.well-known/openid-configuration",
        "--oauth-audience",
        "api://agui",
        "--oauth-scope",
        "agui.run",
        "--public-url",
        "{url}",
    )


def call(client, server, token: str | None, path: str = "/"):
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return post_sse(client, server.url + path, run_body("hi"), headers=headers)


def refused(result, code="UNAUTHORIZED", status=401, reason="invalid_token"):
    assert result.status == status, result.raw
    assert json.loads(result.raw)["error"]["code"] == code
    challenge = result.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'resource_metadata="' in challenge and challenge.count(METADATA) == 1
    if reason:
        assert f'error="{reason}"' in challenge


def test_valid_token_runs(gateway_oauth, issuer, client):
    result = call(client, gateway_oauth, issuer.token())
    assert result.status == 200 and result.terminal["outcome"]["type"] == "success"


def test_missing_expired_and_foreign_tokens_are_401(gateway_oauth, issuer, client):
    refused(call(client, gateway_oauth, None), reason=None)
    refused(call(client, gateway_oauth, issuer.token(lifetime=-120)))  # past the 30 s leeway
    refused(call(client, gateway_oauth, issuer.token(aud="api://other")))
    refused(call(client, gateway_oauth, issuer.token(iss="https://evil.example/realm")))
    refused(call(client, gateway_oauth, issuer.token(exp=None)))
    refused(call(client, gateway_oauth, "not.a.jwt"))


def test_missing_scope_is_403(gateway_oauth, issuer, client):
    refused(call(client, gateway_oauth, issuer.token(scope="openid")), code="ACCESS_DENIED", status=403, reason="insufficient_scope")


def test_alg_none_and_hmac_confusion_are_refused(gateway_oauth, issuer, client):
    def b64(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    good = json.loads(base64.urlsafe_b64decode(issuer.token().split(".")[1] + "=="))
    refused(call(client, gateway_oauth, f"{b64({'alg': 'none', 'kid': 'k1'})}.{b64(good)}."))
    import hashlib
    import hmac

    public_jwk = json.dumps(issuer.jwks()["keys"][0]).encode()
    signing_input = f"{b64({'alg': 'HS256', 'kid': 'k1'})}.{b64(good)}"
    signature = base64.urlsafe_b64encode(hmac.new(public_jwk, signing_input.encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    refused(call(client, gateway_oauth, f"{signing_input}.{signature}"))


def test_unknown_kid_then_key_rotation(gateway_oauth, issuer, client):
    assert call(client, gateway_oauth, issuer.token()).status == 200
    fetches = issuer.jwks_fetches
    issuer.add_key("k2", publish=False)
    refused(call(client, gateway_oauth, issuer.token("k2")))  # not published yet
    assert issuer.jwks_fetches == fetches + 1  # an unknown kid triggers one JWKS fetch
    issuer.published.append("k2")  # rotation: the issuer publishes the new key
    issuer.published.remove("k1")
    refused(call(client, gateway_oauth, issuer.token("k2")))  # the same unknown kid is not looked up again for a while
    assert issuer.jwks_fetches == fetches + 1  # (the negative cache: published or not, no second fetch for it)
    issuer.add_key("k3", alg="ES256")
    result = call(client, gateway_oauth, issuer.token("k3"))  # another unknown kid: one fetch, which brings k2 too
    assert result.status == 200, result.raw
    assert issuer.jwks_fetches == fetches + 2
    assert call(client, gateway_oauth, issuer.token("k2")).status == 200  # known now, from that fetch
    assert issuer.jwks_fetches == fetches + 2
    refused(call(client, gateway_oauth, issuer.token("k1")))  # the retired key is gone from the cache


def test_metadata_document_and_invocations_style(gateway_oauth, issuer, client):
    document = client.get(gateway_oauth.url + METADATA).json()
    assert document["resource"] == gateway_oauth.url
    assert document["authorization_servers"] == [issuer.issuer]
    assert document["scopes_supported"] == ["agui.run"]
    assert document["bearer_methods_supported"] == ["header"]
    result = call(client, gateway_oauth, issuer.token(aud="api://other"), path="/invocations")
    assert result.status == 401 and result.events[0]["code"] == "UNAUTHORIZED"
    assert METADATA in result.headers["www-authenticate"]
    denied = call(client, gateway_oauth, issuer.token(scope="openid"), path="/invocations")
    assert denied.status == 403 and denied.events[0]["code"] == "ACCESS_DENIED"
    assert client.get(gateway_oauth.url + "/ping").status_code == 200


def test_client_id_restriction(start_gateway, issuer, client):
    server = start_gateway(
        "--oauth-jwks-url", issuer.issuer + "/jwks", "--oauth-issuer", issuer.issuer, "--oauth-client-id", "web", "--public-url", "{url}"
    )
    assert call(client, server, issuer.token(aud=None)).status == 200
    refused(call(client, server, issuer.token(aud=None, client_id="mobile")))
    assert call(client, server, issuer.token(aud=None, client_id=None, azp="web")).status == 200
    # The client id stands for the audience (OIDC): a token for another API is refused, one for the client kept.
    refused(call(client, server, issuer.token(aud="api://other-api")))
    refused(call(client, server, issuer.token(aud=["api://other-api", "api://more"])))
    assert call(client, server, issuer.token(aud="web")).status == 200
    assert call(client, server, issuer.token(aud=["api://other-api", "web"])).status == 200
    # client_id and azp name the client the token was issued to: two different names are refused.
    refused(call(client, server, issuer.token(aud=None, client_id="web", azp="other")))
    refused(call(client, server, issuer.token(aud=None, client_id="other", azp="web")))
    assert call(client, server, issuer.token(aud=None, client_id="web", azp="web")).status == 200


def test_two_client_names_are_refused_with_an_audience_too(gateway_oauth, issuer, client):
    refused(call(client, gateway_oauth, issuer.token(client_id="web", azp="other")))
    assert call(client, gateway_oauth, issuer.token(client_id="web", azp="web")).status == 200


async def test_websocket_with_an_oauth_token(gateway_oauth, issuer):
    import websockets
    from websockets.exceptions import InvalidStatus

    url = gateway_oauth.url.replace("http", "ws") + "/ws"
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {issuer.token()}"}) as ws:
        await ws.send(json.dumps(run_body("hi")))
        event = json.loads(await ws.recv())
        while event["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
            event = json.loads(await ws.recv())
        assert event["type"] == "RUN_FINISHED" and event["outcome"]["type"] == "success", event
    with pytest.raises(InvalidStatus):
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {issuer.token(scope='openid')}"}):
            pass
