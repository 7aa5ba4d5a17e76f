// An MCP agent built on the official TypeScript SDK, for the bridge's
// interop tests. It runs a plan (JSON, argv[2]) of steps against a bridge
// and prints one JSON line of results: the Go test asserts on them.
//
// env: MCP_SDK_DIR (the installed @modelcontextprotocol/sdk), BRIDGE_URL,
// BRIDGE_TOKEN.
import { pathToFileURL } from 'node:url';

const sdk = (p) => import(pathToFileURL(`${process.env.MCP_SDK_DIR}/dist/esm/${p}`).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { ElicitRequestSchema, CreateMessageRequestSchema, ResourceUpdatedNotificationSchema } = await sdk('types.js');

const plan = JSON.parse(process.argv[2]);
const answers = [...(plan.elicit ?? [])];
const asked = [];
// relayed are the servers' own requests the bridge passed on (an
// elicitation it relays names its server: "[mcp:<server>:<tool>] …").
const relayed = [];

const transport = new StreamableHTTPClientTransport(new URL(process.env.BRIDGE_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.BRIDGE_TOKEN}` } },
});
const capabilities = plan.noElicitation ? {} : { elicitation: {} };
if (plan.sampling) capabilities.sampling = {};
const client = new Client({ name: 'ts-agent', version: '1.0.0' }, { capabilities });
if (!plan.noElicitation) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    if (req.params.message.startsWith('[mcp:')) {
      relayed.push({ method: req.method, params: req.params });
      return plan.relayAnswer ?? { action: 'decline' };
    }
    asked.push(req.params.message);
    const answer = answers.shift() ?? 'deny';
    if (answer === 'decline') return { action: 'decline' };
    return { action: 'accept', content: { decision: answer } };
  });
}

if (plan.sampling) {
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    relayed.push({ method: req.method, params: req.params });
    return { model: 'ts-agent-model', role: 'assistant', content: { type: 'text', text: plan.sampling } };
  });
}

// Resource updates arrive on the session's GET stream, which the SDK opens
// after initialization; each step reports the ones that came during it.
let updates = [];
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updates.push(n.params.uri); });

const out = { steps: [], asked, relayed };
try {
  await client.connect(transport);
  out.sessionId = transport.sessionId;
  for (const step of plan.steps) {
    const r = { op: step.op, name: step.name };
    let progress = 0;
    const controller = new AbortController();
    if (step.cancelAfterMs) setTimeout(() => controller.abort('the agent gave up'), step.cancelAfterMs);
    const opts = { signal: controller.signal, timeout: step.timeoutMs ?? 30000 };
    if (step.progress) opts.onprogress = () => { progress++; };
    updates = [];
    try {
      switch (step.op) {
        case 'listTools': r.result = await client.listTools(); break;
        case 'call': r.result = await client.callTool({ name: step.name, arguments: step.args ?? {} }, undefined, opts); break;
        case 'listResources': r.result = await client.listResources(); break;
        case 'read': r.result = await client.readResource({ uri: step.name }, opts); break;
        case 'listPrompts': r.result = await client.listPrompts(); break;
        case 'getPrompt': r.result = await client.getPrompt({ name: step.name, arguments: step.args ?? {} }, opts); break;
        case 'subscribe': r.result = await client.subscribeResource({ uri: step.name }, opts); break;
        case 'unsubscribe': r.result = await client.unsubscribeResource({ uri: step.name }, opts); break;
        case 'wait': await new Promise((resolve) => setTimeout(resolve, step.waitMs)); break;
        default: throw new Error(`unknown op ${step.op}`);
      }
      r.ok = true;
    } catch (e) {
      r.ok = false;
      r.error = { code: e.code ?? null, message: String(e.message ?? e) };
    }
    r.progress = progress;
    r.updates = updates;
    updates = [];
    out.steps.push(r);
  }
  await transport.terminateSession().catch(() => {});
  await client.close();
} catch (e) {
  out.fatal = String(e.stack ?? e);
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
