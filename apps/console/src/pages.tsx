import type { AuditReceipt, DecisionEnvelope, HostStatus } from "@asp/contracts";
import { type ReactNode, useCallback, useEffect, useState } from "react";
import { ApiError, follow, get, post } from "./api.js";

/** Load `path` (again whenever `reload` changes); the page shows what it got or the coded error. */
function useApi<T>(path: string, reload = 0): { data: T | null; error: ApiError | null } {
  const [state, setState] = useState<{ data: T | null; error: ApiError | null }>({ data: null, error: null });
  useEffect(() => {
    let live = true;
    void reload;
    get<T>(path).then(
      (data) => live && setState({ data, error: null }),
      (error: unknown) =>
        live &&
        setState({
          data: null,
          error: error instanceof ApiError ? error : new ApiError(0, "ASP_CONSOLE_NETWORK", String(error)),
        }),
    );
    return () => {
      live = false;
    };
  }, [path, reload]);
  return state;
}

function Failed({ error }: { error: ApiError }) {
  return (
    <p role="alert" className="error">
      <code>{error.code}</code> {error.message}
    </p>
  );
}

function Loading({ what }: { what: string }) {
  return <p aria-live="polite">Loading {what}…</p>;
}

function Badge({ value }: { value: string }) {
  return <span className={`badge badge-${value.toLowerCase().replace(/[^a-z]+/g, "-")}`}>{value}</span>;
}

function Table({ caption, head, children }: { caption: string; head: string[]; children: ReactNode }) {
  return (
    <div className="scroll">
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {head.map((h) => (
              <th key={h} scope="col">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

interface StoredReceipt {
  readonly seq: number;
  readonly at: string;
  readonly receipt: AuditReceipt;
}

/** Receipts newest first, with the chain's offline verification status above them. */
export function DecisionsPage() {
  const receipts = useApi<{ receipts: StoredReceipt[] }>("/receipts?limit=50");
  const chain = useApi<{ ok: boolean; entries: number; problems?: unknown[] }>("/receipts/verify");
  return (
    <section aria-labelledby="decisions-title">
      <h1 id="decisions-title">Decisions</h1>
      {chain.data !== null && (
        <p className="chain">
          Receipt chain: <Badge value={chain.data.ok ? "verified" : "broken"} /> {chain.data.entries} entries walked
        </p>
      )}
      {chain.error !== null && <Failed error={chain.error} />}
      {receipts.error !== null && <Failed error={receipts.error} />}
      {receipts.data === null && receipts.error === null && <Loading what="decisions" />}
      {receipts.data !== null && receipts.data.receipts.length === 0 && <p>No decisions yet.</p>}
      {receipts.data !== null && receipts.data.receipts.length > 0 && (
        <Table caption="Newest first" head={["Decision", "Call-site", "When", "Receipt"]}>
          {receipts.data.receipts.map((r) => (
            <tr key={r.receipt.receiptId}>
              <td>
                <Badge value={r.receipt.decision} />
              </td>
              <td>{r.receipt.callSite}</td>
              <td>{r.at}</td>
              <td>
                <a href={`#/decisions/${encodeURIComponent(r.receipt.receiptId)}`}>{r.receipt.receiptId}</a>
              </td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}

type Finding = DecisionEnvelope["findings"][number];

function Findings({ title, findings }: { title: string; findings: Finding[] }) {
  if (findings.length === 0) return null;
  return (
    <section aria-label={title}>
      <h2>{title}</h2>
      <ul className="findings">
        {findings.map((f, i) => {
          const d = f.diagnostic as { message?: string; path?: string; range?: { start?: { line?: number } } };
          const where =
            d.path === undefined
              ? ""
              : `${d.path}${d.range?.start?.line === undefined ? "" : `:${d.range.start.line}`}`;
          return (
            // biome-ignore lint/suspicious/noArrayIndexKey: findings have no id of their own; their order is the envelope's
            <li key={i} className={`finding finding-${f.disposition}`}>
              <p>
                <Badge value={f.effectiveSeverity} /> <strong>{where}</strong> {d.message}
              </p>
              <p className="meta">
                {f.provider.id} · {f.provenance.source}
              </p>
              {f.nextStep !== undefined && (
                <p className="next-step">
                  <span>Next step:</span> {f.nextStep}
                </p>
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

/** One decision: the decision, call-site, coverage and its degraded reasons, findings, authority, assurance, receipt. */
export function DecisionPage({ id }: { id: string }) {
  const { data, error } = useApi<StoredReceipt & { envelope: DecisionEnvelope | null }>(
    `/receipts/${encodeURIComponent(id)}`,
  );
  if (error !== null) return <Failed error={error} />;
  if (data === null) return <Loading what="the decision" />;
  const e = data.envelope;
  const coverage = (e?.coverage ?? data.receipt.coverage) as {
    required?: unknown[];
    ran?: unknown[];
    degraded?: Array<{ provider?: string; reason?: string; detail?: string }>;
  };
  return (
    <article aria-labelledby="decision-title">
      <p>
        <a href="#/decisions">← Decisions</a>
      </p>
      <h1 id="decision-title">
        <Badge value={data.receipt.decision} /> at the {data.receipt.callSite} call-site
      </h1>
      <dl className="facts">
        <dt>Receipt</dt>
        <dd>{data.receipt.receiptId}</dd>
        <dt>Decided</dt>
        <dd>{e?.decidedAt ?? data.at}</dd>
        <dt>Policy</dt>
        <dd>
          <code>{data.receipt.policyDigest}</code>
        </dd>
      </dl>
      <section aria-label="Coverage">
        <h2>Coverage</h2>
        {(coverage.degraded ?? []).length === 0 ? (
          <p>Every required check ran.</p>
        ) : (
          <ul>
            {(coverage.degraded ?? []).map((d) => (
              <li key={`${d.provider}-${d.reason}`}>
                <strong>{d.provider}</strong> degraded: {d.reason}
                {d.detail === undefined ? "" : ` (${d.detail})`}
              </li>
            ))}
          </ul>
        )}
      </section>
      {e !== null && (
        <>
          <Findings title="Gating findings" findings={e.findings.filter((f) => f.disposition === "gating")} />
          <Findings title="Advisory findings" findings={e.findings.filter((f) => f.disposition !== "gating")} />
          <section aria-label="Authority">
            <h2>Authority evidence</h2>
            <pre>{JSON.stringify(e.authority, null, 2)}</pre>
          </section>
          <section aria-label="Assurance">
            <h2>Assurance</h2>
            <pre>{JSON.stringify(e.assurance, null, 2)}</pre>
          </section>
        </>
      )}
    </article>
  );
}

/** Provider health: state per capability family, latency, timeouts, quarantine and its reset. */
export function ProvidersPage() {
  const [reload, setReload] = useState(0);
  const { data, error } = useApi<HostStatus>("/status", reload);
  const [notice, setNotice] = useState<ReactNode>(null);
  const reset = useCallback(async (id: string) => {
    try {
      const r = await post<{ lifted: boolean; clearedFailures: number | null }>(
        `/providers/${encodeURIComponent(id)}/quarantine/reset`,
      );
      setNotice(
        r.lifted ? `${id}: quarantine lifted (${r.clearedFailures} failures cleared)` : `${id}: not quarantined`,
      );
      setReload((n) => n + 1);
    } catch (e) {
      setNotice(e instanceof ApiError ? <Failed error={e} /> : String(e));
    }
  }, []);
  if (error !== null) return <Failed error={error} />;
  if (data === null) return <Loading what="provider health" />;
  return (
    <section aria-labelledby="providers-title">
      <h1 id="providers-title">Provider health</h1>
      {notice !== null && (
        <div aria-live="polite" className="notice">
          {notice}
        </div>
      )}
      <Table caption="Per provider" head={["Provider", "State", "Families", "Failures", "p50 / p95", "Timeouts", ""]}>
        {data.providers.map((p) => (
          <tr key={p.id}>
            <td>
              {p.id}@{p.version}
            </td>
            <td>
              <Badge value={p.state} />
            </td>
            <td>
              {Object.entries(p.families)
                .map(([f, s]) => `${f} ${s}`)
                .join(", ")}
            </td>
            <td>
              {p.health.consecutiveFailures}
              {p.health.quarantined ? " (quarantined)" : ""}
            </td>
            <td>
              {p.latency.p50Ms ?? "–"} / {p.latency.p95Ms ?? "–"} ms
            </td>
            <td>{p.timeouts}</td>
            <td>
              {p.health.quarantined && (
                <button type="button" onClick={() => void reset(p.id)}>
                  Reset quarantine
                </button>
              )}
            </td>
          </tr>
        ))}
      </Table>
    </section>
  );
}

interface RunRow {
  readonly seq: number;
  readonly at: string;
  readonly run_id: string;
  readonly run: { root_frame_id: string; execution_id: string };
  readonly label: string;
}

/** Refetch whenever the stream carries an Auto Mode event (the list is the projection, never the event). */
function useLiveReload(query: string): number {
  const [reload, setReload] = useState(0);
  useEffect(
    () =>
      follow(query, (type) => {
        if (type.startsWith("auto_") || type === "candidate_ready" || type.startsWith("repair_"))
          setReload((n) => n + 1);
      }),
    [query],
  );
  return reload;
}

/** Auto Runs, newest first, each with its user-truth label, live. */
export function RunsPage() {
  const reload = useLiveReload("");
  const { data, error } = useApi<{ runs: RunRow[] }>("/auto-runs?limit=50", reload);
  return (
    <section aria-labelledby="runs-title">
      <h1 id="runs-title">Auto Runs</h1>
      {error !== null && <Failed error={error} />}
      {data === null && error === null && <Loading what="Auto Runs" />}
      {data !== null && data.runs.length === 0 && <p>No Auto Runs yet.</p>}
      {data !== null && data.runs.length > 0 && (
        <Table caption="Newest first, live" head={["Label", "Frame", "Started", "Run"]}>
          {data.runs.map((r) => (
            <tr key={r.run_id}>
              <td className="label" data-run={r.run_id}>
                {r.label}
              </td>
              <td>{r.run.root_frame_id}</td>
              <td>{r.at}</td>
              <td>
                <a href={`#/runs/${encodeURIComponent(r.run_id)}`}>{r.run.execution_id}</a>
              </td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}

interface Projection {
  readonly label: string;
  readonly user_truth: string;
  readonly candidate: {
    candidate_id: string;
    artifact_versions: Array<{ artifact_id: string; version_id: string }>;
  } | null;
  readonly findings: Array<{ finding_id: string; severity: string; claim: string }>;
  readonly repair_runs: unknown[];
  readonly guardian_decisions: Array<{ decision: string | null; resolution: string }>;
  readonly ledger: unknown;
  readonly problems: string[];
}

/** One Auto Run: its label exactly, candidate and versions, findings, repairs, Guardian decisions, budget ledger, audits. */
export function RunPage({ id }: { id: string }) {
  const reload = useLiveReload(`?after=0&run_id=${encodeURIComponent(id)}`);
  const { data, error } = useApi<Projection>(`/auto-runs/${encodeURIComponent(id)}`, reload);
  if (error !== null) return <Failed error={error} />;
  if (data === null) return <Loading what="the run" />;
  return (
    <article aria-labelledby="run-title">
      <p>
        <a href="#/runs">← Auto Runs</a>
      </p>
      <h1 id="run-title" className="label">
        {data.label}
      </h1>
      {data.problems.length > 0 && (
        <ul role="alert" className="error">
          {data.problems.map((p) => (
            <li key={p}>{p}</li>
          ))}
        </ul>
      )}
      <h2>Candidate</h2>
      {data.candidate === null ? (
        <p>No candidate.</p>
      ) : (
        <ul>
          {data.candidate.artifact_versions.map((v) => (
            <li key={v.version_id}>
              <a href={`/api/v1/artifacts/versions/${encodeURIComponent(v.version_id)}`}>{v.artifact_id}</a>
            </li>
          ))}
        </ul>
      )}
      <h2>Findings</h2>
      {data.findings.length === 0 ? (
        <p>None.</p>
      ) : (
        <ul>
          {data.findings.map((f) => (
            <li key={f.finding_id}>
              <Badge value={f.severity} /> {f.claim}
            </li>
          ))}
        </ul>
      )}
      <h2>Repair rounds</h2>
      <p>{data.repair_runs.length}</p>
      <h2>Guardian decisions</h2>
      <p>{data.guardian_decisions.map((g) => `${g.decision ?? "none"} (${g.resolution})`).join(", ") || "None."}</p>
      <h2>Budget ledger</h2>
      <pre>{JSON.stringify(data.ledger, null, 2)}</pre>
    </article>
  );
}
