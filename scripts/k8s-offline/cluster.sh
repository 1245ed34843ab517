#!/usr/bin/env bash
# A real single-node Kubernetes (1.20.2) built and run offline, for the opt-in real-cluster test
# (tests/e2e/test_k8s_cluster.py, OPENAB_TEST_K8S=1). Facts and quirks: shared/notes/kubernetes-offline.md.
#
#   scripts/k8s-offline/cluster.sh build   # Debian's kubernetes source package -> binaries (cached, ~6 min)
#   scripts/k8s-offline/cluster.sh image   # base image (mmdebstrap), project image (Containerfile),
#                                          # PostgreSQL stand-in, pause (FORCE=1 rebuilds the cached ones;
#                                          # AGENT_NPM=... is passed to the Containerfile)
#   scripts/k8s-offline/cluster.sh up      # etcd, apiserver, controller-manager, scheduler, containerd,
#                                          # kubelet, kube-proxy: all inside the network namespace openab-k8s;
#                                          # hostPath PersistentVolumes; idempotent on a running cluster
#   scripts/k8s-offline/cluster.sh load [IMAGE...]  # images -> containerd's k8s.io namespace
#   scripts/k8s-offline/cluster.sh env     # how to reach the cluster (KUBECONFIG, the namespace)
#   scripts/k8s-offline/cluster.sh kubectl ARGS...  # the 1.20 kubectl, inside the namespace
#   scripts/k8s-offline/cluster.sh status | pvs [N] | paths
#   scripts/k8s-offline/cluster.sh down    # stop everything, clean sockets and mounts, restore sysctls,
#                                          # delete the namespace (binaries and images stay cached)
#
# Network rule: every address used is loopback or inside the network namespace this script creates
# (NETNS: a veth pair with both ends inside it carries NODE_IP/24; the pod and service ranges exist only
# there). Nothing is configured on the machine's own interfaces; the daemons enter the namespace with
# `nsenter --net` (the machine's mount namespace stays shared, so the kubelet's volume mounts are the
# ones containerd sees). apt and pip run from the machine's namespace as usual.
#
# Nothing fetched or built goes into the repository: sources, binaries, images and run state live under
# CACHE (~/.cache/openab-voice/k8s). The machine's CA bundle goes into the base image at build time so
# pip inside `buildah bud` reaches PyPI here; it stays in that cached image. Needs root.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${OPENAB_K8S_CACHE:-$HOME/.cache/openab-voice/k8s}"
DEB_VERSION="1.20.5+really1.20.2-1.1+deb12u1"
K8S_VERSION="1.20.2"
BIN="$CACHE/bin/$DEB_VERSION"
SRC="$CACHE/src"
IMG="$CACHE/images"
RUN="$CACHE/run"
NETNS="${OPENAB_K8S_NETNS:-openab-k8s}"
NODE_IF="k8s0"                # veth, both ends inside NETNS
NODE_IP="10.203.0.1"          # exists only inside NETNS
POD_CIDR="10.204.0.0/16"      # exists only inside NETNS (bridge cni0)
SERVICE_CIDR="10.205.0.0/24"  # virtual, only in NETNS's iptables (kube-proxy)
API_SERVICE_IP="10.205.0.1"
NODE_NAME="openab-node"
PROJECT_IMAGE="docker.io/library/openab-voice:local"
POSTGRES_IMAGE="docker.io/library/openab-postgres:15-offline"
PAUSE_IMAGE="k8s.gcr.io/pause:3.2"
BASE_IMAGE="localhost/openab-bookworm-python:latest"
GO_ROOT="/usr/lib/go-1.19"
WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet cmd/kube-proxy cmd/kubectl"
BINARIES="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
PV_COUNT="${OPENAB_K8S_PVS:-16}"
SYSCTLS="kernel.panic kernel.panic_on_oops vm.overcommit_memory"

log() { printf '[k8s-offline %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
in_ns() { ip netns exec "$NETNS" "$@"; }
kctl() { in_ns "$BIN/kubectl" --kubeconfig "$RUN/kubeconfig" "$@"; }

need_root() { [ "$(id -u)" = 0 ] || die "run as root"; }

apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --------------------------------------------------------------------------------------------- build
cmd_build() {
  need_root
  apt_install etcd-server containerd runc containernetworking-plugins buildah mmdebstrap iptables \
    golang-1.19-go golang-github-modern-go-reflect2-dev dpkg-dev gcc libc6-dev make rsync conntrack \
    openssl uidmap fuse-overlayfs
  local ok=1
  for b in $BINARIES; do [ -x "$BIN/$b" ] || ok=0; done
  if [ "$ok" = 1 ] && [ -x "$IMG/pause/pause" ]; then
    log "binaries cached in $BIN"
    return 0
  fi
  fetch_source
  local tree
  tree="$(source_tree)"
  if [ "$ok" = 0 ]; then
    log "reflect2 1.0.1 (breaks on Go >= 1.18) -> Debian's 1.0.2"
    rsync -a --delete --exclude=go.mod /usr/share/gocode/src/github.com/modern-go/reflect2/ \
      "$tree/vendor/github.com/modern-go/reflect2/"
    log "make WHAT=\"$WHAT\" with $("$GO_ROOT/bin/go" version) (~8 min on 2 cores)"
    local t0=$SECONDS
    (cd "$tree" && PATH="$GO_ROOT/bin:$PATH" GOFLAGS=-mod=vendor GOCACHE="$CACHE/gocache" \
      KUBE_GIT_VERSION="v$K8S_VERSION" KUBE_GIT_TREE_STATE=clean \
      make WHAT="$WHAT" >"$CACHE/build.log" 2>&1) || { tail -40 "$CACHE/build.log" >&2; die "make failed"; }
    log "built in $((SECONDS - t0)) s"
    mkdir -p "$BIN"
    for b in $BINARIES; do install -m 0755 "$tree/_output/local/bin/linux/amd64/$b" "$BIN/$b"; done
    # The object tree is 3+ GiB; the binaries are what is kept.
    rm -rf "$tree/_output" "$CACHE/gocache"
  fi
  mkdir -p "$IMG/pause"
  gcc -Os -static -o "$IMG/pause/pause" "$tree/build/pause/linux/pause.c" -DVERSION=3.2-offline
  strip "$IMG/pause/pause"
  log "binaries in $BIN: $(cd "$BIN" && ls | tr '\n' ' ')"
}

fetch_source() {
  if [ -n "$(ls -d "$SRC"/kubernetes-*/ 2>/dev/null)" ]; then return 0; fi
  # A private apt configuration with only the deb-src lines: the machine's apt config is untouched.
  local a="$CACHE/apt"
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$SRC"
  cat >"$a/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
  local opts=(-o "Dir::Etc::SourceList=$a/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
  log "apt-get source kubernetes=$DEB_VERSION (private deb-src list)"
  apt-get "${opts[@]}" update -qq
  (cd "$SRC" && apt-get "${opts[@]}" source -qq "kubernetes=$DEB_VERSION" >/dev/null)
  rm -f "$SRC"/*.tar.* "$SRC"/*.dsc
}

source_tree() { ls -d "$SRC"/kubernetes-*/ | head -1 | sed 's:/$::'; }

# --------------------------------------------------------------------------------------------- image
DEBIAN_MIRRORS=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)

# A root filesystem tarball from Debian packages (cached by name).
rootfs() {
  local name="$1" include="$2"; shift 2
  local out="$IMG/$name.tar"
  if [ -s "$out" ]; then echo "$out"; return 0; fi
  mkdir -p "$IMG"
  log "mmdebstrap $name ($include)"
  mmdebstrap --quiet --format=tar --variant=minbase --include="$include" "$@" bookworm "$out.tmp" "${DEBIAN_MIRRORS[@]}" >&2
  mv "$out.tmp" "$out"
  echo "$out"
}

image_exists() { buildah images --quiet "$1" >/dev/null 2>&1; }

# The stand-in for python:3.11-slim-bookworm (Docker Hub is out of reach): Debian's python3 (3.11).
# The machine's CA bundle is copied in at build time so pip inside `buildah bud` reaches PyPI through
# this machine's egress; it lives only in the image under the cache, never in the repository.
build_base_image() {
  if image_exists "$BASE_IMAGE" && [ "${FORCE:-0}" != 1 ]; then return 0; fi
  local tar
  tar="$(rootfs python-base "python3,python3-venv,python-is-python3,ca-certificates" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin')"
  local c
  c="$(buildah from scratch)"
  buildah add --quiet "$c" "$tar" / >/dev/null
  local mnt
  mnt="$(buildah mount "$c")"
  local n=0
  for crt in /usr/local/share/ca-certificates/*.crt; do
    [ -e "$crt" ] || continue
    install -m 0644 "$crt" "$mnt/usr/local/share/ca-certificates/$(basename "$crt")"; n=$((n + 1))
  done
  if [ "$n" -gt 0 ]; then
    chroot "$mnt" update-ca-certificates >/dev/null 2>&1
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$mnt/etc/pip.conf"
  fi
  buildah umount "$c" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$c"
  buildah commit --quiet --rm "$c" "$BASE_IMAGE" >/dev/null
  log "base image $BASE_IMAGE (with $n machine CA file(s))"
}

# PostgreSQL for the local overlay: `postgres:16` cannot be pulled offline. Debian bookworm's
# PostgreSQL 15, with an entrypoint that honours the official image's POSTGRES_DB, POSTGRES_USER,
# POSTGRES_PASSWORD(_FILE) and PGDATA, runs as uid 999 and writes only PGDATA, /var/run/postgresql
# and /tmp (the pod's read-only root).
build_postgres_image() {
  if image_exists "$POSTGRES_IMAGE" && [ "${FORCE:-0}" != 1 ]; then return 0; fi
  local tar
  tar="$(rootfs postgres "postgresql-15,ca-certificates" \
    --essential-hook='echo "postgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh" >>"$1/etc/passwd"; echo "postgres:x:999:" >>"$1/etc/group"; echo "postgres:*:19000:0:99999:7:::" >>"$1/etc/shadow"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/etc/postgresql/15/main "$1"/var/lib/postgresql/15/main')"
  local c
  c="$(buildah from scratch)"
  buildah add --quiet "$c" "$tar" / >/dev/null
  buildah add --quiet --chmod 0755 "$c" "$HERE/postgres-entrypoint.sh" /usr/local/bin/postgres-entrypoint.sh >/dev/null
  buildah config --user 999:999 --workingdir /var/lib/postgresql \
    --env PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/bin:/bin --env LANG=C.UTF-8 \
    --env PGDATA=/var/lib/postgresql/data --port 5432/tcp \
    --entrypoint '["/usr/local/bin/postgres-entrypoint.sh"]' --cmd postgres "$c"
  buildah commit --quiet --rm "$c" "$POSTGRES_IMAGE" >/dev/null
  log "postgres image $POSTGRES_IMAGE"
}

build_pause_image() {
  if image_exists "$PAUSE_IMAGE" && [ "${FORCE:-0}" != 1 ]; then return 0; fi
  [ -x "$IMG/pause/pause" ] || die "no pause binary: run build first"
  local c
  c="$(buildah from scratch)"
  buildah add --quiet --chmod 0755 "$c" "$IMG/pause/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$c"
  buildah commit --quiet --rm "$c" "$PAUSE_IMAGE" >/dev/null
  log "pause image $PAUSE_IMAGE (build/pause/linux/pause.c, gcc -static)"
}

build_project_image() {
  local agent_npm="${AGENT_NPM:-}"
  log "buildah bud $PROJECT_IMAGE from $REPO/Containerfile (PYTHON_IMAGE=$BASE_IMAGE)"
  local t0=$SECONDS
  (cd "$REPO" && buildah bud --quiet --isolation=chroot --network=host --layers \
    --build-arg PYTHON_IMAGE="$BASE_IMAGE" --build-arg AGENT_NPM="$agent_npm" \
    -t "$PROJECT_IMAGE" -f Containerfile . >"$CACHE/image-build.log" 2>&1) \
    || { tail -40 "$CACHE/image-build.log" >&2; die "buildah bud failed"; }
  log "project image built in $((SECONDS - t0)) s"
}

cmd_image() {
  need_root
  mkdir -p "$IMG"
  build_base_image
  build_pause_image
  build_postgres_image
  if [ "${1:-}" != "--infra-only" ]; then build_project_image; fi
  buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E 'openab|pause' >&2 || true
}

# ---------------------------------------------------------------------------------------------- load
cmd_load() {
  need_root
  [ -S "$RUN/containerd/containerd.sock" ] || die "containerd is not running: cluster.sh up"
  local images=("$PAUSE_IMAGE" "$POSTGRES_IMAGE" "$PROJECT_IMAGE")
  [ $# -gt 0 ] && images=("$@")
  for ref in "${images[@]}"; do
    local f="$IMG/load.tar"
    rm -f "$f"
    buildah push --quiet "$ref" "docker-archive:$f:$ref" >/dev/null
    ctr --address "$RUN/containerd/containerd.sock" -n k8s.io images import "$f" >/dev/null
    rm -f "$f"
    log "loaded $ref"
  done
}

# ------------------------------------------------------------------------------------------------ up
PKI="$RUN/pki"

# One certificate signed by the cluster CA. $1 name, $2 subject, $3 extra extensions (SANs) or "".
issue_cert() {
  local name="$1" subj="$2" sans="${3:-}"
  [ -s "$PKI/$name.crt" ] && return 0
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  if [ ! -s "$PKI/ca.crt" ]; then
    openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=openab-offline-ca" -days 3650 -sha256 \
      -out "$PKI/ca.crt" 2>/dev/null
  fi
  issue_cert apiserver "/CN=kube-apiserver" \
    "IP:$NODE_IP,IP:127.0.0.1,IP:$API_SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:$NODE_NAME"
  issue_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  issue_cert admin "/O=system:masters/CN=openab-admin"
  issue_cert controller-manager "/CN=system:kube-controller-manager"
  issue_cert scheduler "/CN=system:kube-scheduler"
  issue_cert proxy "/O=system:node-proxier/CN=system:kube-proxy"
  issue_cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME"
  issue_cert kubelet-serving "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
  # The service-account token signer (tokens the dispatcher's pod uses for in-cluster config).
  if [ ! -s "$PKI/sa.key" ]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  for who in admin controller-manager scheduler proxy kubelet-client; do
    write_kubeconfig "$RUN/$who.kubeconfig" "$who"
  done
  cp "$RUN/admin.kubeconfig" "$RUN/kubeconfig"
}

write_kubeconfig() {
  local file="$1" who="$2"
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: openab-offline
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority: $PKI/ca.crt
users:
- name: $who
  user:
    client-certificate: $PKI/$who.crt
    client-key: $PKI/$who.key
contexts:
- name: openab-offline
  context: {cluster: openab-offline, user: $who}
current-context: openab-offline
EOF
  chmod 600 "$file"
}

make_netns() {
  if ! ip netns list | grep -qw "$NETNS"; then
    ip netns add "$NETNS"
  fi
  ip -n "$NETNS" link set lo up
  if ! ip -n "$NETNS" link show "$NODE_IF" >/dev/null 2>&1; then
    # A veth pair with both ends inside the namespace (this kernel has no dummy driver): the node's
    # address exists only here, and nothing routed to it can leave the namespace.
    ip -n "$NETNS" link add "$NODE_IF" type veth peer name "$NODE_IF-peer"
    ip -n "$NETNS" addr add "$NODE_IP/24" dev "$NODE_IF"
    ip -n "$NETNS" link set "$NODE_IF-peer" up
    ip -n "$NETNS" link set "$NODE_IF" up
  fi
  # The service range, so that processes of the namespace itself (kubectl, the test's store client)
  # can open a cluster IP: the route lookup happens before kube-proxy's OUTPUT DNAT rewrites it.
  ip -n "$NETNS" route replace "$SERVICE_CIDR" dev "$NODE_IF" src "$NODE_IP"
  # Pod -> ClusterIP -> pod on the same bridge needs the bridge to pass through iptables (per namespace).
  nsenter --net="/var/run/netns/$NETNS" sh -c \
    'sysctl -qw net.ipv4.ip_forward=1 && { [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)" = 1 ] || sysctl -qw net.bridge.bridge-nf-call-iptables=1; }' \
    || log "warning: could not set bridge-nf-call-iptables/ip_forward in $NETNS"
}

# Replace FILE with stdin only when it differs: kube-proxy exits when its configuration file changes
# under it ("content of the proxy server's configuration file was updated"), so `up` on a running
# cluster must leave unchanged files alone.
put() {
  local tmp="$1.new"
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

write_configs() {
  mkdir -p "$RUN/cni/net.d" "$RUN/containerd" "$RUN/logs" "$RUN/pids" "$RUN/kubelet"
  # Pods resolve nothing: no cluster DNS, and never the machine's resolver.
  echo "nameserver 127.0.0.1" | put "$RUN/resolv.conf"
  put "$RUN/cni/net.d/10-openab.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "openab-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDR%.0.0/16}.0.0/24"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$RUN/cni/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  put "$RUN/containerd/config.toml" <<EOF
version = 2
root = "$CACHE/containerd/root"
state = "$RUN/containerd/state"
[grpc]
  address = "$RUN/containerd/containerd.sock"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The VM withholds CAP_SYS_RESOURCE: a sandbox's oom_score_adj of -998 would fail every pod.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""
EOF
  put "$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failSwapOn: false
# The kernel defaults stay (it would otherwise refuse to start); it still changes kernel.panic,
# kernel.panic_on_oops and vm.overcommit_memory: up saves them, down restores them.
protectKernelDefaults: false
# Out of the machine's iptables (kube-proxy owns the namespace's own).
makeIPTablesUtilChains: false
resolvConf: $RUN/resolv.conf
clusterDomain: cluster.local
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: "500Mi"
  nodefs.available: "2%"
  imagefs.available: "2%"
  nodefs.inodesFree: "2%"
EOF
  put "$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $RUN/proxy.kubeconfig
mode: iptables
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
# Leave the machine-wide conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
  # The recycler for the hostPath volumes (the default one pulls busybox): the project image's shell,
  # as root, empties the directory so the PersistentVolume is Available again.
  put "$RUN/recycler.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: pv-recycler
  namespace: default
spec:
  restartPolicy: Never
  activeDeadlineSeconds: 120
  containers:
  - name: recycler
    image: $PROJECT_IMAGE
    imagePullPolicy: IfNotPresent
    securityContext: {runAsUser: 0}
    command: ["/bin/sh", "-c", "test -e /scrub && rm -rf /scrub/..?* /scrub/.[!.]* /scrub/* && chmod 0777 /scrub && test -z \"\$(ls -A /scrub)\""]
    volumeMounts:
    - {name: vol, mountPath: /scrub}
  volumes:
  - name: vol
    hostPath: {path: /tmp/placeholder}
EOF
}

save_sysctls() {
  [ -s "$CACHE/sysctl.saved" ] && return 0
  for s in $SYSCTLS; do echo "$s=$(sysctl -n "$s")"; done >"$CACHE/sysctl.saved"
}

# Start a daemon inside the network namespace only (the mount namespace stays the machine's: kubelet's
# volume mounts must be visible to containerd).
start_daemon() {
  local name="$1"; shift
  if [ -s "$RUN/pids/$name.pid" ] && kill -0 "$(cat "$RUN/pids/$name.pid")" 2>/dev/null; then
    return 0
  fi
  nsenter --net="/var/run/netns/$NETNS" setsid "$@" >>"$RUN/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/pids/$name.pid"
  log "started $name (pid $!)"
}

wait_for() {
  local what="$1" timeout="$2"; shift 2
  local t0=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if [ $((SECONDS - t0)) -ge "$timeout" ]; then die "timed out after ${timeout}s waiting for $what"; fi
    sleep 1
  done
  log "$what after $((SECONDS - t0)) s"
}

api_ready() { kctl get --raw /readyz; }
node_ready() {
  [ "$(kctl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

cmd_up() {
  need_root
  for b in $BINARIES; do [ -x "$BIN/$b" ] || die "missing $BIN/$b: run cluster.sh build"; done
  local t0=$SECONDS
  mkdir -p "$RUN" "$CACHE/containerd/root"
  make_pki
  [ -s "$RUN/netns.before" ] || { echo "-"; ls /run/netns 2>/dev/null || true; } >"$RUN/netns.before"
  make_netns
  write_configs
  save_sysctls
  start_daemon etcd etcd --name openab --data-dir "$RUN/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster openab=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
  start_daemon kube-apiserver "$BIN/kube-apiserver" \
    --advertise-address="$NODE_IP" --bind-address=0.0.0.0 --secure-port=6443 --insecure-port=0 \
    --etcd-servers=http://127.0.0.1:2379 \
    --service-cluster-ip-range="$SERVICE_CIDR" --service-node-port-range=30000-32767 \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --api-audiences=https://kubernetes.default.svc.cluster.local \
    --allow-privileged=false --profiling=false --event-ttl=1h
  start_daemon containerd containerd --config "$RUN/containerd/config.toml"
  wait_for "API server ready" 120 api_ready
  start_daemon kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$RUN/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$RUN/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$RUN/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --port=0 --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --pv-recycler-pod-template-filepath-hostpath="$RUN/recycler.yaml" \
    --pv-recycler-minimum-timeout-hostpath=60 \
    --profiling=false
  start_daemon kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$RUN/scheduler.kubeconfig" \
    --authentication-kubeconfig="$RUN/scheduler.kubeconfig" \
    --authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --port=0 --leader-elect=false --profiling=false
  wait_for "containerd socket" 60 test -S "$RUN/containerd/containerd.sock"
  if ! ctr --address "$RUN/containerd/containerd.sock" -n k8s.io images ls -q | grep -qx "$PAUSE_IMAGE"; then
    cmd_load "$PAUSE_IMAGE"
  fi
  start_daemon kubelet "$BIN/kubelet" --config="$RUN/kubelet.yaml" \
    --kubeconfig="$RUN/kubelet-client.kubeconfig" --node-ip="$NODE_IP" --hostname-override="$NODE_NAME" \
    --root-dir="$RUN/kubelet" --cert-dir="$RUN/kubelet/pki" \
    --container-runtime=remote --container-runtime-endpoint="unix://$RUN/containerd/containerd.sock" \
    --image-service-endpoint="unix://$RUN/containerd/containerd.sock" \
    --pod-infra-container-image="$PAUSE_IMAGE" --v=1
  start_daemon kube-proxy "$BIN/kube-proxy" --config="$RUN/kube-proxy.yaml"
  wait_for "node $NODE_NAME Ready" 180 node_ready
  cmd_pvs "$PV_COUNT"
  log "cluster up in $((SECONDS - t0)) s; $(cmd_env | tr '\n' ' ')"
}

# hostPath PersistentVolumes (there is no provisioner): class-less, Recycle (the recycler pod empties
# a released one so the next claim can bind it).
cmd_pvs() {
  local count="${1:-$PV_COUNT}" size="${OPENAB_K8S_PV_SIZE:-2Gi}"
  local i
  for i in $(seq 1 "$count"); do
    local name dir
    name="$(printf 'openab-pv-%02d' "$i")"
    dir="$CACHE/volumes/$name"
    mkdir -p "$dir"
    chmod 0777 "$dir"  # hostPath ignores fsGroup: the pods' users (999, 10001) must write here
    cat <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $name
  labels: {openab.test/volume: hostpath}
spec:
  capacity: {storage: $size}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Recycle
  volumeMode: Filesystem
  hostPath: {path: $dir, type: Directory}
---
EOF
  done | kctl apply -f - >/dev/null
  log "$count hostPath PersistentVolumes of $size ($(kctl get pv --no-headers | awk '{print $5}' | sort | uniq -c | tr '\n' ' '))"
}

# ---------------------------------------------------------------------------------------------- down
stop_pid() {
  local name="$1" f="$RUN/pids/$1.pid"
  [ -s "$f" ] || return 0
  local pid
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped $name (pid $pid)"
  fi
  rm -f "$f"
}

cmd_down() {
  need_root
  # Pods first (the kubelet is the one that unmounts their volumes), while the API server still runs.
  if [ -s "$RUN/pids/kubelet.pid" ] && kill -0 "$(cat "$RUN/pids/kubelet.pid")" 2>/dev/null; then
    kctl delete namespace openab-voice --wait=false >/dev/null 2>&1 || true
    kctl delete pods --all --all-namespaces --grace-period=5 --timeout=30s >/dev/null 2>&1 || true
  fi
  stop_pid kube-proxy
  stop_pid kubelet
  # The containers: every shim containerd started (their processes die with their cgroups' tasks).
  if [ -S "$RUN/containerd/containerd.sock" ]; then
    local c="ctr --address $RUN/containerd/containerd.sock -n k8s.io"
    for t in $($c tasks ls -q 2>/dev/null); do $c tasks kill -s KILL "$t" >/dev/null 2>&1 || true; done
    sleep 1
    for t in $($c tasks ls -q 2>/dev/null); do $c tasks delete -f "$t" >/dev/null 2>&1 || true; done
    for t in $($c containers ls -q 2>/dev/null); do $c containers delete "$t" >/dev/null 2>&1 || true; done
  fi
  stop_pid kube-scheduler
  stop_pid kube-controller-manager
  stop_pid containerd
  stop_pid kube-apiserver
  stop_pid etcd
  # Leftover shims (each has its own process; they were started by containerd, the namespace's).
  # (found by the exact socket path of this run's containerd: no other shim matches it).
  local p
  for p in $(pgrep -f -- "-address $RUN/containerd/containerd.sock" || true); do
    kill -9 "$p" 2>/dev/null || true
  done
  # Mounts under the run directory and the cache (the pods' volumes, sandbox netns, container rootfs).
  awk '{print $2}' /proc/self/mounts | grep -E "^($RUN|$CACHE/containerd|/run/containerd|/run/netns/cni-)" \
    | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  # The sockets they leave behind: the kubelet's device-plugin socket (whatever its root dir) and
  # containerd's shim sockets.
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/kubelet/device-plugins/DEPRECATION
  rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
  rmdir /run/containerd/runc/k8s.io /run/containerd/runc 2>/dev/null || true
  rm -rf /run/containerd/s /run/containerd/io.containerd.runtime.v2.task/k8s.io
  rm -f "$RUN/containerd/containerd.sock" "$RUN/containerd/containerd.sock.ttrpc"
  # The pods' network namespaces (containerd's /run/netns/cni-*), only those this cluster made.
  if [ -s "$RUN/netns.before" ]; then
    local f
    for f in /run/netns/cni-*; do
      [ -e "$f" ] || continue
      grep -qx "${f##*/}" "$RUN/netns.before" || ip netns delete "${f##*/}" 2>/dev/null || true
    done
  fi
  # The machine's sysctls as they were before the kubelet.
  if [ -s "$CACHE/sysctl.saved" ]; then
    while IFS='=' read -r k v; do sysctl -qw "$k=$v" || true; done <"$CACHE/sysctl.saved"
    log "restored $(tr '\n' ' ' <"$CACHE/sysctl.saved")"
    rm -f "$CACHE/sysctl.saved"
  fi
  if ip netns list | grep -qw "$NETNS"; then
    ip netns delete "$NETNS"
    log "deleted network namespace $NETNS"
  fi
  # Run state goes (etcd, pods, certificates); binaries, images and the containerd image store stay.
  rm -rf "$RUN/etcd" "$RUN/kubelet" "$RUN/containerd/state" "$RUN/cni/ipam" "$RUN/pids" "$RUN/netns.before"
  rm -rf "$CACHE/volumes"
  log "down"
}

# ----------------------------------------------------------------------------------------------- env
cmd_env() {
  cat <<EOF
export KUBECONFIG=$RUN/kubeconfig
export OPENAB_K8S_NETNS=$NETNS
# kubectl reaches the API server (https://$NODE_IP:6443) only inside the namespace:
#   ip netns exec $NETNS $BIN/kubectl --kubeconfig $RUN/kubeconfig get pods -A
alias k='ip netns exec $NETNS $BIN/kubectl --kubeconfig $RUN/kubeconfig'
EOF
}

cmd_status() {
  for f in "$RUN"/pids/*.pid; do
    [ -e "$f" ] || continue
    local n; n="$(basename "$f" .pid)"
    if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$n: running (pid $(cat "$f"))"; else echo "$n: dead"; fi
  done
  kctl get nodes -o wide 2>&1 || true
}

cmd_main() {
  local sub="${1:-}"; shift || true
  case "$sub" in
    build) cmd_build "$@" ;;
    image) cmd_image "$@" ;;
    up) cmd_up "$@" ;;
    load) cmd_load "$@" ;;
    down) cmd_down "$@" ;;
    env) cmd_env "$@" ;;
    kubectl) kctl "$@" ;;
    status) cmd_status "$@" ;;
    paths) printf '{"netns": "%s", "kubectl": "%s", "kubeconfig": "%s", "run": "%s", "cache": "%s"}\n' \
      "$NETNS" "$BIN/kubectl" "$RUN/kubeconfig" "$RUN" "$CACHE" ;;
    pvs) cmd_pvs "$@" ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then cmd_main "$@"; fi
