/**
 * Requests for the objects that have a protobuf codec (proto-objects.ts),
 * sent as protobuf when the agent's contentType asks for it (upstream's
 * default), as JSON otherwise. JSON stays the fallback, per kind: the server
 * answers 415 or 406 (it takes or gives no protobuf for that resource), an
 * object holds a field the codec does not know, or an answer cannot be read
 * (a newer server's field): then that kind goes JSON from there on, and a
 * write whose answer could not be read is followed by a JSON read of the
 * object, so nothing the server holds is dropped on the next write.
 */
import { ApiError } from "./errors.ts";
import type { ApiObject } from "./index.ts";
import type { ObjectCodec } from "./proto-objects.ts";
import { PROTOBUF, ProtobufError } from "./protobuf.ts";
import type { RestClient } from "./rest.ts";

const ACCEPT = `${PROTOBUF}, application/json`;

export class ProtobufRequests {
  /** Kinds that go JSON from now on. */
  private readonly json = new Set<string>();

  constructor(
    private readonly rest: RestClient,
    private readonly enabled: boolean,
  ) {}

  /** Whether requests for `codec`'s kind go as protobuf (false once one fell back). */
  uses(codec: ObjectCodec): boolean {
    return this.enabled && !this.json.has(codec.kind);
  }

  /**
   * `verb` on `path` with `object` as its body (none for GET), answered as the
   * object's JSON shape. `viaJson` is the same request in JSON; `reread` is a
   * JSON GET of the object, for a write whose answer could not be read.
   */
  async request(
    verb: "GET" | "POST" | "PUT",
    path: string,
    codec: ObjectCodec,
    object: ApiObject | undefined,
    viaJson: () => Promise<ApiObject>,
    reread: () => Promise<ApiObject>,
  ): Promise<ApiObject> {
    if (!this.uses(codec)) return viaJson();
    let body: Uint8Array | undefined;
    try {
      body = object ? codec.encode(object) : undefined;
    } catch (err) {
      // This object only: another of the kind may encode.
      if (err instanceof ProtobufError) return viaJson();
      throw err;
    }
    const answer = await this.send(verb, path, codec, body);
    if (!answer) return viaJson();
    if (answer.contentType.startsWith("application/json")) return JSON.parse(new TextDecoder().decode(answer.bytes)) as ApiObject;
    try {
      if (!codec.decode) throw new ProtobufError(`${codec.kind} has no decoder`);
      return codec.decode(answer.bytes) as ApiObject;
    } catch (err) {
      if (!(err instanceof ProtobufError)) throw err;
      this.json.add(codec.kind);
      return verb === "GET" ? viaJson() : reread();
    }
  }

  /** A write whose answer is not read (events). */
  async write(verb: "POST" | "PUT", path: string, codec: ObjectCodec, object: ApiObject, viaJson: () => Promise<unknown>): Promise<void> {
    if (!this.uses(codec)) {
      await viaJson();
      return;
    }
    let body: Uint8Array;
    try {
      body = codec.encode(object);
    } catch (err) {
      if (err instanceof ProtobufError) {
        await viaJson();
        return;
      }
      throw err;
    }
    if (!(await this.send(verb, path, codec, body))) await viaJson();
  }

  /**
   * A request with a JSON body (a patch, DeleteOptions) whose answer is not
   * read: the server may answer in protobuf, which is smaller on the wire (a
   * status patch's answer is the whole Pod), as upstream's client accepts it.
   * Errors are read from either encoding.
   */
  async unread(verb: "PATCH" | "DELETE", path: string, body: unknown, contentType: string): Promise<void> {
    const bytes = new TextEncoder().encode(JSON.stringify(body));
    await this.rest.requestBytes(verb, path, { body: bytes, contentType, accept: this.enabled ? ACCEPT : "application/json" });
  }

  /** The protobuf request; undefined when the server refused the encoding (the kind then goes JSON). */
  private async send(verb: "GET" | "POST" | "PUT", path: string, codec: ObjectCodec, body: Uint8Array | undefined) {
    try {
      return await this.rest.requestBytes(verb, path, { ...(body ? { body } : {}), contentType: PROTOBUF, accept: ACCEPT });
    } catch (err) {
      if (err instanceof ApiError && (err.status === 415 || err.status === 406)) {
        this.json.add(codec.kind);
        return undefined;
      }
      throw err;
    }
  }
}
