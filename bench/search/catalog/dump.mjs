// Lists the tools of real MCP servers with the official TypeScript SDK
// client and writes each server's tools/list answer to <out>/<server>.json.
// Usage: node dump.mjs <dir with node_modules> <out dir>
// The servers are started over stdio with placeholder credentials: listing
// tools needs none, and no call is made.
import { writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";

const [modules, out] = process.argv.slice(2);
const sdk = join(modules, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "client");
const { Client } = await import(join(sdk, "index.js"));
const { StdioClientTransport } = await import(join(sdk, "stdio.js"));
const bin = (name) => join(modules, "node_modules", ".bin", name);
const placeholder = "placeholder-not-a-real-credential";

// server name -> how to start it.
const servers = {
  github: { command: bin("mcp-server-github"), env: { GITHUB_PERSONAL_ACCESS_TOKEN: placeholder } },
  gitlab: { command: bin("mcp-server-gitlab"), env: { GITLAB_PERSONAL_ACCESS_TOKEN: placeholder } },
  slack: { command: bin("mcp-server-slack"), env: { SLACK_BOT_TOKEN: placeholder, SLACK_TEAM_ID: "T000" } },
  "google-maps": { command: bin("mcp-server-google-maps"), env: { GOOGLE_MAPS_API_KEY: placeholder } },
  puppeteer: { command: bin("mcp-server-puppeteer") },
  playwright: { command: bin("playwright-mcp"), args: ["--headless"] },
  "chrome-devtools": { command: bin("chrome-devtools-mcp") },
  notion: { command: bin("notion-mcp-server"), env: { NOTION_TOKEN: placeholder } },
  kubernetes: { command: bin("mcp-server-kubernetes") },
  chart: { command: bin("mcp-server-chart") },
  "desktop-commander": { command: bin("desktop-commander") },
  mongodb: { command: bin("mongodb-mcp-server") },
  everything: { command: bin("mcp-server-everything") },
  filesystem: { command: bin("mcp-server-filesystem"), args: ["/tmp"] },
  memory: { command: bin("mcp-server-memory") },
  git: { command: bin("git-mcp-server") },
  sentry: { command: bin("sentry-mcp"), args: ["--access-token=" + placeholder] },
  hubspot: { command: bin("mcp-hubspot"), env: { PRIVATE_APP_ACCESS_TOKEN: placeholder } },
  firecrawl: { command: bin("firecrawl-mcp"), env: { FIRECRAWL_API_KEY: "fc-" + placeholder } },
  "brave-search": { command: bin("mcp-server-brave-search"), env: { BRAVE_API_KEY: placeholder } },
  linear: { command: bin("mcp-linear"), env: { LINEAR_API_TOKEN: placeholder } },
};

mkdirSync(out, { recursive: true });
const only = process.argv.slice(4);
for (const [name, start] of Object.entries(servers)) {
  if (only.length && !only.includes(name)) continue;
  const transport = new StdioClientTransport({
    command: start.command, args: start.args ?? [],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...(start.env ?? {}) },
    stderr: "ignore",
  });
  const client = new Client({ name: "catalog-dump", version: "1" });
  try {
    await Promise.race([
      (async () => {
        await client.connect(transport);
        const tools = [];
        let cursor;
        do {
          const page = await client.listTools(cursor ? { cursor } : {});
          tools.push(...page.tools);
          cursor = page.nextCursor;
        } while (cursor);
        const v = client.getServerVersion();
        writeFileSync(join(out, name + ".json"), JSON.stringify({ server: name, serverInfo: v, tools }, null, 1) + "\n");
        console.log(`${name}: ${tools.length} tools`);
      })(),
      new Promise((_, reject) => setTimeout(() => reject(new Error("timed out")), 60000)),
    ]);
  } catch (e) {
    console.log(`${name}: failed: ${e.message}`);
  } finally {
    await client.close().catch(() => {});
  }
}
process.exit(0);
