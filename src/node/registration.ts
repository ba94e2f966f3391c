/**
 * The Node object's UID once the node controller registered it, for what is
 * built before the controller and owned by the Node (mirror pods carry it in
 * their owner reference; CSINode is created once it exists). The controller
 * writes it; the others read it or wait for it.
 */
/** The registered Node's UID, for what the Node owns (mirror pods, CSINode). */
export interface NodeUid {
  /** Undefined until the node is registered (or when it never is: registerNode false). */
  uid(): string | undefined;
}

export class NodeRegistration implements NodeUid {
  private nodeUid: string | undefined;
  private readonly first = Promise.withResolvers<string>();

  /** Undefined until the node is registered (or when it never is: registerNode false). */
  uid(): string | undefined {
    return this.nodeUid;
  }

  /** Resolves with the UID once the node is first registered; never when it is not. */
  whenRegistered(): Promise<string> {
    return this.first.promise;
  }

  registered(uid: string | undefined): void {
    this.nodeUid = uid;
    if (uid) this.first.resolve(uid);
  }
}
