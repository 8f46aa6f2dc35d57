/**
 * `@asp/sdk/testing`: test a provider the way a host runs it.
 *
 * - {@link MemoryRepo}: an in-memory, content-addressed repository (trees and blobs with real
 *   `sha256:` digests and modes, changesets between two file maps, a `ContentSource` over it),
 * - {@link TestHost}: launches a built provider as a subprocess, plays the host over LSP-framed
 *   JSON-RPC (`initialize` ... `shutdown` / `exit`), serves `host/readBlob` / `host/readTree`
 *   from a `MemoryRepo` bound to each request, and records what was read,
 * - {@link builtEntry}: the built entry of a package, rebuilt when its sources are newer.
 *
 * Not for production code: it spawns processes and keeps everything in memory.
 *
 * @packageDocumentation
 */

export { builtEntry } from "./entry.js";
export type { AssessInput, HostCallback, ProposeInput, QueryInput, TestHostOptions } from "./host.js";
export { RpcError, TestHost } from "./host.js";
export type { FileContent, FileMode, FileSpec, Files, MemoryChangeset } from "./memory-repo.js";
export { blobDigest, MemoryRepo, treeDigest } from "./memory-repo.js";
