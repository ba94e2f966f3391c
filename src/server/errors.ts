import type { Env, Hono } from "hono";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";

/** An error with the HTTP status a kubelet server answers it with (mapped by answerErrors below and by the streaming upgrade path). */
export class HttpError extends Error {
  constructor(
    readonly status: 400 | 404 | 405 | 413 | 500 | 503 | 504,
    message: string,
  ) {
    super(message);
  }
}

/**
 * How a kubelet server answers what no route did: an HttpError with its
 * status, an error `isBadRequest` names with 400, anything else with 500
 * (logged as `failure`), and an unknown path as Go's mux does.
 */
export function answerErrors<E extends Env>(app: Hono<E>, o: { logger?: Logger; failure: string; isBadRequest?: (err: Error) => boolean }): void {
  app.onError((err, c) => {
    if (err instanceof HttpError) return c.text(err.message, err.status);
    if (o.isBadRequest?.(err)) return c.text(err.message, 400);
    o.logger?.error(o.failure, { path: c.req.path, err: errorMessage(err) });
    return c.text(errorMessage(err), 500);
  });
  app.notFound((c) => c.text("404 page not found", 404));
}
