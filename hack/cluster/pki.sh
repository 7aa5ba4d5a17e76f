#!/usr/bin/env bash
# pki.sh: the dev cluster's certificates and keys, under $STATE/pki, and the
# admin kubeconfig. Kept when present (and made for this node IP), so a second
# `make dev` reuses them.
#   ca.crt/key          signs every certificate below and the cluster's CSRs
#   apiserver.crt/key   the API server's serving certificate
#   admin.crt/key       client certificate in system:masters: the kubeconfig,
#                       and the components' own client identity (a dev cluster)
#   sa.key/pub          signs ServiceAccount tokens (bound, with audiences)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ip=$(node_ip)
[ -n "$ip" ] || die "cannot find this machine's IPv4 address (ip -4 addr)"
if [ -f "$PKI/done" ] && [ "$(cat "$PKI/done")" = "$ip" ] && [ -f "$KUBECONFIG_FILE" ]; then
  exit 0
fi
step "generating certificates and keys (ECDSA P-256) in ${PKI#"$ROOT"/}"
rm -rf "$PKI"
mkdir -p "$PKI"
cd "$PKI"
umask 077
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; }
# sign NAME SUBJECT EXTENSIONS: NAME.key and NAME.crt signed by the CA.
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

key ca.key
openssl req -x509 -new -key ca.key -subj "/CN=mcp-dev-ca" -days 365 -out ca.crt 2>/dev/null
sign apiserver "/CN=kube-apiserver" "subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1,IP:$ip
extendedKeyUsage=serverAuth
keyUsage=critical,digitalSignature,keyEncipherment"
sign admin "/O=system:masters/CN=mcp-dev-admin" "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature,keyEncipherment"
key sa.key
openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
chmod 644 ca.crt

k() { "$K8SBIN/kubectl" config --kubeconfig="$KUBECONFIG_FILE" "$@" >/dev/null; }
rm -f "$KUBECONFIG_FILE"
k set-cluster mcp-dev --server="https://$ip:$APISERVER_PORT" --certificate-authority="$PKI/ca.crt" --embed-certs
k set-credentials mcp-dev-admin --client-certificate="$PKI/admin.crt" --client-key="$PKI/admin.key" --embed-certs
k set-context mcp-dev --cluster=mcp-dev --user=mcp-dev-admin
k use-context mcp-dev
echo "$ip" > "$PKI/done"
