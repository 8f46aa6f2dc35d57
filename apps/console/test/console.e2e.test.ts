import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createAutoRunner, type Engine, type EngineStep } from "@asp/auto-mode";
import type { ActionResult } from "@asp/contracts";
import { createStageFlags } from "@asp/rollout";
import { createServer, tokenDigest } from "@asp/server";
import { git, passingReviewer } from "@asp/test-utils";
import { type ComposedHost, composeHost } from "@asp/ths";
import type { FastifyInstance } from "fastify";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Issue 28: the console end to end in real headless Chromium (Debian's chromium, driven by
// playwright-core; never a downloaded browser) against a real server over the example host.

const HERE = fileURLToPath(new URL(".", import.meta.url));
const CONSOLE = join(HERE, "..");
const ROOT = join(CONSOLE, "..", "..");
const ARTIFACTS = join(CONSOLE, "test-artifacts");
const CHROMIUM = process.env.ASP_CHROMIUM ?? "/usr/bin/chromium";
const READER = "console-test-reader-token";
const FAKE_AWS_KEY = ["AKIA", "Q7XJ3KZP", "2M4N8RTB"].join("");

let root: string;
let repo: string;
let host: ComposedHost;
let server: FastifyInstance;
let base: string;
let browser: Browser;
const external: string[] = [];

/** An Engine that completes only once `release` is called: the run stays open until then. */
function heldEngine(): { engine: Engine; release: () => void } {
  let release = (): void => undefined;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const engine: Engine = {
    actor: { actor_id: "agent", session_id: "s-1", fingerprint: "model-a;cfg-1" },
    run() {
      let done = false;
      return {
        async next(_value?: ActionResult): Promise<IteratorResult<EngineStep, void>> {
          if (done) return { done: true, value: undefined };
          await held;
          done = true;
          return {
            done: false,
            value: {
              kind: "completion",
              payload: "The table is attached.",
              artifacts: [
                { artifact_id: "out.csv", version_id: "v-console-1", bytes: new TextEncoder().encode("x\n1\n") },
              ],
              evidence: [],
            },
          };
        },
        async return(): Promise<IteratorResult<EngineStep, void>> {
          done = true;
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { engine, release };
}

async function signIn(page: Page): Promise<void> {
  await page.goto(`${base}/console/`);
  await page.getByLabel("Bearer token").fill(READER);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Decisions" }).waitFor();
}

beforeAll(async () => {
  // Serve what the source builds now.
  const require = createRequire(import.meta.url);
  const vite = join(require.resolve("vite/package.json"), "..", "bin", "vite.js");
  root = mkdtempSync(join(tmpdir(), "asp-console-"));
  // Into a folder of its own: dist/ (what asp serve serves) is never emptied under another test.
  const built = join(root, "console");
  execFileSync(process.execPath, [vite, "build", "--logLevel", "error", "--outDir", built], {
    cwd: CONSOLE,
    stdio: "inherit",
  });
  mkdirSync(ARTIFACTS, { recursive: true });

  repo = join(root, "demo-repo");
  cpSync(join(ROOT, "examples", "demo-repo"), repo, { recursive: true });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "base");
  host = await composeHost({
    store: join(root, "store"),
    policy: join(ROOT, "examples", "asp.policy.json"),
    trustRoots: [join(ROOT, "examples", "keys", "example.key.pub")],
    plugins: ["provider-typescript", "provider-secrets"].map((p) => join(ROOT, "plugins", p, "dist", "plugin")),
    failOpenSink: { log: () => undefined },
  });
  server = await createServer({
    host,
    repositories: { demo: repo },
    tokens: [{ id: "viewer", digest: tokenDigest(READER), scopes: ["read", "evaluate"] }],
    consoleDir: join(root, "console"),
    stream: { pollMs: 50 },
  });
  await server.listen({ host: "127.0.0.1", port: 0 });
  const address = server.server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  base = `http://127.0.0.1:${address.port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await host?.close();
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
  // Every request the pages made went to the server they came from.
  expect(external).toEqual([]);
});

async function newPage(width = 1280, height = 800): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height } });
  page.on("request", (r) => {
    if (!r.url().startsWith(base)) external.push(r.url());
  });
  return page;
}

describe.skipIf(!existsSync(CHROMIUM))("the console in headless Chromium (issue 28)", () => {
  it("a deny shows its gating finding and next step, reached with the keyboard; readable at 1280×800 and a phone's width", async () => {
    writeFileSync(join(repo, "src", "upload.ts"), `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n`);
    const gate = await fetch(`${base}/api/v1/repositories/demo/evaluate`, {
      method: "POST",
      headers: { authorization: `Bearer ${READER}`, "content-type": "application/json" },
      body: JSON.stringify({ callSite: "gate", base: "HEAD" }),
    });
    const { decision, receipt } = (await gate.json()) as { decision: string; receipt: { receiptId: string } };
    expect(decision).toBe("deny");

    const page = await newPage();
    await signIn(page);
    await page.getByText("Receipt chain:").waitFor();
    expect(await page.locator(".chain .badge").textContent()).toBe("verified");
    // Keyboard only: focus the decision's link and follow it.
    const link = page.locator(`a[href="#/decisions/${receipt.receiptId}"]`);
    await link.focus();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Gating findings" }).waitFor();
    const gating = page.getByRole("region", { name: "Gating findings" });
    expect(await gating.textContent()).toContain("src/upload.ts");
    expect(await gating.locator(".next-step").first().textContent()).toMatch(/^Next step: \S/);
    // The secret itself is never on the page.
    expect(await page.content()).not.toContain(FAKE_AWS_KEY);
    await page.screenshot({ path: join(ARTIFACTS, "decision-1280x800.png"), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(390);
    await page.screenshot({ path: join(ARTIFACTS, "decision-390x844.png"), fullPage: true });
    await page.close();
    git(repo, "checkout", "-q", "--", ".");
    git(repo, "clean", "-fdq");
  }, 120_000);

  it("a running Auto Run's label changes live when its terminal commits", async () => {
    const page = await newPage();
    await signIn(page);
    await page.goto(`${base}/console/#/runs`);
    await page.getByRole("heading", { name: "Auto Runs" }).waitFor();

    const { engine, release } = heldEngine();
    const runner = createAutoRunner({
      store: host.store,
      engine,
      reviewers: [passingReviewer()],
      flags: createStageFlags(["stage2_auto_run_storage", "stage4_review_completion_gate"]),
    });
    const run = { root_frame_id: "console", branch_id: "b", turn_id: "t", execution_id: "live-1" };
    const finished = runner.run({
      run,
      selection: {
        preset: "off",
        result_review_mode: "review_only",
        approvals_reviewer: "user",
        source: "frame",
        normalized: false,
      },
    });
    // The started run shows up by itself (the page follows the event stream), not yet Verified.
    const label = page.locator("td.label").first();
    await label.waitFor();
    const before = (await label.textContent()) ?? "";
    expect(before).not.toMatch(/^Verified/);
    await page.screenshot({ path: join(ARTIFACTS, "run-open.png") });
    release();
    expect((await finished).state).toBe("verified");
    await page.locator("td.label", { hasText: /^Verified/ }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, "run-verified.png") });
    await page.close();
  }, 120_000);
});
