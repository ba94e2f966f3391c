/**
 * One unary gRPC call on a grpc-js Channel, below grpc-js's Client: the
 * call the Client would make, without its per-call layers (the interceptor
 * chain's two wrapping calls, an EventEmitter per call, and an Error
 * created per call only to keep the caller's stack for a failure). With
 * the interpreter only, those were 5 to 7% of the CPU (in three runs of
 * four) and 4 to 19% of the heap allocated per PLEG relist pair over the
 * Client's makeUnaryRequest (scripts/bench/cri-call-cost.ts,
 * docs/benchmarks.md).
 *
 * It keeps what the Client's unary path guarantees its callback (grpc-js
 * 1.14 client.js and client-interceptors.js): exactly one answer or one
 * status error; a request that cannot be written and an answer that cannot
 * be read fail with INTERNAL; an OK status without an answer, or a second
 * answer, fail with UNIMPLEMENTED, in grpc-js's words. Deadlines, message
 * size limits, retries and reconnects stay in the channel's own call
 * layers, which the Client goes through too.
 */
import { Metadata, status as GrpcStatus, type Channel } from "@grpc/grpc-js";
import type { Rpc } from "./rpc.ts";

/** A call's failing status: `code` and `details` as grpc-js's ServiceError has them (errors.ts reads both). */
export class GrpcStatusError extends Error {
  override readonly name = "GrpcStatusError";
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(`${code} ${GrpcStatus[code] ?? ""}: ${details}`);
  }
}

export interface UnaryCallHandle {
  /** Ends the call with CANCELLED (the callback gets it) unless it already ended. */
  cancel(): void;
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/**
 * Starts `rpc` with `input`; `deadline` is absolute on the wall clock (ms
 * since the epoch, as grpc-js measures it), Infinity for none. `done` is
 * called exactly once.
 */
export function startUnaryCall<I extends object, O extends object>(
  channel: Channel,
  rpc: Rpc<I, O>,
  input: I,
  deadline: number,
  done: (err: GrpcStatusError | null, answer?: O) => void,
): UnaryCallHandle {
  const call = channel.createCall(rpc.path, deadline, undefined, null, undefined);
  let answer: O | undefined;
  let answered = false;
  let ended = false;
  call.start(new Metadata(), {
    onReceiveMetadata() {},
    onReceiveMessage(bytes: Buffer) {
      if (answered) {
        call.cancelWithStatus(GrpcStatus.UNIMPLEMENTED, "Too many responses received");
        return;
      }
      try {
        answer = rpc.deserialize(bytes);
        answered = true;
      } catch (e) {
        call.cancelWithStatus(GrpcStatus.INTERNAL, `Response message parsing error: ${message(e)}`);
      }
    },
    onReceiveStatus(status) {
      if (ended) return;
      ended = true;
      if (status.code !== GrpcStatus.OK) done(new GrpcStatusError(status.code, status.details));
      else if (!answered) done(new GrpcStatusError(GrpcStatus.UNIMPLEMENTED, "No message received"));
      else done(null, answer);
    },
  });
  let bytes: Buffer;
  try {
    bytes = rpc.serialize(input);
  } catch (e) {
    call.cancelWithStatus(GrpcStatus.INTERNAL, `Request message serialization failure: ${message(e)}`);
    return { cancel() {} };
  }
  call.sendMessageWithContext({}, bytes);
  call.halfClose();
  call.startRead();
  return { cancel: () => call.cancelWithStatus(GrpcStatus.CANCELLED, "Cancelled on client") };
}
