/**
 * `@asp/evidence`: exact, content-addressed identity for everything a decision looked at, and
 * a durable, tamper-evident record of what was decided (DESIGN §8).
 *
 * - RFC 8785 canonical JSON and `sha256:<hex>` digests behind a {@link Hasher} port,
 * - git-like blobs, trees and changesets; worktree and git revision snapshots with equal ids,
 * - a level-backed object store and hash-chained fact log (plus an in-memory twin for tests),
 *   whose head is anchored outside the log, so a log that lost entries is refused, never
 *   silently continued; read-only snapshots, waiting for a held store, check, salvage, backup,
 * - immutable evidence snapshots that bundle refs and verify them end to end.
 *
 * @packageDocumentation
 */

export type { BackupResult } from "./backup.js";
export { backupStore } from "./backup.js";
export type { JsonValue } from "./canonical.js";
export { canonicalBytes, canonicalize, digest, parseCanonical } from "./canonical.js";
export type { RunFileError, RunFileOptions, RunFileResult } from "./child.js";
export { runFile } from "./child.js";
export type { EnvironmentOptions, EnvironmentSnapshot } from "./environment.js";
export { snapshotEnvironment } from "./environment.js";
export type { EvidenceErrorCode } from "./errors.js";
export { EVIDENCE_ERROR_CODES, EvidenceError } from "./errors.js";
export type {
  EvidenceRef,
  EvidenceRefKind,
  EvidenceSnapshotBinding,
  FreezeInput,
  FrozenSnapshot,
  SnapshotFailure,
  SnapshotStore,
  SnapshotVerification,
} from "./evidence-snapshot.js";
export { freezeSnapshot, readSnapshot, toEvidenceSnapshot, verifySnapshot } from "./evidence-snapshot.js";
export type { KvFactLogOptions, SharedKv } from "./fact-log.js";
export { createKvFactLog } from "./fact-log.js";
export type { GitSnapshot, GitSnapshotOptions } from "./git.js";
export { snapshotGitRevision } from "./git.js";
export type { Digest, Hasher } from "./hash.js";
export { assertDigest, createNobleHasher, createNodeHasher, defaultHasher, digestBytes, isDigest } from "./hash.js";
export { formatHead, parseHead } from "./head.js";
export type { Kv, KvOp, KvRange, Space as KvSpace } from "./kv.js";
export { SPACES as KV_SPACES } from "./kv.js";
export type { WaitProgress } from "./lock.js";
export { DEFAULT_WAIT_MS } from "./lock.js";
export { createKvObjectStore } from "./object-store.js";
export type {
  Change,
  Changeset,
  EncodedTree,
  FileMode,
  PathState,
  Tree,
  TreeEntry,
  TreeFile,
  TreeReader,
} from "./objects.js";
export { blobDigest, changesetDigest, decodeTree, diffTrees, encodeTree, FILE_MODES, listTree } from "./objects.js";
export { createMemoryStore, openStore } from "./open.js";
export { assertEntryName, assertPath, isNormalizedPath, normalizePath } from "./paths.js";
export type {
  LostRange,
  SalvageOptions,
  SalvageResult,
  StoreCheck,
  StoreDamage,
  StoreDamageKind,
} from "./recovery.js";
export { checkStore, SALVAGE_KIND, salvageStore } from "./recovery.js";
export type { StatCache } from "./stat-cache.js";
export { createStatCache } from "./stat-cache.js";
export type {
  AppendCondition,
  AppendOptions,
  Clock,
  FactEntry,
  FactIndexKey,
  FactInput,
  FactLog,
  FactLogHead,
  FactQuery,
  InjectionToken,
  ObjectKind,
  ObjectStore,
  OpenStoreOptions,
  Store,
  StoredObject,
  StoreOptions,
  VerifyOptions,
  VerifyResult,
} from "./store.js";
export { TOKENS } from "./tokens.js";
export type { TrackedSet } from "./tracked.js";
export { readTrackedSet } from "./tracked.js";
export type { SnapshotOptions, SnapshotTarget, WorktreeSnapshot } from "./worktree.js";
export { snapshotWorktree } from "./worktree.js";
