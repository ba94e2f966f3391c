/** A manifest field the upstream UID computation here does not model. */
export class UnmodelledField extends Error {
  override readonly name = "UnmodelledField";
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
  }
}
