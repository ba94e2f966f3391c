/**
 * Image lifecycle on the node (upstream pkg/kubelet/images): garbage
 * collection by disk usage and age, and the eviction manager's node-level
 * image reclaim (`freeSpace(Infinity)` is upstream's DeleteUnusedImages).
 */
export { createImageGC, statfsBytes, IMAGE_DETECT_PERIOD_MS, IMAGE_GC_PERIOD_MS, type FsBytes, type ImageGC, type ImageGCOptions } from "./gc.ts";
