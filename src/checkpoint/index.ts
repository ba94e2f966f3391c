/**
 * Local, crash-safe checkpoints (offline autonomy): the store interface,
 * its file implementation and a fake for unit tests.
 */
export { CHECKPOINT_VERSION, CheckpointError, FileCheckpointStore, type Checkpoint, type CheckpointStore, type FileCheckpointStoreOptions, type ReadResult } from "./store.ts";
export { FakeCheckpointStore } from "./fake.ts";
