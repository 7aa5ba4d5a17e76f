#!/usr/bin/env bash
# dev.sh (`make dev`): the whole system on this machine — the dev cluster
# (up.sh), the images `make images` built, the operator installed by its own
# Helm chart, and config/samples applied — then says how to use it.
# Idempotent: a second run upgrades the release and re-applies the samples.
#
# MCP_DEV_BRIDGE=true|false forces the bridge on or off; by default it is on
# when the manager binary implements `manager bridge`.
#
# The development identity provider (devidp.yaml) always runs; the bridge
# accepts its users' access tokens when the manager has OAuth support.
#
# MCP_DEV_TRACING=true runs Jaeger in namespace mcp-tracing (jaeger.yaml) and
# points the chart's tracing values, the bridge and the controller at it;
# false leaves it out. `make dev` sets it to true once bin/jaeger is built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root dev

NS=mcp-operator-system
RELEASE=mcp-operator
HELM=$ROOT/bin/helm
MANAGER=$ROOT/bin/manager

"$ROOT/hack/cluster/up.sh"

bridge=${MCP_DEV_BRIDGE:-auto}
bridge_note=""
if [ "$bridge" = auto ]; then
  probe=$("$MANAGER" bridge --help 2>&1 || true)
  if [[ "$probe" == *"not implemented yet"* ]]; then
    bridge=false
    bridge_note="'manager bridge' is not implemented yet in this build, so the chart is installed with bridge.enabled=false"
  else
    bridge=true
  fi
fi

# The development identity provider and the bridge at fixed Service IPs: the
# issuer URL and the bridge's public URL (the audience its tokens carry) are
# known before anything is installed, and the same on every run.
IDP_IP=10.96.0.80
IDP_URL=https://$IDP_IP
BRIDGE_IP=10.96.0.81
CONSOLE_IP=10.96.0.82
# The provider serves HTTPS (OAuth 2.1 wants it off loopback, and an
# MCPServer's token exchange URL must be https) with a certificate of the
# cluster's CA, which every pod already trusts as its ServiceAccount ca.crt.
if [ ! -f "$PKI/devidp.crt" ]; then
  (
    cd "$PKI" && umask 077
    openssl ecparam -name prime256v1 -genkey -noout -out devidp.key 2>/dev/null
    openssl req -new -key devidp.key -subj "/CN=mcp-devidp" -out devidp.csr 2>/dev/null
    printf 'subjectAltName=IP:%s,DNS:devidp.mcp-devidp.svc\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n' "$IDP_IP" > devidp.ext
    openssl x509 -req -in devidp.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile devidp.ext -out devidp.crt 2>/dev/null
    rm -f devidp.csr devidp.ext
  )
fi
step "starting the development identity provider at $IDP_URL (namespace mcp-devidp)"
kc create namespace mcp-devidp --dry-run=client -o yaml | kc apply -f - >/dev/null
kc -n mcp-devidp create secret tls devidp-tls --cert="$PKI/devidp.crt" --key="$PKI/devidp.key" \
  --dry-run=client -o yaml | kc apply -f - >/dev/null
devidp_image_id=$(sha256sum "$IMAGES/devidp.tar" | cut -c1-12)
sed "s|@IMAGE_ID@|$devidp_image_id|" "$ROOT/hack/cluster/devidp.yaml" | kc apply -f - >/dev/null
oauth_args=""
oauth_note=""
if [ "$bridge" = true ]; then
  if [[ "$("$MANAGER" bridge --help 2>&1 || true)" == *oidc-issuer-url* ]]; then
    # The bridge itself stays plain http in the dev cluster (its in-cluster
    # agents speak http), so its public URL needs --oauth-allow-http. It
    # trusts the cluster's CA, and so the provider, through SSL_CERT_DIR:
    # Go reads that directory in addition to the system bundle (SSL_CERT_FILE
    # would replace the bundle and cut the bridge off from public CAs).
    oauth_args="  publicURL: http://$BRIDGE_IP
  oidcIssuerURL: $IDP_URL
  extraArgs: [--oauth-allow-http]
  extraEnv:
    - {name: SSL_CERT_DIR, value: /var/run/secrets/kubernetes.io/serviceaccount}"
  else
    oauth_note="'manager bridge' has no OAuth support in this build, so people cannot sign in to it yet"
  fi
fi

tracing=${MCP_DEV_TRACING:-true}
tracing_values=""
if [ "$tracing" = true ]; then
  [ -f "$IMAGES/jaeger.tar" ] || die "bin/images/jaeger.tar is missing: 'make dev' builds it (or MCP_DEV_TRACING=false)"
  # Jaeger's pod starts beside the operator's; nothing waits for it before
  # the operator is up (spans sent earlier are retried by the exporters).
  step "starting Jaeger in namespace mcp-tracing (the bridge's and the controller's traces)"
  # The image-id annotation changes with the image, so a rebuilt bin/jaeger
  # rolls out (as the manager's does below).
  jaeger_image_id=$(sha256sum "$IMAGES/jaeger.tar" | cut -c1-12)
  sed "s|@IMAGE_ID@|$jaeger_image_id|" "$ROOT/hack/cluster/jaeger.yaml" | kc apply -f - >/dev/null
  jaeger_ip=$(kc -n mcp-tracing get svc jaeger -o jsonpath='{.spec.clusterIP}')
  # No cluster DNS: the Service's IP, not its name.
  tracing_values="tracing:
  endpoint: http://$jaeger_ip:4318"
fi

# The console, where people sign in at the identity provider and decide
# ToolApprovals: at a fixed Service IP too, as its URL is the provider's
# redirect for the mcp-console client. Plain http on that IP (only this
# machine reaches it), so its cookies are not Secure (--insecure-http).
console_values=""
if [ -n "$oauth_args" ] && [[ "$("$MANAGER" console --help 2>&1 || true)" == *public-url* ]]; then
  # The client's secret is the provider's published test value.
  kc get namespace "$NS" >/dev/null 2>&1 || kc create namespace "$NS" >/dev/null
  kc -n "$NS" create secret generic mcp-console-client --from-literal=client-secret=mcp-console-secret \
    --dry-run=client -o yaml | kc apply -f - >/dev/null
  trace_url=""
  [ "$tracing" = true ] && trace_url="http://$jaeger_ip:16686/api/v3/traces/{traceId}"
  console_values="console:
  enabled: true
  publicURL: http://$CONSOLE_IP
  insecureHTTP: true
  podAnnotations:
    mcp-operator.dev/image-id: \"@MANAGER_IMAGE_ID@\"
  oidc:
    clientSecretRef: {name: mcp-console-client}
    scopes: [profile, email, groups]
  # The provider's certificate is the cluster CA's, trusted as the bridge does
  # (SSL_CERT_DIR: in addition to the system bundle).
  extraEnv:
    - {name: SSL_CERT_DIR, value: /var/run/secrets/kubernetes.io/serviceaccount}
  traceURL: \"$trace_url\"
  service:
    clusterIP: $CONSOLE_IP"
fi

# Values of the dev install: the locally imported image (never pulled), and an
# annotation that changes with the image, so a rebuilt manager rolls out.
image_id=$(sha256sum "$IMAGES/manager.tar" | cut -c1-12)
cat > "$STATE/values-dev.yaml" <<EOF
image:
  repository: localhost/mcp-operator/manager
  tag: dev
  pullPolicy: Never
controller:
  podAnnotations:
    mcp-operator.dev/image-id: "$image_id"
bridge:
  enabled: $bridge
  namespaces: [default]
  podAnnotations:
    mcp-operator.dev/image-id: "$image_id"
  service:
    clusterIP: $BRIDGE_IP
$oauth_args
$tracing_values
${console_values//@MANAGER_IMAGE_ID@/$image_id}
EOF
step "installing the operator with its Helm chart (release $RELEASE in $NS, bridge.enabled=$bridge)"
"$HELM" upgrade --install "$RELEASE" "$ROOT/charts/mcp-operator" --kubeconfig "$KUBECONFIG_FILE" \
  --namespace "$NS" --create-namespace --values "$STATE/values-dev.yaml" >/dev/null
kc wait --for=condition=Established --timeout=60s crd/mcpservers.mcp-operator.dev crd/toolpolicies.mcp-operator.dev >/dev/null

step "waiting for the controller Deployment to be Available"
if ! kc -n "$NS" rollout status deploy/"$RELEASE"-controller --timeout=180s >/dev/null; then
  kc -n "$NS" get pods -o wide >&2
  kc -n "$NS" logs deploy/"$RELEASE"-controller --tail=30 >&2 || true
  die "the controller did not become Available"
fi
if [ -n "$console_values" ]; then
  step "waiting for the console Deployment to be Available"
  if ! kc -n "$NS" rollout status deploy/"$RELEASE"-console --timeout=180s >/dev/null; then
    kc -n "$NS" logs deploy/"$RELEASE"-console --tail=30 >&2 || true
    die "the console did not become Available"
  fi
fi
if [ "$bridge" = true ]; then
  step "waiting for the bridge Deployment to be Available"
  if ! kc -n "$NS" rollout status deploy/"$RELEASE"-bridge --timeout=180s >/dev/null; then
    kc -n "$NS" logs deploy/"$RELEASE"-bridge --tail=30 >&2 || true
    die "the bridge did not become Available"
  fi
fi

step "waiting for the development identity provider to be Available"
if ! kc -n mcp-devidp rollout status deploy/devidp --timeout=180s >/dev/null; then
  kc -n mcp-devidp logs deploy/devidp --tail=30 >&2 || true
  die "the development identity provider did not become Available"
fi

if [ "$tracing" = true ]; then
  step "waiting for Jaeger to be Available"
  if ! kc -n mcp-tracing rollout status deploy/jaeger --timeout=180s >/dev/null; then
    kc -n mcp-tracing logs deploy/jaeger --tail=30 >&2 || true
    die "Jaeger did not become Available"
  fi
fi

step "applying config/samples (namespace default, Pod Security Standard restricted enforced)"
# Server pods must pass the restricted Pod Security Standard: the API server
# refuses any pod in the samples' namespace that does not (the e2e suite runs
# there too).
kc label namespace default --overwrite pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/enforce-version=latest >/dev/null
# The sample ToolPolicy's subject, so an agent token can be made for it.
kc -n default get serviceaccount research-agent >/dev/null 2>&1 || kc -n default create serviceaccount research-agent >/dev/null
kc apply -k "$ROOT/config/samples" >/dev/null
if [ -n "$oauth_args" ]; then
  kc apply -f "$ROOT/hack/cluster/people-policy.yaml" >/dev/null
fi

# Wait for every sample server to be Ready (their images are built here).
# Until a reconciler writes status, say so instead of waiting forever.
servers=$(kc -n default get mcpservers -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
notes=()
[ -n "$bridge_note" ] && notes+=("bridge: $bridge_note (MCP_DEV_BRIDGE=true forces it).")
[ -n "$oauth_note" ] && notes+=("people: $oauth_note.")
if [ -n "$servers" ]; then
  step "waiting for the sample servers to be Ready: $(echo "$servers" | tr "\n" " ")"
  has_status() { kc -n default get mcpservers -o jsonpath='{.items[*].status.conditions}' | grep -q .; }
  if wait_for 15 "" has_status 2>/dev/null; then
    for s in $servers; do
      kc -n default wait --for=condition=Ready --timeout=180s mcpserver/"$s" >/dev/null ||
        die "MCPServer $s is not Ready: $(kc -n default get mcpserver "$s" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.reason}: {.message}{end}')"
    done
  else
    notes+=("MCPServer controller: no MCPServer got a status within 15s, so this build has no MCPServer reconciler yet; the samples are stored but not run.")
  fi
fi

# What to try, written to a file and printed from it: test/e2e runs that
# file, so every command printed here is known to work as printed.
try=$STATE/try-it.sh
{
  echo "export KUBECONFIG=$KUBECONFIG_FILE"
  echo "export PATH=$K8SBIN:\$PATH"
  echo "kubectl get mcpservers"
  echo "kubectl -n $NS logs deploy/$RELEASE-controller --tail=5"
  if [ "$bridge" = true ]; then
    ip=$(kc -n "$NS" get svc "$RELEASE"-bridge -o jsonpath='{.spec.clusterIP}')
    echo "TOKEN=\$(kubectl -n default create token research-agent --audience mcp-operator)"
    echo "curl -sS http://$ip/mcp -H \"Authorization: Bearer \$TOKEN\" -H 'Content-Type: application/json' \\"
    echo "  -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \\"
    echo "  -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}'"
  fi
  if [ "$tracing" = true ]; then
    echo "curl -sS http://$jaeger_ip:16686/api/v3/services"
  fi
} > "$try"

echo
step "mcp-operator dev environment is up"
echo
kc get mcpservers 2>&1 | sed 's/^/  /'
echo
echo "Operator: release $RELEASE in namespace $NS (helm at $HELM)."
if [ "$bridge" = true ]; then
  echo "Bridge: http://$ip/mcp from this machine (Service $RELEASE-bridge; in the cluster"
  echo "  http://$RELEASE-bridge.$NS.svc/mcp)."
else
  echo "Bridge: not installed."
fi
if [ "$tracing" = true ]; then
  echo "Traces: Jaeger at http://$jaeger_ip:16686 (namespace mcp-tracing; the bridge exports to"
  echo "  its OTLP port 4318). Query API: /api/v3/services, /api/v3/traces/<traceId> (an audit"
  echo "  event's traceId). Jaeger's web UI is not part of a build from Go modules."
else
  if [ -x "$ROOT/bin/jaeger" ]; then
    echo "Traces: off (MCP_DEV_TRACING=false). 'make dev' without it starts Jaeger."
  else
    echo "Traces: off (bin/jaeger is not built, so 'make dev' leaves Jaeger out)."
    echo "  'make dev MCP_DEV_TRACING=true' builds Jaeger (several minutes, once) and starts it."
  fi
fi
# A configuration left by an earlier run with OAuth on would describe a bridge
# that no longer asks people to sign in.
[ -n "$oauth_args" ] || rm -f "$STATE/desktop-client.json"
if [ -n "$oauth_args" ]; then
  # A desktop MCP client's configuration, written to a file that test/e2e
  # connects with, so the steps printed here are the ones tested.
  desktop=$STATE/desktop-client.json
  cat > "$desktop" <<JSON
{
  "mcpServers": {
    "mcp-operator": {
      "type": "http",
      "url": "http://$BRIDGE_IP/mcp"
    }
  }
}
JSON
  echo "Identity provider: $IDP_URL (development only; namespace mcp-devidp)."
  echo
  echo "Connect a desktop MCP client on this machine as a person: add this server to its"
  echo "configuration (also in $desktop):"
  echo
  sed 's/^/  /' "$desktop"
  echo
  echo "  The dev bridge is plain http on the node's service network, reachable from this"
  echo "  machine only: for local development only (tokens cross it in clear text). In"
  echo "  production the bridge's URL is https, TLS ending at the bridge (bridge.tls) or"
  echo "  at an ingress in front of it."
  echo "  The client finds the identity provider through the bridge's 401, registers itself"
  echo "  (loopback or private-use redirect URIs; or client id mcp-client, no secret,"
  echo "  redirect http://127.0.0.1:PORT/callback or /oauth/callback, for a client that asks"
  echo "  for one) and opens the sign-in page in your browser. Sign in as alice /"
  echo "  alice-password (ToolPolicy people-alice: every sample tool) or bob / bob-password"
  echo "  (people-bob: read-only tools)."
  echo "  The provider's certificate is signed by the dev cluster's CA, $PKI/ca.crt."
  echo "  A Node.js client (tested: the TypeScript SDK's, which Claude Code and the MCP"
  echo "  Inspector run on) trusts it when started with"
  echo "    NODE_EXTRA_CA_CERTS=$PKI/ca.crt"
  echo "  A client that uses the operating system's trust store (VS Code and Cursor, with"
  echo "  their default http.systemCertificates) needs the CA there: on Debian or Ubuntu"
  echo "    sudo cp $PKI/ca.crt /usr/local/share/ca-certificates/mcp-operator-dev.crt && sudo update-ca-certificates"
  echo "  on macOS"
  echo "    sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain $PKI/ca.crt"
  echo "  (remove it again when the dev cluster is gone). Let your browser accept that CA"
  echo "  (or the sign-in page's certificate) once."
fi
if [ -n "$console_values" ]; then
  echo
  echo "Console: http://$CONSOLE_IP in a browser on this machine (it signs you in at the"
  echo "  identity provider above, whose certificate your browser must accept). Sign in as"
  echo "  alice / alice-password: she may decide the ToolApprovals of namespace default (Role"
  echo "  mcp-approver) and see its servers, policies and activity; bob / bob-password sees"
  echo "  nothing there (no RBAC)."
fi
echo
echo "Try it (kubectl, the controller's log, and tools/list through the bridge as the"
echo "sample policy's agent, in the stateless protocol revision; also in $try):"
echo
sed 's/^/  /' "$try"
if [ ${#notes[@]} -gt 0 ]; then
  echo
  echo "Not there yet:"
  printf '  - %s\n' "${notes[@]}"
fi
echo
echo "Tear it all down: make dev-down"
