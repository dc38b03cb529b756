// Signs one request with the AWS SDK for JavaScript's own signer (@smithy/signature-v4, what @aws-sdk clients use),
// for the gateway's SigV4 tests. Reads {method, url, headers, body, presign, expiresIn, credentials, region,
// service} as JSON on stdin; prints {headers} (header signing) or {url} (a pre-signed URL) as JSON.
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const asked = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const url = new URL(asked.url);
const query = Object.fromEntries(url.searchParams.entries());
const request = {
  method: asked.method,
  protocol: url.protocol,
  hostname: url.hostname,
  port: url.port ? Number(url.port) : undefined,
  path: url.pathname,
  query,
  headers: { host: url.host, ...(asked.headers || {}) },
  body: asked.body,
};
const signer = new SignatureV4({ credentials: asked.credentials, region: asked.region, service: asked.service, sha256: Sha256 });
if (asked.presign) {
  const signed = await signer.presign(request, { expiresIn: asked.expiresIn || 300 });
  const search = new URLSearchParams(signed.query).toString();
  console.log(JSON.stringify({ url: `${url.protocol}//${url.host}${signed.path}?${search}` }));
} else {
  const signed = await signer.sign(request);
  console.log(JSON.stringify({ headers: signed.headers }));
}
