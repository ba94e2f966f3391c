/**
 * CSI on the node: the plugin registration watcher on
 * `<root-dir>/plugins_registry` (plugin-watcher.ts, pluginregistration.v1),
 * the registered drivers with their CSINode and node updates (drivers.ts),
 * and the csi.v1 node client (client.ts) the volume plugin uses.
 */
export { PluginWatcher, CSI_PLUGIN_TYPE, type PluginHandler } from "./plugin-watcher.ts";
export { CsiDrivers, CsiDriverNotFoundError, MIGRATED_PLUGINS, MIGRATED_PLUGINS_ANNOTATION, NODE_ID_ANNOTATION } from "./drivers.ts";
export type { CsiNodeClient, NodeInfo, PublishRequest, StageRequest } from "./client.ts";
