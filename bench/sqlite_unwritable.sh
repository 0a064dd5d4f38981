#!/bin/bash
# The SQLite file made unwritable under a running job, then writable again (issue 64, item 3):
# does the server recover by itself? Needs root on a file system with `chattr +i` (root ignores
# permission bits, not the immutable flag). Not a test: it depends on the file system.
#
# usage: bench/sqlite_unwritable.sh TUNEHUB_BIN [SECONDS_UNWRITABLE]
set -u
T=${1:?the tunehub binary}; HOLD=${2:-25}
D=$(mktemp -d); PORT=$((51000 + RANDOM % 1000))
"$T" server --db "$D/u.db" --listen 127.0.0.1:$PORT --token tk > "$D/server.log" 2>&1 &
SRV=$!
trap 'chattr -i "$D"/u.db* 2>/dev/null; kill $SRV 2>/dev/null; rm -rf "$D"' EXIT
export TUNEHUB_TOKEN=tk TUNEHUB_SERVER=http://127.0.0.1:$PORT
for _ in $(seq 50); do "$T" jobs >/dev/null 2>&1 && break; sleep 0.2; done
J=$("$T" submit 'matmul(32,32,32)' --trials 40 --batch 4 --repeat 1 --number 1 \
    --min-repeat-ms 1 --noise-threshold 0 | head -1)
sleep 4
echo "before:     $("$T" jobs | grep "$J")"
# Not the -shm: shared memory, not storage; immutable, SQLite's next store into it is a SIGBUS.
chattr +i "$D"/u.db "$D"/u.db-wal || exit 2
sleep "$HOLD"
echo "unwritable: $("$T" jobs | grep "$J")"
chattr -i "$D"/u.db "$D"/u.db-wal
START=$(date +%s)
while [ $(( $(date +%s) - START )) -lt 120 ]; do
    S=$("$T" jobs | grep "$J")
    case "$S" in *" done "*) break ;; esac
    sleep 2
done
echo "after:      $S  ($(( $(date +%s) - START )) s after writable again)"
kill -0 $SRV 2>/dev/null || { echo "the server exited:"; tail -5 "$D/server.log"; }
echo "server warnings: $(grep -c WARN "$D/server.log"), 'database is locked' after the file was writable: \
$(awk -v t="$(date -u -d @"$START" +%Y-%m-%dT%H:%M:%S)" '$1 > t' "$D/server.log" | grep -c 'locked\|unavailable')"
