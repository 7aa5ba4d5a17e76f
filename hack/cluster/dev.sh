#!/usr/bin/env bash
# dev.sh (`make dev`): the whole system on this machine — the dev cluster
# (up.sh), the images `make images` built, the operator installed by its own
# Helm chart, and config/samples applied — then says how to use it.
# Idempotent: a second run upgrades the release and re-applies the samples.
#
# MCP_DEV_BRIDGE=true|false forces the bridge on or off; by default it is on
# when the manager binary implements `manager bridge`.
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
if [ "$bridge" = true ]; then
  step "waiting for the bridge Deployment to be Available"
  if ! kc -n "$NS" rollout status deploy/"$RELEASE"-bridge --timeout=180s >/dev/null; then
    kc -n "$NS" logs deploy/"$RELEASE"-bridge --tail=30 >&2 || true
    die "the bridge did not become Available"
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

# Wait for the samples whose images are built here (localhost/...) to be Ready.
# Until a reconciler writes status, say so instead of waiting forever.
local_servers=$(kc -n default get mcpservers -o jsonpath='{range .items[?(@.spec.workload.image)]}{.metadata.name}={.spec.workload.image}{"\n"}{end}' |
  awk -F= '$2 ~ /^localhost\// {print $1}')
notes=()
[ -n "$bridge_note" ] && notes+=("bridge: $bridge_note (MCP_DEV_BRIDGE=true forces it).")
if [ -n "$local_servers" ]; then
  step "waiting for the sample servers built here to be Ready: $(echo "$local_servers" | tr "\n" " ")"
  has_status() { kc -n default get mcpservers -o jsonpath='{.items[*].status.conditions}' | grep -q .; }
  if wait_for 15 "" has_status 2>/dev/null; then
    for s in $local_servers; do
      kc -n default wait --for=condition=Ready --timeout=180s mcpserver/"$s" >/dev/null ||
        die "MCPServer $s is not Ready: $(kc -n default get mcpserver "$s" -o jsonpath='{.status.conditions}')"
    done
  else
    notes+=("MCPServer controller: no MCPServer got a status within 15s, so this build has no MCPServer reconciler yet; the samples are stored but not run.")
  fi
fi
for s in $(kc -n default get mcpservers -o jsonpath='{range .items[*]}{.metadata.name}={.spec.workload.image}{"\n"}{end}' | awk -F= '$2 != "" && $2 !~ /^localhost\// {print $1 "=" $2}'); do
  notes+=("sample ${s%%=*}: its image ${s#*=} is not built here and there is no registry to pull it from, so it will not start.")
done
for s in $(kc -n default get mcpservers -o jsonpath='{range .items[?(@.spec.remote)]}{.metadata.name}={.spec.remote.url}{"\n"}{end}'); do
  notes+=("sample ${s%%=*}: a remote server at ${s#*=} (a placeholder: edit the sample to point at a real one).")
done

echo
step "mcp-operator dev environment is up"
cat <<EOF

  export KUBECONFIG=$KUBECONFIG_FILE
  export PATH=$K8SBIN:\$PATH          # kubectl, built for this cluster
  kubectl get mcpservers

EOF
kc get mcpservers 2>&1 | sed 's/^/  /'
echo
echo "Operator: release $RELEASE in namespace $NS (helm at $HELM); controller logs:"
echo "  kubectl -n $NS logs deploy/$RELEASE-controller"
if [ "$bridge" = true ]; then
  ip=$(kc -n "$NS" get svc "$RELEASE"-bridge -o jsonpath='{.spec.clusterIP}')
  cat <<EOF
Bridge: http://$ip/mcp from this machine (Service $RELEASE-bridge; in the cluster
  http://$RELEASE-bridge.$NS.svc/mcp). Call it as the sample policy's agent:
  TOKEN=\$(kubectl -n default create token research-agent --audience mcp-operator)
  curl -sS http://$ip/mcp -H "Authorization: Bearer \$TOKEN" -H 'Content-Type: application/json' \\
    -H 'Accept: application/json, text/event-stream' \\
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
EOF
else
  echo "Bridge: not installed."
fi
if [ ${#notes[@]} -gt 0 ]; then
  echo
  echo "Not there yet:"
  printf '  - %s\n' "${notes[@]}"
fi
echo
echo "Tear it all down: make dev-down"
