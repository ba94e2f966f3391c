/** Container logs on the node (upstream pkg/kubelet/logs): rotation of the files the runtime writes. */
export { createLogRotation, rotationTimestamp, LOG_MONITOR_PERIOD_MS, type LogRotation, type LogRotationOptions } from "./rotation.ts";
