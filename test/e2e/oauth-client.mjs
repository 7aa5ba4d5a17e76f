// A person's desktop MCP client, built on the official TypeScript SDK and its
// OAuth support, for the oauth e2e spec. It connects to the bridge as a
// desktop client configured with the JSON `make dev` prints would: the
// bridge's 401 leads it to the protected resource metadata, the
// authorization server, dynamic client registration and the authorization
// code flow with PKCE. Where a desktop client opens a browser, this one signs
// in on the provider's login page, a plain HTML form (no script on it).
// Then it lists the tools and calls one, and prints one JSON line, with
// every request the SDK made to the bridge and for its OAuth discovery (the
// transport's and the auth flow's fetch records them), so the spec can check
// the 401's challenge and that the metadata it named was read.
//
// env: MCP_SDK_DIR (the installed @modelcontextprotocol/sdk), CLIENT_CONFIG
// (the desktop client configuration file), SIGN_IN_USER, SIGN_IN_PASSWORD,
// CALL_TOOL (a tool name; its arguments in CALL_ARGS, JSON). The provider's
// CA comes from NODE_EXTRA_CA_CERTS, as the printed steps say.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const sdk = (p) => import(pathToFileURL(`${process.env.MCP_SDK_DIR}/dist/esm/${p}`).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { UnauthorizedError } = await sdk('client/auth.js');

const config = JSON.parse(readFileSync(process.env.CLIENT_CONFIG, 'utf8'));
const server = Object.values(config.mcpServers)[0];
// Nothing listens here: signIn stops at the redirect and reads the code.
const redirectUrl = 'http://127.0.0.1:33418/callback';

// signIn follows the authorization URL to the login page, posts the
// credentials, and returns the code from the redirect back to the client.
async function signIn(authorizationUrl) {
  let url = new URL(authorizationUrl);
  const provider = url.origin;
  let body;
  for (let hop = 0; hop < 10; hop++) {
    const res = await fetch(url, body
      ? { method: 'POST', body, redirect: 'manual', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }
      : { redirect: 'manual' });
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get('location'), url);
      if (next.origin !== provider) {
        if (next.searchParams.get('error')) throw new Error(`authorization refused: ${next.searchParams.get('error')}: ${next.searchParams.get('error_description')}`);
        return next.searchParams.get('code');
      }
      url = next;
      body = undefined;
      continue;
    }
    const page = await res.text();
    if (res.status !== 200 || body) throw new Error(`${url.pathname}: ${res.status}: ${page.slice(0, 300)}`);
    if (!/<form method="post"/.test(page)) throw new Error(`no sign-in form at ${url.pathname}`);
    body = new URLSearchParams({
      authRequestID: url.searchParams.get('authRequestID'),
      username: process.env.SIGN_IN_USER,
      password: process.env.SIGN_IN_PASSWORD,
    }).toString();
  }
  throw new Error('too many redirects');
}

// requests the SDK made through its transport and its auth flow, in order.
const requests = [];
const recordingFetch = async (input, init) => {
  const url = input instanceof Request ? input.url : String(input);
  const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
  const res = await fetch(input, init);
  requests.push({ url, method, status: res.status, wwwAuthenticate: res.headers.get('www-authenticate') ?? '' });
  return res;
};

const state = {};
let code;
const authProvider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return {
      client_name: 'mcp-operator e2e desktop client',
      redirect_uris: [redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  },
  clientInformation: () => state.client,
  saveClientInformation: (info) => { state.client = info; },
  tokens: () => state.tokens,
  saveTokens: (tokens) => { state.tokens = tokens; },
  saveCodeVerifier: (v) => { state.verifier = v; },
  codeVerifier: () => state.verifier,
  redirectToAuthorization: async (url) => { state.authorizationUrl = url.href; code = await signIn(url); },
};

const out = {};
try {
  const connect = async () => {
    const transport = new StreamableHTTPClientTransport(new URL(server.url), { authProvider, fetch: recordingFetch });
    const client = new Client({ name: 'e2e-desktop', version: '1.0.0' });
    await client.connect(transport);
    return client;
  };
  let client;
  try {
    client = await connect();
    throw new Error('the bridge let an unauthenticated client in');
  } catch (e) {
    if (!(e instanceof UnauthorizedError) || !code) throw e;
  }
  out.registeredClient = state.client?.client_id;
  const auth = new URL(state.authorizationUrl);
  out.resource = auth.searchParams.get('resource');
  out.codeChallengeMethod = auth.searchParams.get('code_challenge_method');
  await new StreamableHTTPClientTransport(new URL(server.url), { authProvider, fetch: recordingFetch }).finishAuth(code);
  client = await connect();
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  if (process.env.CALL_TOOL) {
    const r = await client.callTool({ name: process.env.CALL_TOOL, arguments: JSON.parse(process.env.CALL_ARGS || '{}') });
    out.call = { isError: r.isError ?? false, content: r.content };
  }
  // The client's own access token, so the spec can check it never went
  // upstream (a test client only: a real one never prints it).
  out.accessToken = state.tokens.access_token;
  await client.close();
} catch (e) {
  out.fatal = String(e?.stack ?? e);
}
out.requests = requests;
console.log(JSON.stringify(out));
