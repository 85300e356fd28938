#!/usr/bin/env bash
# bench/peers.sh — measure smqd against beanstalkd, Redis (a list and a
# stream), NATS JetStream and RabbitMQ quorum queues with the same
# workloads, in the same run, at the same durability class, and print the
# ratios smqd / best peer.
#
#   bench/peers.sh [--class always|interval] [--repeat N] [--duration D]
#                  [--warmup D] [--scenarios "b16 b1 rate1000 backlog"]
#                  [--targets "smqd smqd-sdk beanstalkd redis redis-streams nats rabbitmq rabbitmq3"]
#                  [--backlog-messages N] [--out DIR] [--no-install] [--keep]
#                  [-- extra smqbench flags]
#
# Targets (default: smqd beanstalkd redis redis-streams nats):
#   smqd           smqd started by smqbench (--spawn), driven by smqbench's
#                  fasthttp client (--client fast)
#   smqd-sdk       the same smqd driven the way the MNS SDKs drive it
#                  (--client sdk: net/http, encoding/xml, a Content-MD5 per
#                  request); its rows are "smqd/sdk" in the report
#   redis          a list: BLMOVE into a processing list, LREM to acknowledge
#   redis-streams  a stream and a consumer group: XADD, XREADGROUP,
#                  XACK + XDEL, XAUTOCLAIM after the visibility timeout
#                  (the same redis-server as "redis")
#   beanstalkd, nats
#   rabbitmq       Debian's rabbitmq-server, one node, a quorum queue per
#                  bench queue (1 replica): publisher confirms, manual
#                  acks, prefetch = the receive batch (bench/peers/rabbitmq.go)
#   rabbitmq3      three rabbitmq-server nodes on this machine (own node
#                  names, ports and mnesia dirs), clustered with rabbitmqctl
#                  join_cluster; quorum queues with 3 members, leaders
#                  spread (queue_leader_locator = balanced); clients spread
#                  over the nodes; server CPU is the three beam.smp summed.
#                  Its rows are "rabbitmq3". Nodes: bench/rabbitmq.sh.
# e.g. the new peer and the SDK-like client alone, briefly:
#   bench/peers.sh --targets "smqd smqd-sdk redis-streams" --scenarios "b1 b16" \
#                  --repeat 1 --duration 3s --warmup 1s
#
# Every run reports, beside its rates, the server's CPU per message deleted
# (µs/msg: utime+stime of the server process from /proc/<pid>/stat over the
# measured window, divided by the messages deleted in it) and smqbench's own
# (getrusage), and both as cores (CPU seconds per wall second), so that a run
# limited by the load generator shows as one. smqbench knows the PID of the
# smqd it spawns; this script passes each peer server's PID (--server-pid).
# The report's columns "srv µs/msg", "cli µs/msg", "srv cores", "cli cores".
#
# Durability classes (fsync before the acknowledgement vs about once a second):
#   always:   smqd --sync always; beanstalkd -f 0; redis appendfsync always;
#             nats jetstream { sync_interval: always }
#             rabbitmq, rabbitmq3: a publisher confirm of a quorum queue
#             (a majority has the entry fsynced in its Raft log)
#   interval: smqd --sync interval --sync-interval 1s; beanstalkd -f 1000;
#             redis appendfsync everysec; nats jetstream { sync_interval: "1s" }
#             (nats-server's own default is 2 minutes, so it is set explicitly);
#             quorum queues have no such mode: rabbitmq and rabbitmq3 are
#             skipped in this class
# Priorities and delays: neither Redis peer (nor NATS, nor RabbitMQ's
# quorum queues) has them; smqbench
# reports those scenarios as unsupported for them.
#
# Every server binds 127.0.0.1 only, keeps its data in a temp dir, and is
# stopped by PID on exit (trap). smqd is started by smqbench itself
# (--spawn) for each run, on a fresh data dir. Every run is bounded in
# time (warm-up + duration, or --max-time for backlog).
#
# The peers' clients (go-redis, nats.go, a beanstalkd client) live in the Go
# module bench/peers, not in smqd's module, so cmd/smqbench knows only smqd
# and the in-process engine. This script builds the peer-enabled smqbench
# from that module; to build it by hand:
#   cd bench/peers && go build -o ../../bin/smqbench-peers ./cmd/smqbench
set -euo pipefail

CLASS=always
REPEAT=3
DURATION=10s
WARMUP=3s
SCENARIOS="b16 b1 rate1000"
TARGETS="smqd beanstalkd redis redis-streams nats"
BACKLOG_MESSAGES=1000000
OUT=""
INSTALL=1
KEEP=0
NATS_VERSION=v2.15.2
EXTRA=()

while [ $# -gt 0 ]; do
	case "$1" in
	--class) CLASS=$2; shift 2 ;;
	--repeat) REPEAT=$2; shift 2 ;;
	--duration) DURATION=$2; shift 2 ;;
	--warmup) WARMUP=$2; shift 2 ;;
	--scenarios) SCENARIOS=$2; shift 2 ;;
	--targets) TARGETS=$2; shift 2 ;;
	--backlog-messages) BACKLOG_MESSAGES=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	--) shift; EXTRA=("$@"); break ;;
	-h|--help) sed -n '2,68p' "$0"; exit 0 ;;
	*) echo "peers.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$CLASS" in always|interval) ;; *) echo "peers.sh: --class always|interval" >&2; exit 2 ;; esac

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/smqbench-peers.XXXXXX)
[ -n "$OUT" ] || OUT="$WORK/out"
mkdir -p "$OUT"
RESULTS="$OUT/results-$CLASS.jsonl"
: > "$RESULTS" # this run's results only: an --out used before held older lines
PIDS=()
FAILED=0
# failed logs a run that failed; smqbench wrote its line with the error,
# which the report leaves out, and the script exits 1 at the end.
failed() { log "run failed: $1"; FAILED=$((FAILED + 1)); }

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	if [ "$KEEP" = 0 ]; then
		rm -rf "$WORK/data" "$WORK/bin"
		rmdir "$WORK" 2>/dev/null || true # empty when the results went to --out
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "peers.sh: $*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # port [tries of 50 ms]
	local port=$1 tries=${2:-200} i
	for i in $(seq "$tries"); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		sleep 0.05
	done
	log "nothing listens on $port"; return 1
}
# shellcheck source=bench/rabbitmq.sh
. "$(dirname "$0")/rabbitmq.sh"
if [ "$CLASS" = interval ]; then
	t2=""
	for t in $TARGETS; do
		case $t in
		rabbitmq|rabbitmq3) log "skipping $t in the interval class (quorum queues always fsync before a confirm)" ;;
		*) t2="$t2 $t" ;;
		esac
	done
	TARGETS=$t2
fi

# --- install -----------------------------------------------------------------
NATS_SERVER=${NATS_SERVER:-$(command -v nats-server || true)}
if [ "$INSTALL" = 1 ]; then
	if ! command -v beanstalkd >/dev/null || ! command -v redis-server >/dev/null; then
		log "installing beanstalkd and redis-server (apt-get)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq beanstalkd redis-server >/dev/null
	fi
	if [ -z "$NATS_SERVER" ]; then
		log "building nats-server $NATS_VERSION (go install)"
		GOBIN="$WORK/bin" go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
		NATS_SERVER="$WORK/bin/nats-server"
	fi
	case " $TARGETS " in *" rabbitmq "*|*" rabbitmq3 "*) rmq_install ;; esac
fi
for t in $TARGETS; do
	case $t in
	beanstalkd) command -v beanstalkd >/dev/null || { log "beanstalkd missing"; exit 1; } ;;
	redis|redis-streams) command -v redis-server >/dev/null || { log "redis-server missing"; exit 1; } ;;
	nats) [ -x "$NATS_SERVER" ] || { log "nats-server missing (set NATS_SERVER)"; exit 1; } ;;
	rabbitmq|rabbitmq3) rmq_check || exit 1 ;;
	esac
done
log "building smqd, and smqbench with the peers (module bench/peers)"
(cd "$ROOT" && go build -o "$WORK/bin/" ./cmd/smqd)
(cd "$ROOT/bench/peers" && go build -o "$WORK/bin/smqbench" ./cmd/smqbench)
SMQD="$WORK/bin/smqd"
SMQBENCH="$WORK/bin/smqbench"

# --- versions and machine ------------------------------------------------------
{
	echo "date: $(date -u +%FT%TZ)"
	echo "smqd commit: $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet -- engine wal index server cmd bench || echo ' (dirty)')"
	echo "go: $(go version)"
	command -v beanstalkd >/dev/null && echo "beanstalkd: $(beanstalkd -v 2>&1 | head -1)"
	command -v redis-server >/dev/null && echo "redis: $(redis-server --version)"
	[ -x "$NATS_SERVER" ] && echo "nats-server: $("$NATS_SERVER" --version)"
	[ -x "$RMQ_BIN/rabbitmq-server" ] && echo "rabbitmq-server: $(rmq_version) (erlang $(dpkg-query -W -f '${Version}' erlang-base 2>/dev/null))"
	echo "nproc: $(nproc)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "kernel: $(uname -r)"
	echo "data fs: $(df -T "$WORK" | awk 'NR==2{print $2" on "$1}')"
	echo "class: $CLASS"
} | tee "$OUT/versions-$CLASS.txt" >&2

# --- servers ------------------------------------------------------------------
mkdir -p "$WORK/data"

start_beanstalkd() {
	local f=0; [ "$CLASS" = interval ] && f=1000
	BS_PORT=$(free_port)
	mkdir -p "$WORK/data/beanstalkd"
	beanstalkd -l 127.0.0.1 -p "$BS_PORT" -b "$WORK/data/beanstalkd" -f "$f" -z 1048576 >"$OUT/beanstalkd.log" 2>&1 &
	PIDS+=($!); BS_PID=$!; wait_port "$BS_PORT"
	log "beanstalkd pid $! port $BS_PORT (-f $f)"
}
start_redis() {
	local fs=always; [ "$CLASS" = interval ] && fs=everysec
	RD_PORT=$(free_port)
	mkdir -p "$WORK/data/redis"
	redis-server --bind 127.0.0.1 --port "$RD_PORT" --dir "$WORK/data/redis" --appendonly yes \
		--appendfsync "$fs" --save "" --daemonize no --protected-mode yes --logfile "$OUT/redis.log" &
	PIDS+=($!); RD_PID=$!; wait_port "$RD_PORT"
	log "redis-server pid $! port $RD_PORT (appendfsync $fs)"
}
start_nats() {
	local si=always; [ "$CLASS" = interval ] && si='"1s"'
	NATS_PORT=$(free_port)
	mkdir -p "$WORK/data/nats"
	cat >"$WORK/nats.conf" <<EOF
listen: 127.0.0.1:$NATS_PORT
http: 0
jetstream {
  store_dir: "$WORK/data/nats"
  sync_interval: $si
}
EOF
	"$NATS_SERVER" -c "$WORK/nats.conf" >"$OUT/nats.log" 2>&1 &
	PIDS+=($!); NATS_PID=$!; wait_port "$NATS_PORT"
	log "nats-server pid $! port $NATS_PORT (sync_interval $si)"
}
RD_PID=""
for t in $TARGETS; do
	case $t in
	smqd|smqd-sdk) ;;
	beanstalkd) start_beanstalkd ;;
	redis|redis-streams) [ -n "$RD_PID" ] || start_redis ;;
	nats) start_nats ;;
	rabbitmq) rmq_start r0; rmq_wait r0 ;;
	rabbitmq3) rmq_cluster r1 r2 r3 ;;
	*) log "unknown target $t"; exit 2 ;;
	esac
done

# --- runs ---------------------------------------------------------------------
scenario_args() {
	case $1 in
	b16) echo "cycle --batch 16" ;;
	b1) echo "cycle --batch 1" ;;
	rate1000) echo "cycle --batch 1 --rate 1000" ;;
	backlog) echo "backlog --batch 16 --messages $BACKLOG_MESSAGES --max-time 5m" ;;
	*) log "unknown scenario $1"; exit 2 ;;
	esac
}
run_one() { # target scenario repeat
	local t=$1 s=$2 r=$3 args
	args=$(scenario_args "$s")
	# The peer server's PID: its CPU over the window (and, for backlog, its
	# resident memory) is measured; smqbench knows a spawned smqd's itself.
	local pid=()
	case $t in
	beanstalkd) pid=(--server-pid "$BS_PID") ;;
	redis|redis-streams) pid=(--server-pid "$RD_PID") ;;
	nats) pid=(--server-pid "$NATS_PID") ;;
	rabbitmq) pid=(--server-pid "$(rmq_pid r0)") ;;
	rabbitmq3) pid=(--server-pid "$(rmq_pid r1),$(rmq_pid r2),$(rmq_pid r3)" --rss-pid "$(rmq_pid r1)") ;;
	esac
	local common=("${pid[@]}" --label "$s-$CLASS" --sync "$CLASS" --producers 8 --consumers 8 --body 1024 --warmup "$WARMUP" --duration "$DURATION" --json-out "$RESULTS" --quiet "${EXTRA[@]}")
	log "run $r/$REPEAT $s $t (load: $(cut -d' ' -f1-3 /proc/loadavg))"
	case $t in
	smqd|smqd-sdk)
		local dd="$WORK/data/$t-$s-$r"
		rm -rf "$dd"
		local sync=()
		[ "$CLASS" = interval ] && sync=(--sync-interval 1s)
		local rc=()
		[ "$s" = backlog ] && rc=(--restart-check)
		local client=fast
		[ "$t" = smqd-sdk ] && client=sdk
		# shellcheck disable=SC2086
		"$SMQBENCH" $args --target smqd --client "$client" --spawn "$SMQD" --data-dir "$dd" "${sync[@]}" "${rc[@]}" "${common[@]}" >/dev/null || failed "$s $t"
		rm -rf "$dd"
		;;
	beanstalkd)
		# shellcheck disable=SC2086
		"$SMQBENCH" $args --target beanstalkd --addr "127.0.0.1:$BS_PORT" "${common[@]}" >/dev/null || failed "$s $t" ;;
	redis|redis-streams)
		# shellcheck disable=SC2086
		"$SMQBENCH" $args --target "$t" --addr "127.0.0.1:$RD_PORT" "${common[@]}" >/dev/null || failed "$s $t" ;;
	nats)
		# shellcheck disable=SC2086
		"$SMQBENCH" $args --target nats --addr "nats://127.0.0.1:$NATS_PORT" "${common[@]}" >/dev/null || failed "$s $t" ;;
	rabbitmq)
		# shellcheck disable=SC2086
		"$SMQBENCH" $args --target rabbitmq --addr "127.0.0.1:$(rmq_port r0)" "${common[@]}" >/dev/null || failed "$s $t" ;;
	rabbitmq3)
		# shellcheck disable=SC2086
		"$SMQBENCH" $args --target rabbitmq --addr "127.0.0.1:$(rmq_port r1),127.0.0.1:$(rmq_port r2),127.0.0.1:$(rmq_port r3)" "${common[@]}" >/dev/null || failed "$s $t"
		if [ "$r" = 1 ]; then rmq_queues r1; fi ;;
	esac
}
for r in $(seq "$REPEAT"); do
	for s in $SCENARIOS; do
		for t in $TARGETS; do
			run_one "$t" "$s" "$r"
		done
	done
done

# Every result line carries its class (--sync), then the report.
log "results: $RESULTS"
"$SMQBENCH" report "$RESULTS" | tee "$OUT/report-$CLASS.txt"
case " $TARGETS " in
*" smqd-sdk "*)
	log "the same, with smqd driven by the SDK-like client as the baseline"
	"$SMQBENCH" report --baseline smqd/sdk "$RESULTS" | tee "$OUT/report-$CLASS-sdk.txt" ;;
esac
if [ "$FAILED" -gt 0 ]; then
	log "$FAILED run(s) failed: left out of the report"
	exit 1
fi
