// The labelled corpus: real-world token shapes built at run time from their documented prefixes,
// alphabets and lengths (never real credentials, and never a literal that a scanner would flag in
// this repository). Each format has true positives in several contexts and near misses: strings
// that look like the format but are not one (too short, wrong prefix, no secret part).
import { ALNUM, fake, HEX } from "./fakes.js";

const LOWER_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const URL_SAFE = `${ALNUM}_-`;
const B64 = `${ALNUM}+/`;
const DIGITS = "0123456789";
const BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L";

/** One format of the corpus. */
export interface CorpusFormat {
  /** Short name, used in the recall table. */
  readonly format: string;
  /** Whether one of the formats the issue lists (each must be found). */
  readonly listed?: boolean;
  /** Codes (without `secrets/`) that count as finding it. */
  readonly codes: readonly string[];
  /** True positives: each is one file's text holding one secret of this format. */
  readonly positives: readonly string[];
  /** Near misses: each is one file's text that must give no finding at all. */
  readonly negatives: readonly string[];
  /** The path the positives are scanned at (default `fixtures/pos-N.env`): path rules need theirs. */
  readonly path?: string;
  /** The path the near misses are scanned at (default: `path`, else `fixtures/neg-N.env`). */
  readonly negativePath?: string;
}

type Gen = (alphabet: string, n: number) => string;

interface Spec {
  readonly path?: string;
  readonly negativePath?: string;
  readonly format: string;
  readonly listed?: boolean;
  readonly codes: readonly string[];
  /** The secret (a token, or a whole line when the format is an assignment or URL). */
  readonly token: (g: Gen) => string;
  /** Whether `token` is already a whole line (assignments, URLs, key blocks). */
  readonly line?: boolean;
  readonly near: ReadonlyArray<(g: Gen) => string>;
}

const pem = (g: Gen, label: string, magic: string): string =>
  `-----BEGIN ${label}-----\n${magic}${g(B64, 60)}\n${Array.from({ length: 4 }, () => g(B64, 64)).join("\n")}\n${g(B64, 40)}==\n-----END ${label}-----`;

/** A 1Password service-account token body: base64 of its JSON (`{"signInAddress": ...}`). */
function opsToken(g: Gen): string {
  let json = JSON.stringify({
    signInAddress: "my.1password.com",
    email: `${g(LOWER_DIGITS, 13)}@1passwordserviceaccounts.com`,
    secretKey: `A3-${g(UPPER_DIGITS, 6)}-${g(UPPER_DIGITS, 6)}-${g(UPPER_DIGITS, 5)}`,
    srpX: g(HEX, 64),
  });
  // The format ends in `fQ` (a final `}` alone in its base64 group).
  while (json.length % 3 !== 1) json = `${json.slice(0, -1)} }`;
  return Buffer.from(json).toString("base64");
}

const SPECS: readonly Spec[] = [
  // --- the catalogue (secretlint recommended preset) and the rules of this plugin alike ---
  {
    format: "AWS access key id",
    listed: true,
    codes: ["aws-access-key-id", "secretlint-aws"],
    token: (g) => `AKIA${g(UPPER_DIGITS, 16)}`,
    near: [(g) => `AKIA${g(UPPER_DIGITS, 12)}`, (g) => `akia${g(LOWER_DIGITS, 16)}`],
  },
  {
    format: "AWS secret access key",
    listed: true,
    codes: ["aws-secret-access-key", "secretlint-aws"],
    line: true,
    token: (g) => `aws_secret_access_key = "${g(B64, 40)}"`,
    near: [
      () => `aws_secret_access_key = "${"EXAMPLE".repeat(4)}"`,
      () => "aws_secret_access_key = os.environ['AWS_SECRET_ACCESS_KEY']",
    ],
  },
  {
    format: "AWS temporary access key id",
    codes: ["aws-access-key-id", "secretlint-aws"],
    token: (g) => `ASIA${g(UPPER_DIGITS, 16)}`,
    near: [(g) => `ASIA${g(UPPER_DIGITS, 10)}`],
  },
  {
    format: "GitHub personal access token (classic)",
    codes: ["secretlint-github"],
    token: (g) => `ghp_${g(ALNUM, 36)}`,
    near: [(g) => `ghp_${g(ALNUM, 30)}`, (g) => `ghx_${g(ALNUM, 36)}`],
  },
  {
    format: "GitHub OAuth token",
    codes: ["secretlint-github"],
    token: (g) => `gho_${g(ALNUM, 36)}`,
    near: [(g) => `gho_${g(ALNUM, 20)}`],
  },
  {
    format: "GitHub app installation token",
    codes: ["secretlint-github"],
    token: (g) => `ghs_${g(ALNUM, 36)}`,
    near: [(g) => `ghs_${g(ALNUM, 24)}`],
  },
  {
    format: "GitHub app user token",
    codes: ["secretlint-github"],
    token: (g) => `ghu_${g(ALNUM, 36)}`,
    near: [(g) => `ghu_${g(ALNUM, 24)}`],
  },
  {
    format: "GitHub refresh token",
    codes: ["secretlint-github"],
    token: (g) => `ghr_${g(ALNUM, 36)}`,
    near: [(g) => `ghr_${g(ALNUM, 24)}`],
  },
  {
    format: "GitHub fine-grained token",
    codes: ["secretlint-github"],
    token: (g) => `github_pat_${g(ALNUM, 22)}_${g(ALNUM, 59)}`,
    near: [(g) => `github_pat_${g(ALNUM, 20)}`],
  },
  {
    format: "GitLab personal access token",
    codes: ["secretlint-gitlab"],
    token: (g) => `glpat-${g(URL_SAFE, 20)}`,
    near: [(g) => `glpat-${g(ALNUM, 12)}`],
  },
  {
    format: "GitLab deploy token",
    codes: ["gitlab-token"],
    token: (g) => `gldt-${g(URL_SAFE, 20)}`,
    near: [(g) => `gldt-${g(ALNUM, 10)}`],
  },
  {
    format: "GitLab runner token",
    codes: ["gitlab-token"],
    token: (g) => `glrt-${g(URL_SAFE, 24)}`,
    near: [(g) => `glrt-${g(ALNUM, 8)}`],
  },
  {
    format: "Slack bot token",
    codes: ["secretlint-slack"],
    token: (g) => `xoxb-${g(DIGITS, 12)}-${g(DIGITS, 13)}-${g(ALNUM, 24)}`,
    near: [(g) => `xoxz-${g(DIGITS, 12)}-${g(ALNUM, 24)}`],
  },
  {
    format: "Slack user token",
    codes: ["secretlint-slack"],
    token: (g) => `xoxp-${g(DIGITS, 12)}-${g(DIGITS, 12)}-${g(DIGITS, 13)}-${g(HEX, 32)}`,
    near: [(g) => `xoxq-${g(DIGITS, 12)}-${g(HEX, 32)}`],
  },
  {
    format: "Slack app-level token",
    codes: ["secretlint-slack"],
    token: (g) => `${"xa"}pp-1-A${g(UPPER_DIGITS, 10)}-${g(DIGITS, 13)}-${g(HEX, 64)}`,
    near: [(g) => `xapq-1-A${g(UPPER_DIGITS, 10)}-${g(HEX, 20)}`],
  },
  {
    format: "Slack webhook URL",
    codes: ["secretlint-slack"],
    token: (g) => `https://hooks.slack.com/services/T${g(UPPER_DIGITS, 8)}/B${g(UPPER_DIGITS, 10)}/${g(ALNUM, 24)}`,
    near: [() => "https://hooks.slack.com/services/YOUR/WEBHOOK/URL"],
  },
  {
    format: "SendGrid API key",
    listed: true,
    codes: ["sendgrid-api-key", "secretlint-sendgrid"],
    token: (g) => `SG.${g(URL_SAFE, 22)}.${g(URL_SAFE, 43)}`,
    near: [(g) => `SG.${g(ALNUM, 22)}`, (g) => `sg-${g(ALNUM, 22)}`],
  },
  {
    format: "npm access token",
    codes: ["secretlint-npm"],
    token: (g) => `npm_${g(ALNUM, 36)}`,
    near: [(g) => `npm_${g(ALNUM, 30)}`],
  },
  {
    format: "Shopify access token",
    codes: ["secretlint-shopify"],
    token: (g) => `shpat_${g(HEX, 32)}`,
    near: [(g) => `shpat_${g(HEX, 16)}`],
  },
  {
    format: "Shopify shared secret",
    codes: ["secretlint-shopify"],
    token: (g) => `shpss_${g(HEX, 32)}`,
    near: [(g) => `shpss_${g(HEX, 20)}`],
  },
  {
    format: "OpenAI project key",
    codes: ["secretlint-openai"],
    token: (g) => `sk-proj-${g(URL_SAFE, 74)}T3BlbkFJ${g(URL_SAFE, 74)}`,
    near: [(g) => `sk-proj-${g(ALNUM, 20)}`],
  },
  {
    format: "OpenAI legacy key",
    codes: ["secretlint-openai"],
    token: (g) => `sk-${g(ALNUM, 20)}T3BlbkFJ${g(ALNUM, 20)}`,
    near: [(g) => `sk-${g(ALNUM, 20)}`],
  },
  {
    format: "Anthropic API key",
    codes: ["secretlint-anthropic", "anthropic-api-key"],
    token: (g) => `sk-ant-api03-${g(URL_SAFE, 93)}AA`,
    near: [(g) => `sk-ant-api03-${g(ALNUM, 20)}AA`],
  },
  {
    format: "Groq API key",
    codes: ["secretlint-groq"],
    token: (g) => `gsk_${g(ALNUM, 52)}`,
    near: [(g) => `gsk_${g(ALNUM, 40)}`],
  },
  {
    format: "Hugging Face token",
    codes: ["secretlint-huggingface"],
    token: (g) => `hf_${g(LETTERS, 34)}`,
    near: [(g) => `hf_${g(LETTERS, 20)}`],
  },
  {
    format: "Linear API key",
    codes: ["secretlint-linear"],
    token: (g) => `lin_api_${g(ALNUM, 40)}`,
    near: [(g) => `lin_api_${g(ALNUM, 12)}`],
  },
  {
    format: "Notion integration token",
    codes: ["secretlint-notion"],
    token: (g) => `ntn_${g(DIGITS, 11)}${g(ALNUM, 35)}`,
    near: [(g) => `ntn_${g(ALNUM, 20)}`],
  },
  {
    format: "1Password service account token",
    codes: ["secretlint-1password", "1password-service-account-token"],
    token: (g) => `ops_${opsToken(g)}`,
    near: [(g) => `ops_eyJ${g(ALNUM, 30)}fQ==`],
  },
  {
    format: "Grafana Cloud token",
    codes: ["secretlint-grafana", "grafana-token"],
    token: (g) => `glc_${g(ALNUM, 80)}`,
    near: [(g) => `glc_${g(ALNUM, 16)}`],
  },
  {
    format: "Grafana service account token",
    codes: ["secretlint-grafana", "grafana-token"],
    token: (g) => `glsa_${g(ALNUM, 32)}_${g(HEX, 8)}`,
    near: [(g) => `glsa_${g(ALNUM, 20)}`],
  },
  {
    format: "HashiCorp Vault service token",
    listed: true,
    codes: ["secretlint-hashicorp-vault"],
    token: (g) => `hvs.${g(URL_SAFE, 95)}`,
    near: [(g) => `hvs.${g(ALNUM, 40)}`],
  },
  {
    format: "HashiCorp Vault batch token",
    listed: true,
    codes: ["secretlint-hashicorp-vault"],
    token: (g) => `hvb.${g(URL_SAFE, 150)}`,
    near: [(g) => `hvb.${g(ALNUM, 60)}`],
  },
  {
    format: "HashiCorp Vault legacy token",
    listed: true,
    codes: ["vault-legacy-token"],
    line: true,
    token: (g) => `VAULT_TOKEN=s.${g(ALNUM, 24)}`,
    near: [() => "VAULT_ADDR=https://vault.internal:8200", (g) => `VAULT_TOKEN=s.${g(ALNUM, 10)}`],
  },
  {
    format: "Vercel token",
    codes: ["secretlint-vercel"],
    token: (g) => `vcp_${g(ALNUM, 40)}`,
    near: [(g) => `vcp_${g(ALNUM, 10)}`],
  },
  {
    format: "Databricks token",
    codes: ["secretlint-databricks"],
    token: (g) => `dapi${g(HEX, 32)}`,
    near: [(g) => `dapi${g(HEX, 20)}`],
  },
  {
    format: "Docker Hub token",
    codes: ["secretlint-docker"],
    token: (g) => `dckr_pat_${g(URL_SAFE, 27)}`,
    near: [(g) => `dckr_pat_${g(ALNUM, 12)}`],
  },
  {
    format: "Figma token",
    codes: ["secretlint-figma"],
    token: (g) => `figd_${g(URL_SAFE, 40)}`,
    near: [(g) => `figd_${g(ALNUM, 20)}`],
  },
  {
    format: "PostgreSQL URL with password",
    listed: true,
    codes: ["secretlint-database-connection-string"],
    line: true,
    token: (g) => `DATABASE_URL=postgres://app_user:${g(ALNUM, 18)}@db.internal:5432/app`,
    near: [
      () => "DATABASE_URL=postgres://db.internal:5432/app",
      () => `DATABASE_URL=postgres://app_user:$\{DB_PASSWORD}@db.internal:5432/app`,
    ],
  },
  {
    format: "MySQL URL with password",
    listed: true,
    codes: ["secretlint-database-connection-string"],
    line: true,
    token: (g) => `url: mysql://root:${g(ALNUM, 16)}@mysql.internal:3306/shop`,
    near: [() => "url: mysql://mysql.internal:3306/shop"],
  },
  {
    format: "MongoDB URL with password",
    listed: true,
    codes: ["secretlint-database-connection-string"],
    line: true,
    token: (g) => `MONGO_URI="mongodb+srv://admin:${g(ALNUM, 18)}@cluster0.${g(LOWER_DIGITS, 5)}.mongodb.net/test"`,
    near: [() => 'MONGO_URI="mongodb://localhost:27017/test"'],
  },
  {
    format: "URL with basic-auth password",
    codes: ["secretlint-basicauth"],
    line: true,
    token: (g) => `git clone https://deploy:${g(ALNUM, 20)}@git.example.com/org/repo.git`,
    near: [() => "git clone https://git.example.com/org/repo.git"],
  },
  {
    format: "RSA private key",
    codes: ["private-key", "secretlint-privatekey"],
    line: true,
    token: (g) => pem(g, "RSA PRIVATE KEY", "MIIEow"),
    near: [() => 'if (pem.startsWith("-----BEGIN RSA PRIVATE KEY-----")) {}', (g) => pem(g, "PUBLIC KEY", "MIIBIj")],
  },
  {
    format: "OpenSSH private key",
    codes: ["private-key", "secretlint-privatekey"],
    line: true,
    token: (g) => pem(g, "OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjE"),
    near: [() => "-----BEGIN OPENSSH PRIVATE KEY-----"],
  },
  {
    format: "EC private key",
    codes: ["private-key", "secretlint-privatekey"],
    line: true,
    token: (g) => pem(g, "EC PRIVATE KEY", "MHcCAQ"),
    near: [() => "// expects -----BEGIN EC PRIVATE KEY----- ... -----END EC PRIVATE KEY-----"],
  },
  // --- rules of this plugin (formats the catalogue lacks) ---
  {
    format: "Google API key",
    listed: true,
    codes: ["google-api-key"],
    token: (g) => `AIza${g(URL_SAFE, 35)}`,
    near: [(g) => `AIza${g(ALNUM, 28)}`, (g) => `AIzb${g(ALNUM, 35)}`],
  },
  {
    format: "Google OAuth client secret",
    codes: ["google-oauth-client-secret"],
    token: (g) => `GOCSPX-${g(URL_SAFE, 28)}`,
    near: [(g) => `GOCSPX-${g(ALNUM, 12)}`],
  },
  {
    format: "Twilio API key",
    listed: true,
    codes: ["twilio-api-key"],
    token: (g) => `SK${g(HEX, 32)}`,
    near: [(g) => `SK${g(HEX, 24)}`, (g) => `XSK${g(HEX, 32)}`],
  },
  {
    format: "Twilio auth token",
    listed: true,
    codes: ["twilio-auth-token"],
    line: true,
    token: (g) => `TWILIO_AUTH_TOKEN=${g(HEX, 32)}`,
    near: [(g) => `TWILIO_ACCOUNT_SID=AC${g(HEX, 32)}`],
  },
  {
    format: "Mailgun API key",
    listed: true,
    codes: ["mailgun-api-key"],
    token: (g) => `key-${g(HEX, 32)}`,
    near: [(g) => `key-${g(HEX, 20)}`, () => "primary-key-rotation-schedule"],
  },
  {
    format: "Mailgun private API key",
    listed: true,
    codes: ["mailgun-api-key"],
    token: (g) => `${g(HEX, 32)}-${g(HEX, 8)}-${g(HEX, 8)}`,
    near: [(g) => `${g(HEX, 8)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 12)}`],
  },
  {
    format: "Azure storage connection string",
    listed: true,
    codes: ["azure-storage-account-key"],
    line: true,
    token: (g) =>
      `AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=${g(LOWER_DIGITS, 12)};AccountKey=${g(B64, 86)}==;EndpointSuffix=core.windows.net"`,
    near: [
      (g) =>
        `AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=${g(LOWER_DIGITS, 12)};EndpointSuffix=core.windows.net"`,
      () => "AccountKey=<your-account-key>",
    ],
  },
  {
    format: "Azure storage account key",
    listed: true,
    codes: ["azure-storage-account-key"],
    line: true,
    token: (g) => `azure_storage_key: "${g(B64, 86)}=="`,
    near: [(g) => `azure_storage_account: "${g(LOWER_DIGITS, 12)}"`],
  },
  {
    format: "Azure SAS token",
    codes: ["azure-sas-token"],
    line: true,
    token: (g) =>
      `https://${g(LOWER_DIGITS, 10)}.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&spr=https&sig=${g(ALNUM, 43)}%3D`,
    near: [(g) => `https://${g(LOWER_DIGITS, 10)}.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b`],
  },
  {
    format: "Azure AD client secret",
    codes: ["azure-ad-client-secret"],
    token: (g) => `${g(LETTERS, 3)}${g(DIGITS, 1)}Q~${g(URL_SAFE, 34)}`,
    near: [(g) => `${g(LETTERS, 3)}8Q~${g(ALNUM, 10)}`],
  },
  {
    format: "Doppler personal token",
    listed: true,
    codes: ["doppler-token"],
    token: (g) => `dp.pt.${g(ALNUM, 43)}`,
    near: [(g) => `dp.pt.${g(ALNUM, 20)}`, (g) => `dp.xx.${g(ALNUM, 43)}`],
  },
  {
    format: "Doppler service token",
    listed: true,
    codes: ["doppler-token"],
    token: (g) => `dp.st.prd.${g(ALNUM, 40)}`,
    near: [(g) => `dp.st.${g(ALNUM, 12)}`],
  },
  {
    format: "Redis URL with password",
    codes: ["database-url-password"],
    line: true,
    token: (g) => `REDIS_URL=redis://:${g(ALNUM, 20)}@cache.internal:6379/0`,
    near: [
      () => "REDIS_URL=redis://cache.internal:6379/0",
      () => `REDIS_URL=redis://:$\{REDIS_PASSWORD}@cache.internal:6379/0`,
    ],
  },
  {
    format: "AMQP URL with password",
    codes: ["database-url-password"],
    line: true,
    token: (g) => `broker: amqps://svc:${g(ALNUM, 16)}@mq.internal:5671/vhost`,
    near: [() => "broker: amqps://mq.internal:5671/vhost"],
  },
  {
    format: "SQL Server URL with password",
    codes: ["database-url-password"],
    line: true,
    token: (g) => `conn = "sqlserver://sa:${g(ALNUM, 16)}@db.internal:1433"`,
    near: [() => 'conn = "sqlserver://db.internal:1433"'],
  },
  {
    format: "PyPI token",
    codes: ["pypi-token"],
    token: (g) => `pypi-AgEIcHlwaS5vcmc${g(URL_SAFE, 70)}`,
    near: [(g) => `pypi-AgEIcHlwaS5vcmc${g(ALNUM, 20)}`],
  },
  {
    format: "DigitalOcean token",
    codes: ["digitalocean-token"],
    token: (g) => `dop_v1_${g(HEX, 64)}`,
    near: [(g) => `dop_v1_${g(HEX, 40)}`],
  },
  {
    format: "Heroku API key",
    codes: ["heroku-api-key"],
    token: (g) => `HRKU-AA${g(URL_SAFE, 58)}`,
    near: [(g) => `HRKU-AA${g(ALNUM, 20)}`],
  },
  {
    format: "Atlassian API token",
    codes: ["atlassian-api-token"],
    token: (g) => `ATATT3xFfGF0${g(URL_SAFE, 180)}`,
    near: [(g) => `ATATT3xFfGF0${g(ALNUM, 40)}`],
  },
  {
    format: "Postman API key",
    codes: ["postman-api-key"],
    token: (g) => `PMAK-${g(HEX, 24)}-${g(HEX, 34)}`,
    near: [(g) => `PMAK-${g(HEX, 24)}`],
  },
  {
    format: "New Relic user key",
    codes: ["new-relic-user-key"],
    token: (g) => `NRAK-${g(UPPER_DIGITS, 27)}`,
    near: [(g) => `NRAK-${g(UPPER_DIGITS, 15)}`],
  },
  {
    format: "Dynatrace token",
    codes: ["dynatrace-token"],
    token: (g) => `dt0c01.${g(UPPER_DIGITS, 24)}.${g(UPPER_DIGITS, 64)}`,
    near: [(g) => `dt0c01.${g(UPPER_DIGITS, 24)}`],
  },
  {
    format: "Sentry user token",
    codes: ["sentry-token"],
    token: (g) => `sntryu_${g(HEX, 64)}`,
    near: [(g) => `sntryu_${g(HEX, 32)}`],
  },
  {
    format: "Sentry org token",
    codes: ["sentry-token"],
    token: (g) => `sntrys_eyJ${g(ALNUM, 120)}`,
    near: [(g) => `sntrys_eyJ${g(ALNUM, 20)}`],
  },
  {
    format: "Pulumi token",
    codes: ["pulumi-token"],
    token: (g) => `pul-${g(HEX, 40)}`,
    near: [(g) => `pul-${g(HEX, 20)}`],
  },
  {
    format: "Terraform Cloud token",
    codes: ["terraform-cloud-token"],
    token: (g) => `${g(ALNUM, 14)}.atlasv1.${g(URL_SAFE, 67)}`,
    near: [(g) => `${g(ALNUM, 14)}.atlasv1.${g(ALNUM, 20)}`],
  },
  {
    format: "Telegram bot token",
    codes: ["telegram-bot-token"],
    token: (g) => `${g("123456789", 1)}${g(DIGITS, 9)}:AA${g(URL_SAFE, 33)}`,
    near: [(g) => `${g(DIGITS, 10)}:AA${g(ALNUM, 20)}`],
  },
  {
    format: "Discord webhook URL",
    codes: ["discord-webhook-url"],
    token: (g) => `https://discord.com/api/webhooks/${g("123456789", 1)}${g(DIGITS, 17)}/${g(URL_SAFE, 68)}`,
    near: [() => "https://discord.com/api/webhooks/<id>/<token>"],
  },
  {
    format: "Microsoft Teams webhook URL",
    codes: ["teams-webhook-url"],
    token: (g) =>
      `https://contoso.webhook.office.com/webhookb2/${g(HEX, 8)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 12)}@${g(HEX, 8)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 12)}/IncomingWebhook/${g(HEX, 32)}/${g(HEX, 8)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 12)}`,
    near: [() => "https://contoso.webhook.office.com/webhookb2/"],
  },
  {
    format: "Square access token",
    codes: ["square-token"],
    token: (g) => `EAAA${g(URL_SAFE, 60)}`,
    near: [(g) => `EAAA${g(ALNUM, 30)}`],
  },
  {
    format: "Square OAuth secret",
    codes: ["square-token"],
    token: (g) => `sq0csp-${g(URL_SAFE, 43)}`,
    near: [(g) => `sq0csp-${g(ALNUM, 20)}`],
  },
  {
    format: "Mailchimp API key",
    codes: ["mailchimp-api-key"],
    token: (g) => `${g(HEX, 32)}-us${g("123456789", 1)}${g(DIGITS, 1)}`,
    near: [(g) => `${g(HEX, 20)}-us12`],
  },
  {
    format: "age secret key",
    codes: ["age-secret-key"],
    token: (g) => `AGE-SECRET-KEY-1${g(BECH32, 58)}`,
    near: [(g) => `AGE-SECRET-KEY-1${g(BECH32, 30)}`],
  },
  {
    format: "Alibaba Cloud AccessKey ID",
    codes: ["alibaba-access-key-id"],
    token: (g) => `LTAI${g(ALNUM, 20)}`,
    near: [(g) => `LTAI${g(ALNUM, 12)}`],
  },
  {
    format: "PlanetScale token",
    codes: ["planetscale-token"],
    token: (g) => `pscale_tkn_${g(URL_SAFE, 43)}`,
    near: [(g) => `pscale_tkn_${g(ALNUM, 16)}`],
  },
  {
    format: "Supabase token",
    codes: ["supabase-token"],
    token: (g) => `sbp_${g(HEX, 40)}`,
    near: [(g) => `sbp_${g(HEX, 20)}`],
  },
  {
    format: "Fly.io token",
    codes: ["flyio-token"],
    token: (g) => `fo1_${g(URL_SAFE, 43)}`,
    near: [(g) => `fo1_${g(ALNUM, 20)}`],
  },
  {
    format: "RubyGems API key",
    codes: ["rubygems-api-key"],
    token: (g) => `rubygems_${g(HEX, 48)}`,
    near: [(g) => `rubygems_${g(HEX, 20)}`],
  },
  {
    format: "NuGet API key",
    codes: ["nuget-api-key"],
    token: (g) => `oy2${g(LOWER_DIGITS, 43)}`,
    near: [(g) => `oy2${g(LOWER_DIGITS, 20)}`],
  },
  {
    format: "Clojars token",
    codes: ["clojars-token"],
    token: (g) => `CLOJARS_${g(LOWER_DIGITS, 60)}`,
    near: [(g) => `CLOJARS_${g(LOWER_DIGITS, 30)}`],
  },
  {
    format: "ReadMe API key",
    codes: ["readme-api-key"],
    token: (g) => `rdme_${g(LOWER_DIGITS, 70)}`,
    near: [(g) => `rdme_${g(LOWER_DIGITS, 30)}`],
  },
  {
    format: "EasyPost API key",
    codes: ["easypost-api-key"],
    token: (g) => `EZAK${g(ALNUM, 54)}`,
    near: [(g) => `EZAK${g(ALNUM, 30)}`],
  },
  {
    format: "Duffel token",
    codes: ["duffel-token"],
    token: (g) => `duffel_live_${g(URL_SAFE, 43)}`,
    near: [(g) => `duffel_live_${g(ALNUM, 20)}`],
  },
  {
    format: "Prefect API key",
    codes: ["prefect-api-key"],
    token: (g) => `pnu_${g(ALNUM, 36)}`,
    near: [(g) => `pnu_${g(ALNUM, 20)}`],
  },
  {
    format: "Airtable token",
    codes: ["airtable-token"],
    token: (g) => `pat${g(ALNUM, 14)}.${g(HEX, 64)}`,
    near: [(g) => `pat${g(ALNUM, 14)}.${g(HEX, 20)}`],
  },
  {
    format: "Shippo token",
    codes: ["shippo-token"],
    token: (g) => `shippo_live_${g(HEX, 40)}`,
    near: [(g) => `shippo_live_${g(HEX, 20)}`],
  },
  {
    format: "Cloudflare Origin CA key",
    codes: ["cloudflare-origin-ca-key"],
    token: (g) => `v1.0-${g(HEX, 24)}-${g(HEX, 146)}`,
    near: [(g) => `v1.0-${g(HEX, 24)}-${g(HEX, 20)}`],
  },
  {
    format: "Frame.io token",
    codes: ["frameio-token"],
    token: (g) => `fio-u-${g(URL_SAFE, 64)}`,
    near: [(g) => `fio-u-${g(ALNUM, 20)}`],
  },
  {
    format: "HubSpot private app token",
    codes: ["hubspot-private-app-token"],
    token: (g) => `pat-na1-${g(HEX, 8)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 4)}-${g(HEX, 12)}`,
    near: [(g) => `pat-na1-${g(HEX, 8)}`],
  },
  {
    format: "Contentful token",
    codes: ["contentful-token"],
    token: (g) => `CFPAT-${g(URL_SAFE, 43)}`,
    near: [(g) => `CFPAT-${g(ALNUM, 20)}`],
  },
  {
    format: "Mapbox secret token",
    codes: ["mapbox-secret-token"],
    token: (g) => `sk.eyJ${g(URL_SAFE, 60)}.${g(URL_SAFE, 22)}`,
    near: [(g) => `pk.eyJ${g(ALNUM, 60)}.${g(ALNUM, 22)}`],
  },
  {
    format: "Typeform token",
    codes: ["typeform-token"],
    token: (g) => `tfp_${g(URL_SAFE, 59)}`,
    near: [(g) => `tfp_${g(ALNUM, 20)}`],
  },
  {
    format: "Buildkite token",
    codes: ["buildkite-token"],
    token: (g) => `bkua_${g(HEX, 40)}`,
    near: [(g) => `bkua_${g(HEX, 20)}`],
  },
  {
    format: "Octopus Deploy API key",
    codes: ["octopus-deploy-api-key"],
    token: (g) => `API-${g(UPPER_DIGITS, 26)}`,
    near: [(g) => `API-${g(UPPER_DIGITS, 12)}`],
  },
  {
    format: "Stripe secret key",
    codes: ["stripe-secret-key"],
    token: (g) => `sk_live_${g(ALNUM, 24)}`,
    near: [(g) => `pk_live_${g(ALNUM, 24)}`],
  },
  {
    format: "Stripe restricted key",
    codes: ["stripe-secret-key"],
    token: (g) => `rk_live_${g(ALNUM, 24)}`,
    near: [(g) => `rk_live_${g(ALNUM, 8)}`],
  },
  {
    format: "Stripe webhook secret",
    codes: ["stripe-webhook-secret"],
    token: (g) => `whsec_${g(ALNUM, 32)}`,
    near: [(g) => `whsec_${g(ALNUM, 16)}`],
  },
  {
    format: "JSON Web Token",
    codes: ["jwt"],
    token: (g) =>
      `${Buffer.from('{"alg":"HS256","typ":"JWT"}').toString("base64url")}.${Buffer.from(`{"sub":"${g(ALNUM, 10)}"}`).toString("base64url")}.${g(URL_SAFE, 43)}`,
    near: [() => "eyJhbGciOiJIUzI1NiJ9"],
  },
  {
    format: "Password assigned in config",
    codes: ["high-entropy-assignment"],
    line: true,
    token: (g) => `DB_PASSWORD = "${g(B64, 32)}"`,
    near: [() => 'DB_PASSWORD = "changeme_changeme_changeme"', () => "DB_PASSWORD = process.env.DB_PASSWORD"],
  },
  // --- a secret-looking name and its value in each language's own assignment syntax (issue 26:
  // the generic rule needed `:`/`=` right after the name and missed these) ---
  ...assignmentContexts(),
  // --- formats with no rule before (issue 26) ---
  {
    format: "OpenShift OAuth token",
    codes: ["openshift-user-token"],
    token: (g) => `sha256~${g(URL_SAFE, 43)}`,
    near: [(g) => `sha256~${g(URL_SAFE, 20)}`, (g) => `sha256:${g(HEX, 64)}`],
  },
  {
    format: "Harness personal access token",
    codes: ["harness-token"],
    token: (g) => `pat.${g(URL_SAFE, 22)}.${g(ALNUM, 24)}.${g(ALNUM, 20)}`,
    near: [(g) => `pat.${g(ALNUM, 10)}.${g(ALNUM, 10)}`],
  },
  {
    format: "Harness service account token",
    codes: ["harness-token"],
    token: (g) => `sat.${g(URL_SAFE, 22)}.${g(ALNUM, 24)}.${g(ALNUM, 20)}`,
    near: [(g) => `sat.${g(ALNUM, 22)}`],
  },
  {
    format: "Adobe client secret",
    codes: ["adobe-client-secret"],
    token: (g) => `p8e-${g(ALNUM, 32)}`,
    near: [(g) => `p8e-${g(ALNUM, 12)}`],
  },
  {
    format: "Flutterwave secret key",
    codes: ["flutterwave-secret-key"],
    token: (g) => `FLWSECK_TEST-${g(HEX, 32)}-X`,
    near: [(g) => `FLWPUBK_TEST-${g(HEX, 32)}-X`],
  },
  // --- path rules: where the file is decides (issue 26) ---
  {
    format: "PKCS#12 keystore file",
    codes: ["pkcs12-file"],
    line: true,
    path: "certs/client.p12",
    negativePath: "docs/client.p12.md",
    // DER of a PKCS#12 PFX: SEQUENCE, version 3, then random-looking content, read as latin1.
    token: (g) => `0\x82\x0a>\x02\x01\x030\x82\x0a\x04\x06\x09*\x86H\x86\xf7\x0d\x01\x07\x01${g(B64, 48)}`,
    near: [(g) => `0\x82\x0a>\x02\x01\x030\x82\x0a\x04\x06\x09*\x86H\x86\xf7\x0d\x01\x07\x01${g(B64, 48)}`],
  },
  {
    format: "nuget.config clear-text password",
    codes: ["nuget-config-password"],
    line: true,
    path: "nuget.config",
    token: (g) =>
      `<configuration>\n  <packageSourceCredentials>\n    <feed>\n      <add key="Username" value="ci" />\n      <add key="ClearTextPassword" value="${g(ALNUM, 24)}" />\n    </feed>\n  </packageSourceCredentials>\n</configuration>`,
    near: [
      () => '<add key="ClearTextPassword" value="%NUGET_FEED_PASSWORD%" />',
      () => '<add key="Password" value="$(NugetFeedPassword)" />',
    ],
  },
  {
    format: "Terraform literal password",
    codes: ["terraform-password"],
    line: true,
    path: "infra/database.tf",
    token: (g) => `resource "azurerm_mssql_server" "db" {\n  administrator_login_password = "${g(ALNUM, 20)}"\n}`,
    near: [() => "  administrator_login_password = var.db_password", () => `  password = "${"$"}{var.db_password}"`],
  },
];

/** The generic rule in the assignment forms of common languages, each with a near miss that reads the value from elsewhere. */
function assignmentContexts(): Spec[] {
  const forms: ReadonlyArray<readonly [string, (v: string) => string, string]> = [
    ["Go typed var", (v) => `var apiToken string = "${v}"`, 'var apiToken string = os.Getenv("API_TOKEN")'],
    [
      "TypeScript typed const",
      (v) => `const apiToken: string = "${v}";`,
      'const apiToken: string = process.env.API_TOKEN ?? "";',
    ],
    ["Make ?=", (v) => `API_TOKEN ?= ${v}`, "API_TOKEN ?= $(shell cat .token)"],
    ["Make ::=", (v) => `API_TOKEN ::= ${v}`, "API_TOKEN ::= $(API_TOKEN_FROM_ENV)"],
    ["Make :::=", (v) => `API_TOKEN :::= ${v}`, "API_TOKEN :::= $(API_TOKEN_FROM_ENV)"],
    ["PHP .=", (v) => `$apiToken .= '${v}';`, "$apiToken .= getenv('API_TOKEN');"],
    [
      "Java System.setProperty",
      (v) => `System.setProperty("API_TOKEN", "${v}");`,
      'System.setProperty("API_TOKEN", System.getenv("API_TOKEN"));',
    ],
    [
      "XML element on its own lines",
      (v) => `<config>\n  <password>\n    ${v}\n  </password>\n</config>`,
      "<config>\n  <password>%DB_PASSWORD%</password>\n</config>",
    ],
  ];
  return forms.map(([name, form, near]) => ({
    format: `Secret assigned: ${name}`,
    codes: ["high-entropy-assignment"],
    line: true,
    token: (g: Gen) => form(g(B64, 32)),
    // A regular expression's named group is no assignment (`(?<secret>...`, as in a rule file).
    near: [() => near, () => "(?<secret>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,300})(?![A-Za-z0-9_-])"],
  }));
}

const CONTEXTS: ReadonlyArray<(token: string) => string> = [
  (t) => `# service configuration\nCREDENTIAL=${t}\n`,
  (t) => `{\n  "name": "svc",\n  "value": "${t}"\n}\n`,
  (t) => `import { connect } from "./client";\n\nexport const client = connect('${t}');\n`,
];

const NEAR_CONTEXTS: ReadonlyArray<(s: string) => string> = [
  (s) => `# reference\nref = "${s}"\n`,
  (s) => `// see ${s} in the docs\n`,
];

/**
 * Placeholders documentation writes where a credential would go, and identifiers next to a
 * secret-looking name (issue 26: a public scanner's negative samples): near misses of the format
 * they imitate, each a whole file.
 */
const PLACEHOLDERS: Readonly<Record<string, readonly string[]>> = {
  "AWS access key id": ["aws_access_key_id = AKIAXXXXXXXXXXXXXXXX\n"],
  "GitHub personal access token (classic)": [
    `GITHUB_TOKEN=ghp_${"x".repeat(36)}\n`,
    `token: "ghp_${"X".repeat(36)}"\n`,
  ],
  "GitLab personal access token": [`CI_TOKEN=glpat-${"X".repeat(20)}\n`],
  "Slack bot token": [`SLACK_BOT_TOKEN=xoxb-${"0".repeat(12)}-${"0".repeat(13)}-${"x".repeat(24)}\n`],
  "Stripe secret key": [`STRIPE_KEY=sk_live_${"x".repeat(24)}\n`],
  "Redis URL with password": ["REDIS_URL=redis://user:pass@localhost:6379/0\n"],
  "PostgreSQL URL with password": ["DATABASE_URL=postgres://postgres:postgres@localhost:5432/app\n"],
  "Password assigned in config": [
    "credentialsId: 'a1b2c3d4-e5f6-4789-abcd-0123456789ab'\n",
    'secretName: "prod-db-credentials-2024-v2"\n',
    "api_key_id = AKID9f8e7d6c5b4a39281706\n",
  ],
};

/** The corpus, generated from `seed`: reproducible, and different secrets for another seed. */
export function corpus(seed = 17): CorpusFormat[] {
  let n = seed * 1000;
  const g: Gen = (alphabet, length) => fake(alphabet, length, ++n);
  return SPECS.map((s) => ({
    format: s.format,
    ...(s.listed === true ? { listed: true } : {}),
    ...(s.path === undefined ? {} : { path: s.path }),
    ...(s.negativePath === undefined ? {} : { negativePath: s.negativePath }),
    codes: s.codes,
    positives: s.line === true ? [0, 1, 2].map(() => `# config\n${s.token(g)}\n`) : CONTEXTS.map((c) => c(s.token(g))),
    negatives: [
      ...s.near.flatMap((near) =>
        s.line === true ? [`# config\n${near(g)}\n`] : NEAR_CONTEXTS.map((c) => c(near(g))),
      ),
      ...(PLACEHOLDERS[s.format] ?? []),
    ],
  }));
}
