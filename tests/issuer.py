"""A local OAuth issuer for tests: discovery document and JWKS over HTTP on loopback, and token minting."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


class Issuer:
    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, Any]] = {}  # kid -> (alg, private key)
        self.published: list[str] = []
        self.jwks_fetches = 0
        self.jwks_delay = 0.0  # seconds the JWKS answer is held back (a slow issuer)
        self.jwks_status = 200  # anything else: the issuer is failing
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.request_queue_size = 256
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.issuer = self.url + "/realm"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_key(self, kid: str, alg: str = "RS256", publish: bool = True) -> None:
        key = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if alg.startswith("RS")
            else ec.generate_private_key(ec.SECP256R1())
        )
        self.keys[kid] = (alg, key)
        if publish:
            self.published.append(kid)

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            alg, key = self.keys[kid]
            codec = RSAAlgorithm if alg.startswith("RS") else ECAlgorithm
            jwk = codec.to_jwk(key.public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})
        return {"keys": keys}

    def token(self, kid: str = "k1", *, lifetime: float = 300, **claims: Any) -> str:
        alg, key = self.keys[kid]
        now = int(time.time())
        body = {
            "iss": self.issuer,
            "sub": "user-1",
            "aud": "api://agui",
            "scope": "agui.run openid",
            "iat": now,
            "exp": now + lifetime,
            "client_id": "web",
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})

    def _handler(self):
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/realm/.well-known/openid-configuration":
                    body = {"issuer": issuer.issuer, "jwks_uri": issuer.url + "/realm/jwks"}
                elif self.path == "/realm/jwks":
                    issuer.jwks_fetches += 1
                    time.sleep(issuer.jwks_delay)
                    if issuer.jwks_status != 200:
                        self.send_response(issuer.jwks_status)
                        self.send_header("content-length", "0")
                        self.end_headers()
                        return
                    body = issuer.jwks()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def close(self) -> None:
        self.server.shutdown()
