#!/usr/bin/env bash
# Builds the loupe Debian package (binary, systemd unit for replicas, their configs, the nginx
# configuration, the Grafana dashboard):
#   deploy/debian/build.sh [LOUPE_BINARY] [OUT_DIR]     (default: target/release/loupe, target/debian)
# Prints the .deb's path. Needs dpkg-deb (Debian and Ubuntu have it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deploy=$(dirname "$here")
repo=$(dirname "$deploy")
bin=${1:-$repo/target/release/loupe}
out=${2:-$repo/target/debian}
# The nginx configuration lists three replicas on these ports; add lines to both for more.
replicas=3

version=$("$bin" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

install -D -m 0755 "$bin" "$root/usr/bin/loupe"
install -D -m 0644 "$deploy/systemd/loupe-follow@.service" "$root/lib/systemd/system/loupe-follow@.service"
install -D -m 0644 "$deploy/nginx/loupe.conf" "$root/usr/share/loupe/nginx-loupe.conf"
install -D -m 0644 "$deploy/grafana-dashboard.json" "$root/usr/share/loupe/grafana-dashboard.json"
install -D -m 0644 "$repo/docs/replicas.md" "$root/usr/share/doc/loupe/replicas.md"
install -d "$root/DEBIAN" "$root/etc/loupe"
for i in $(seq 1 $replicas); do
  sed -e "s/REPLICA/replica-$i/g" \
      -e "s/HTTP_PORT/$((8545 + 10 * (i - 1)))/" \
      -e "s/METRICS_PORT/$((9001 + i - 1))/" \
      "$here/replica.toml" > "$root/etc/loupe/replica-$i.toml"
  echo "/etc/loupe/replica-$i.toml" >> "$root/DEBIAN/conffiles"
done
install -m 0755 "$here/postinst" "$root/DEBIAN/postinst"
cat > "$root/DEBIAN/control" <<CONTROL
Package: loupe
Version: $version
Architecture: $arch
Maintainer: loupe developers <loupe@localhost>
Section: net
Priority: optional
Depends: libc6 (>= 2.34), libgcc-s1, adduser
Recommends: nginx
Installed-Size: $(du -sk "$root" | cut -f1)
Description: fast, lightweight Ethereum archive node serving JSON-RPC
 loupe executes and verifies every block, keeps the state of every block, and serves
 trace_call, the trace and debug namespaces and the eth_ read API. This package runs
 replicas that follow one upstream node (systemd unit loupe-follow@REPLICA, configured in
 /etc/loupe/REPLICA.toml) behind nginx (/usr/share/loupe/nginx-loupe.conf).
CONTROL

mkdir -p "$out"
deb="$out/loupe_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
