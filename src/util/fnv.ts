/** FNV-1a, 32 bits, over the UTF-8 bytes of `text` (Go's hash/fnv New32a): the checksum of upstream's checkpoints and container hashes. */
export function fnv32a(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
  return h >>> 0;
}
