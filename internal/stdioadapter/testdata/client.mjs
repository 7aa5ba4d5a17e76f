// A test agent built on the official MCP TypeScript SDK client. It connects
// to the Streamable HTTP URL given as the first argument, runs the scenario
// named by the second, and prints one JSON object describing what it saw.
//
// Usage: node client.mjs URL SCENARIO [ARG]
// MCP_SDK_DIR must point at the installed @modelcontextprotocol/sdk package
// (the script lives outside that package's node_modules tree).
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.MCP_SDK_DIR;
const load = (p) => import(pathToFileURL(path.join(sdkDir, "dist/esm", p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const types = await load("types.js");

const [url, scenario, arg] = process.argv.slice(2);
const out = {};
const notes = { logs: [], progress: [], serverRequests: [] };

const client = new Client(
  { name: "stdioadapter-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(types.ElicitRequestSchema, async (req) => {
  notes.serverRequests.push(req.method);
  return { action: "accept", content: { name: "Ada Lovelace", check: true } };
});
client.setRequestHandler(types.CreateMessageRequestSchema, async (req) => {
  notes.serverRequests.push(req.method);
  return {
    role: "assistant",
    model: "test-model",
    stopReason: "endTurn",
    content: { type: "text", text: "sampled by the test client" },
  };
});
client.setRequestHandler(types.ListRootsRequestSchema, async (req) => {
  notes.serverRequests.push(req.method);
  return { roots: [{ uri: "file:///workspace/test-root", name: "test-root" }] };
});
client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => {
  notes.logs.push(n.params.data);
});

const text = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function everything() {
  out.server = client.getServerVersion();
  out.protocolVersion = transport.protocolVersion;
  out.sessionId = transport.sessionId;
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  out.echo = text(await client.callTool({ name: "echo", arguments: { message: "hello through the adapter" } }));
  out.sum = text(await client.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } }));
  out.longRunning = text(
    await client.callTool(
      { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 4 } },
      undefined,
      { onprogress: (p) => notes.progress.push(p.progress) },
    ),
  );
  await client.setLoggingLevel("debug");
  out.logging = text(await client.callTool({ name: "toggle-simulated-logging", arguments: {} }));
  out.elicitation = text(await client.callTool({ name: "trigger-elicitation-request", arguments: {} }));
  out.sampling = text(await client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "hi", maxTokens: 10 } }));
  out.roots = text(await client.callTool({ name: "get-roots-list", arguments: {} }));
  const resources = (await client.listResources()).resources;
  out.resourceCount = resources.length;
  out.resource = (await client.readResource({ uri: resources[0].uri })).contents[0].uri;
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name).sort();
  out.prompt = (await client.getPrompt({ name: "args-prompt", arguments: { city: "Paris" } })).messages[0].content.text;
  out.ping = await client.ping();
  // Let a periodic log message arrive if the server sends one soon.
  for (let i = 0; i < 20 && notes.logs.length === 0; i++) await sleep(100);
}

// sum calls get-sum many times, a few at once, with arguments unique to this
// client, and counts the answers that are not its own.
async function sum() {
  const base = Number(arg) * 100000;
  const n = 60;
  let wrong = 0;
  const calls = [];
  for (let i = 0; i < n; i++) {
    calls.push(
      client.callTool({ name: "get-sum", arguments: { a: base, b: i } }).then((r) => {
        if (!text(r).includes(String(base + i))) wrong++;
      }),
    );
    if (calls.length % 6 === 0) await Promise.all(calls.splice(0));
  }
  await Promise.all(calls);
  out.calls = n;
  out.wrong = wrong;
  out.sessionId = transport.sessionId;
}

async function filesystem() {
  const dir = arg;
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  out.allowed = text(await client.callTool({ name: "list_allowed_directories", arguments: {} }));
  out.write = text(await client.callTool({ name: "write_file", arguments: { path: `${dir}/note.txt`, content: "written through the adapter\n" } }));
  out.read = text(await client.callTool({ name: "read_text_file", arguments: { path: `${dir}/note.txt` } }));
  out.list = text(await client.callTool({ name: "list_directory", arguments: { path: dir } }));
}

// calls measures tools/call latency: ARG calls of echo, one at a time.
async function calls() {
  const n = Number(arg);
  for (let i = 0; i < 20; i++) await client.callTool({ name: "echo", arguments: { message: "warm" } });
  const times = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await client.callTool({ name: "echo", arguments: { message: `m${i}` } });
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  out.p50ms = times[Math.floor(n * 0.5)];
  out.p99ms = times[Math.floor(n * 0.99)];
}

const scenarios = { everything, sum, filesystem, calls };
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
  await scenarios[scenario]();
  out.notes = notes;
  await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify(out));
} catch (err) {
  console.log(JSON.stringify({ error: String(err && err.stack ? err.stack : err), partial: out, notes }));
  process.exit(1);
}
