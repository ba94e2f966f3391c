/**
 * The Node object's UID once the node controller registered it, for what is
 * built before the controller and owned by the Node (mirror pods carry it in
 * their owner reference). The controller writes it; the others read it.
 */
export class NodeRegistration {
  private nodeUid: string | undefined;

  /** Undefined until the node is registered (or when it never is: registerNode false). */
  uid(): string | undefined {
    return this.nodeUid;
  }

  registered(uid: string | undefined): void {
    this.nodeUid = uid;
  }
}
