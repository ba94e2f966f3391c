/**
 * gRPC over unix sockets from protobuf-ts service descriptions, one helper
 * for every API this project speaks or fakes: the agent serves the device
 * plugin Registration and PodResourcesLister services; tests serve a CRI
 * runtime, a device plugin, a CSI driver and a plugin registrar with it.
 * `dialUnix` is the client side (generated clients take its transport).
 */
import {
  ChannelCredentials,
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
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

/** How a handler's error becomes the call's status: RpcError keeps its code, anything else is UNKNOWN. */
export type StatusOf = (err: unknown) => { code: number; details: string };

const defaultStatus: StatusOf = (err) => {
  const details = err instanceof Error ? err.message : String(err);
  return { code: err instanceof RpcError ? err.code : GrpcStatus.UNKNOWN, details };
};

/** The grpc-js service definition and implementation of `service`, answering with `table` (methods it lacks answer UNIMPLEMENTED). */
export function serviceDefinition(
  service: ServiceType,
  table: Record<string, Handler>,
  statusOf: StatusOf = defaultStatus,
): [Record<string, object>, UntypedServiceImplementation] {
  const definition: Record<string, object> = {};
  const impl: UntypedServiceImplementation = {};
  const fail = (err: unknown) => {
    const s = statusOf(err);
    return Object.assign(new Error(s.details), s);
  };
  for (const m of service.methods as MethodInfo[]) {
    const handler = table[m.name];
    if (!handler) continue;
    definition[m.name] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream: false,
      responseStream: m.serverStreaming,
      requestSerialize: (v: object) => Buffer.from(m.I.toBinary(v)),
      requestDeserialize: (b: Buffer) => m.I.fromBinary(b),
      responseSerialize: (v: object) => Buffer.from(m.O.toBinary(m.O.create(v))),
      responseDeserialize: (b: Buffer) => m.O.fromBinary(b),
    };
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
  return [definition, impl];
}

export interface UnixServer {
  readonly socketPath: string;
  /** Stops serving at once (calls in flight fail) and removes the socket file. Idempotent. */
  close(): void;
}

export interface ServeOptions {
  /** grpc-js server options (message size limits). */
  server?: Record<string, number>;
  statusOf?: StatusOf;
}

const removeSocket = (path: string) => {
  try {
    unlinkSync(path);
  } catch {
    // absent
  }
};

/** Serves the services on `socketPath`, replacing a stale socket file there. */
export async function serveUnix(socketPath: string, services: [ServiceType, Record<string, Handler>][], options: ServeOptions = {}): Promise<UnixServer> {
  removeSocket(socketPath);
  const server = new Server(options.server);
  for (const [service, table] of services) server.addService(...(serviceDefinition(service, table, options.statusOf) as [never, UntypedServiceImplementation]));
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
