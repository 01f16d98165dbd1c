#!/bin/sh
# The router pod's client proxy (issue 30), shipped in ConfigMap router-client-proxy by
# infra/render/router.py: nginx in the foreground of this script, and a loop that reloads it when
# the mounted key files change. The kubelet rewrites a mounted Secret in place (within its sync
# period, about a minute) and never restarts the container, so without the reload a rotated key
# would only take effect on the next pod. `nginx -s reload` is graceful: new workers load the new
# keys, old ones finish the requests they hold (a streamed completion is not cut).
#
# Environment (defaults are the pod's paths):
#   CLIENT_PROXY_CONF           nginx.conf to run
#   CLIENT_PROXY_KEYS           directory of the key files (the projected Secret volume)
#   CLIENT_PROXY_WATCH_SECONDS  how often the key files are compared
#   CLIENT_PROXY_PREFIX         nginx -p prefix (tests run nginx outside a container)
set -u
conf="${CLIENT_PROXY_CONF:-/etc/client-proxy/nginx.conf}"
keys="${CLIENT_PROXY_KEYS:-/etc/client-proxy/keys}"
every="${CLIENT_PROXY_WATCH_SECONDS:-5}"
if [ -n "${CLIENT_PROXY_PREFIX:-}" ]; then
  set -- -e stderr -p "$CLIENT_PROXY_PREFIX" -c "$conf"
else
  set -- -e stderr -c "$conf"
fi

# The key files' contents, summarised: `*` skips the kubelet's ..data links, `cat` follows the
# file links into the current ..data.
digest() { cat "$keys"/* 2>/dev/null | cksum; }

nginx "$@" -g 'daemon off;' &
nginx_pid=$!
# SIGTERM from the kubelet: a graceful stop (QUIT), so open streams finish within the pod's grace period.
trap 'kill -QUIT "$nginx_pid" 2>/dev/null' TERM INT QUIT

seen=$(digest)
while kill -0 "$nginx_pid" 2>/dev/null; do
  sleep "$every" &
  wait $! 2>/dev/null  # a signal ends the wait at once, not after the sleep
  now=$(digest)
  [ "$now" = "$seen" ] && continue
  seen=$now
  # A half-written or broken key file must not take the proxy down: test first, keep serving the
  # keys loaded before when the new ones do not load. Messages never show a key.
  if nginx "$@" -t -q >/dev/null 2>&1; then
    nginx "$@" -s reload && echo "client-proxy: key files changed; nginx reloaded" >&2
  else
    echo "client-proxy: the changed key files do not load; still serving the keys loaded before" >&2
  fi
done
wait "$nginx_pid"
