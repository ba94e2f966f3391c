/** An error with the HTTP status the kubelet API answers it with (mapped in kubelet-api.ts and the streaming upgrade path). */
export class HttpError extends Error {
  constructor(
    readonly status: 400 | 404 | 405 | 413 | 500 | 503 | 504,
    message: string,
  ) {
    super(message);
  }
}
