import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";

/*
 * A local HTTPS server for tests of outgoing calls that must be https: a self-signed
 * certificate for 127.0.0.1 and localhost (EC P-256, valid until 2126, made with
 * `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500
 * -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1,DNS:localhost`). Test-only: the
 * key protects nothing. Clients trust it through `LOCAL_TLS.cert` as their CA.
 */

export const LOCAL_TLS = {
  key: `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgNgD/tUxgpkoaJHfL
/dYgK5U/Ybat759V7ue5CyKjYcKhRANCAAQS0yqK0THSZFwYTWurIEq2rlzEbmvo
uCiT8ZpX3Nm3Ibwjr60nHAWzqeB+c5LHiR/tCEmoOz0DBI+n+F5JuURH
-----END PRIVATE KEY-----`,
  cert: `-----BEGIN CERTIFICATE-----
MIIBmzCCAUGgAwIBAgIUHzSL+UP4RyyJW3HflYC9FRVFQM0wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTEyNzAxNDMzMloYDzIxMjYxMTAz
MDE0MzMyWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQS0yqK0THSZFwYTWurIEq2rlzEbmvouCiT8ZpX3Nm3Ibwjr60nHAWz
qeB+c5LHiR/tCEmoOz0DBI+n+F5JuURHo28wbTAdBgNVHQ4EFgQU7NZsMIIgp8/z
bekKmc3ICnjN+mUwHwYDVR0jBBgwFoAU7NZsMIIgp8/zbekKmc3ICnjN+mUwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARhwR/AAABgglsb2NhbGhvc3QwCgYIKoZI
zj0EAwIDSAAwRQIhAJryUerOSQifEWrwyvNjbnc4FR8wKkUQq7MKcTNu0CZOAiAG
IAukqmBo02l2ByHE5F4+JBRVLtFqtHFfuWtxFgzDlg==
-----END CERTIFICATE-----`,
};

export interface LocalHttps {
  url: string;
  port: number;
  /** Requests it received, as "METHOD path". */
  requests: string[];
  close(): Promise<void>;
}

/** Starts a local HTTPS server on 127.0.0.1 with `handle` answering every request. */
export async function startLocalHttps(
  handle: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<LocalHttps> {
  const requests: string[] = [];
  const server: Server = createServer({ key: LOCAL_TLS.key, cert: LOCAL_TLS.cert }, (req, res) => {
    requests.push(`${req.method} ${req.url}`);
    req.resume();
    req.once("end", () => handle(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
