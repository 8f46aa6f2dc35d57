import type { Finding, FindingStatus } from "@asp/contracts";

/**
 * The finding statuses the contract calls unresolved: an `open`, `claimed` or `unaddressed`
 * finding is unresolved (counted by `completed_with_issues`), and a material one blocks Verified.
 */
export const UNRESOLVED_FINDING_STATUSES: ReadonlyArray<FindingStatus> = Object.freeze([
  "open",
  "claimed",
  "unaddressed",
]);

/**
 * The durable cause each finding status needs before a projection may show it. A status is a
 * fact like any other: it is shown only with the record that caused it. This package records
 * findings only as a review run's verdict commits them (`open`); the other statuses are derived
 * by the projection from the Repair Runs and the re-review (`finding_statuses`), so a finding
 * record stored in any other status is unreconcilable.
 */
export const FINDING_STATUS_CAUSES: Readonly<Record<FindingStatus, string>> = Object.freeze({
  open: "the review run transition that recorded it",
  claimed: "a Repair Run claiming to address it (Stage 5)",
  unaddressed: "a Repair round that ended without addressing it (Stage 5)",
  resolved: "an independent pass on a newer candidate that no longer reports its fingerprint (Stage 5)",
});

/** The statuses a finding record may be stored with (only `open`; the rest are derived). */
const CAUSED_HERE: ReadonlySet<FindingStatus> = new Set(["open"]);

/** Whether a finding is unresolved (`open`, `claimed` or `unaddressed`). Pure. */
export function isUnresolvedFinding(finding: Pick<Finding, "status">): boolean {
  return UNRESOLVED_FINDING_STATUSES.includes(finding.status);
}

/** Whether a finding blocks Verified: material and unresolved. Pure. */
export function blocksVerified(finding: Pick<Finding, "material" | "status">): boolean {
  return finding.material && isUnresolvedFinding(finding);
}

/**
 * Why a committed finding's status cannot be shown, or null: a status whose durable cause
 * ({@link FINDING_STATUS_CAUSES}) this package never records (a `resolved`, `claimed` or
 * `unaddressed` finding without a Repair Run is a finding somebody relabelled). Pure.
 */
export function findingStatusProblem(finding: Pick<Finding, "finding_id" | "status">): string | null {
  return CAUSED_HERE.has(finding.status)
    ? null
    : `finding ${finding.finding_id} is ${finding.status} without its durable cause (${FINDING_STATUS_CAUSES[finding.status]})`;
}
