/**
 * A transport for unit tests: records each request (its body as text) and
 * answers it from `handler`; a handler that throws is a transport failure.
 */
import type { HttpTransport, TransportRequest } from "./transport.ts";

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export class FakeTransport implements HttpTransport {
  readonly requests: RecordedRequest[] = [];
  closed = false;

  constructor(private readonly handler: (req: RecordedRequest) => Response | Promise<Response>) {}

  async send(req: TransportRequest): Promise<Response> {
    if (req.signal.aborted) throw req.signal.reason;
    const recorded: RecordedRequest = {
      method: req.method,
      path: req.url.pathname + req.url.search,
      headers: req.headers,
      ...(req.body !== undefined ? { body: typeof req.body === "string" ? req.body : new TextDecoder().decode(req.body) } : {}),
    };
    this.requests.push(recorded);
    return this.handler(recorded);
  }

  close(): void {
    this.closed = true;
  }
}
