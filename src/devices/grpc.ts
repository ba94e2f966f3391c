/**
 * gRPC over unix sockets for the device plugin and pod resources APIs:
 * serving a protobuf-ts service description with grpc-js (the agent serves
 * Registration and PodResourcesLister; tests serve DevicePlugin), and a client
 * transport for dialing a plugin back.
 */
import { ChannelCredentials, Server, ServerCredentials, status as GrpcStatus, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from "@grpc/grpc-js";
import { GrpcTransport } from "@protobuf-ts/grpc-transport";
import type { MethodInfo, ServiceType } from "@protobuf-ts/runtime-rpc";
import { unlinkSync } from "node:fs";

/** A handler answers one message, or streams them until the call's signal aborts. */
export type Handler = (req: any, signal: AbortSignal) => Promise<object> | AsyncIterable<object>;

/** An error a handler throws to answer with a gRPC status code. */
export class RpcError extends Error {
  constructor(
    readonly code: GrpcStatus,
    message: string,
  ) {
    super(message);
  }
}

export interface UnixServer {
  readonly socketPath: string;
  /** Stops serving at once and removes the socket file. Idempotent. */
  close(): void;
}

const removeSocket = (path: string) => {
  try {
    unlinkSync(path);
  } catch {
    // absent
  }
};

function definitionOf(service: ServiceType, table: Record<string, Handler>) {
  const definition: Record<string, object> = {};
  const impl: Record<string, (...args: any[]) => void> = {};
  for (const m of service.methods as MethodInfo[]) {
    const handler = table[m.name];
    if (!handler) continue; // grpc-js answers UNIMPLEMENTED
    definition[m.name] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream: false,
      responseStream: m.serverStreaming,
      requestSerialize: (v: object) => Buffer.from(m.I.toBinary(v)),
      requestDeserialize: (b: Buffer) => m.I.fromBinary(b),
      responseSerialize: (v: object) => Buffer.from(m.O.toBinary(m.O.create(v))),
      responseDeserialize: (b: Buffer) => m.O.fromBinary(b),
    };
    const fail = (err: unknown) =>
      Object.assign(new Error(String((err as Error)?.message ?? err)), {
        code: err instanceof RpcError ? err.code : GrpcStatus.UNKNOWN,
        details: String((err as Error)?.message ?? err),
      });
    impl[m.name] = m.serverStreaming
      ? async (call: ServerWritableStream<object, object>) => {
          const abort = new AbortController();
          call.on("cancelled", () => abort.abort());
          try {
            for await (const msg of handler(call.request, abort.signal) as AsyncIterable<object>) call.write(msg);
            call.end();
          } catch (err) {
            call.destroy(fail(err));
          }
        }
      : (call: ServerUnaryCall<object, object>, callback: sendUnaryData<object>) => {
          (handler(call.request, new AbortController().signal) as Promise<object>).then(
            (res) => callback(null, res),
            (err) => callback(fail(err)),
          );
        };
  }
  return { definition, impl };
}

/** Serves the services on `socketPath`, replacing a stale socket file there. */
export async function serveUnix(socketPath: string, services: [ServiceType, Record<string, Handler>][]): Promise<UnixServer> {
  removeSocket(socketPath);
  const server = new Server();
  for (const [service, table] of services) {
    const { definition, impl } = definitionOf(service, table);
    server.addService(definition as never, impl);
  }
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  let closed = false;
  return {
    socketPath,
    close() {
      if (closed) return;
      closed = true;
      server.forceShutdown();
      removeSocket(socketPath);
    },
  };
}

/** A client transport to the socket at `socketPath`; close() releases its channel. */
export function dialUnix(socketPath: string): GrpcTransport {
  return new GrpcTransport({ host: `unix://${socketPath}`, channelCredentials: ChannelCredentials.createInsecure() });
}
