// A TCP pass-through in front of the API server that counts the bytes one
// client sends and receives: the API server's own metrics
// (apiserver_request_body_size_bytes, apiserver_response_sizes) have no
// client label, so with two agents on one API server this is how bytes per
// node are told apart. TLS stays end to end (the proxy sees only records),
// so the figures are what crosses the network: TLS framing, HTTP headers
// (HTTP/2 with HPACK for Go's client, HTTP/1.1 for Bun's) and bodies.
import { readFileSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";

export interface ByteCounter {
  port: number;
  /** Bytes from the client to the API server so far. */
  sent(): number;
  /** Bytes from the API server to the client so far. */
  received(): number;
  /** A copy of `kubeconfig` whose server is this counter (same host name, so the serving certificate still matches). */
  kubeconfig(kubeconfig: string, out: string): string;
  close(): Promise<void>;
}

export async function startByteCounter(target: string): Promise<ByteCounter> {
  const url = new URL(target);
  let sent = 0;
  let received = 0;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(url.port), url.hostname);
    client.on("data", (d) => (sent += d.length));
    upstream.on("data", (d) => (received += d.length));
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  const port = await new Promise<number>((res, rej) => {
    server.once("error", rej);
    server.listen(0, "127.0.0.1", () => res((server.address() as { port: number }).port));
  });
  return {
    port,
    sent: () => sent,
    received: () => received,
    kubeconfig(kubeconfig, out) {
      writeFileSync(out, readFileSync(kubeconfig, "utf8").replace(/server: https:\/\/[^\s/]+/, `server: https://${url.hostname}:${port}`));
      return out;
    },
    close: () => new Promise((res) => server.close(() => res())),
  };
}
