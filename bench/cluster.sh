#!/usr/bin/env bash
# bench/cluster.sh — a 3-node smqd cluster on this machine against a single
# smqd and a 3-node RabbitMQ quorum-queue cluster, in the same run, at sync
# always, 8 producers and 8 consumers, 1 KiB bodies; then the cluster's
# catch-up time and resident memory.
#
#   bench/cluster.sh [--repeat N] [--duration D] [--warmup D]
#                    [--scenarios "b16 b1"] [--systems "single cluster rabbitmq3"]
#                    [--queues Q] [--shards S] [--queue-prefix P]
#                    [--catchup-messages N] [--catchup-body B] [--no-catchup]
#                    [--backlog-messages N] [--backlog-body B] [--no-backlog]
#                    [--node-flags "FLAGS"] [--tls] [--out DIR] [--no-install] [--keep]
#
# Systems (all started once, up front, and left running for the whole run,
# so that every run of every system shares the machine the same way):
#   single     smqd --sync always, one node
#   cluster    three smqd --sync always --node-id 1..3 --shards S (default 8)
#              with --raft-listen/--cluster-peers on 127.0.0.1 and a cluster
#              key in SMQD_CLUSTER_KEY; smqbench --endpoints spreads the
#              clients over the three API addresses (a request for a shard
#              led elsewhere is forwarded by the node)
#   rabbitmq3  three rabbitmq-server nodes joined with rabbitmqctl
#              join_cluster, quorum queues with 3 members, leaders balanced,
#              clients spread over the nodes (bench/rabbitmq.sh)
# Every system gets Q queues named P-0 .. P-(Q-1) (default 8, prefix c768:
# these 8 names hash onto the 8 shards one each, so every shard's leader,
# and every node, works; the single node and RabbitMQ get the same queues). Server CPU per message is the sum over the system's
# processes (three smqd or three beam.smp).
#
# Scenarios: b16 = cycle --batch 16, b1 = cycle --batch 1 (--scenarios ""
# runs only the catch-up and the backlog). The summary gives
# each system's deleted/s (median, min..max over the repeats) and the ratios
# of medians cluster/single and cluster/rabbitmq3, with the load average
# before each run.
#
# Catch-up (unless --no-catchup): node 3 is stopped (SIGTERM), N messages
# (default 1,000,000, body B bytes, default 128) are sent to the Q queues
# through nodes 1 and 2 (smqbench produce, batch 16), then node 3 is
# started again; the time from its start until every shard's applied index
# on node 3 reaches the commit index its leader had when node 3 started
# (GET /cluster, through smqctl cluster status --json) is the catch-up
# time.
#
# Backlog (unless --no-backlog): for each system, fresh queues, every node
# up, N messages (default 1,000,000 of 1024 B) sent with produce --batch 16,
# then each server process's VmRSS (/proc/PID/status), right away and after
# 30 s idle.
#
# Everything binds 127.0.0.1, lives in a temp dir and is stopped by PID on
# exit (trap); every run is bounded in time (timeout). --node-flags adds
# flags to the cluster nodes' command lines (an A/B of a node option).
# --tls puts the links between the cluster's nodes on mutual TLS
# (--cluster-tls-*, a CA and a certificate per node made with openssl in
# the temp dir; docs/operations.md, "TLS between nodes").
set -euo pipefail

REPEAT=3
DURATION=10s
WARMUP=3s
SCENARIOS="b16 b1"
SYSTEMS="single cluster rabbitmq3"
QUEUES=8
SHARDS=8
NODE_FLAGS=""
TLS=0
# c768-0 .. c768-7 hash (xxhash64 modulo 8, engine/cluster/node.go) onto
# the 8 shards one each, so that with the defaults every shard, and so
# every node's leaders, carries one queue.
PREFIX=c768
CATCHUP=1
CATCHUP_MESSAGES=1000000
# 128 B by default, as in the first runs (docs/cluster-benchmarks.md);
# --catchup-body 1024 works too since the leaders answer ErrCompacted for
# released entries (it crashed them once) and takes 3-5 times longer.
CATCHUP_BODY=128
BACKLOG=1
BACKLOG_MESSAGES=1000000
BACKLOG_BODY=1024
OUT=""
INSTALL=1
KEEP=0

while [ $# -gt 0 ]; do
	case "$1" in
	--repeat) REPEAT=$2; shift 2 ;;
	--duration) DURATION=$2; shift 2 ;;
	--warmup) WARMUP=$2; shift 2 ;;
	--scenarios) SCENARIOS=$2; shift 2 ;;
	--systems) SYSTEMS=$2; shift 2 ;;
	--queues) QUEUES=$2; shift 2 ;;
	--shards) SHARDS=$2; shift 2 ;;
	--node-flags) NODE_FLAGS=$2; shift 2 ;;
	--tls) TLS=1; shift ;;
	--queue-prefix) PREFIX=$2; shift 2 ;;
	--catchup-messages) CATCHUP_MESSAGES=$2; shift 2 ;;
	--catchup-body) CATCHUP_BODY=$2; shift 2 ;;
	--no-catchup) CATCHUP=0; shift ;;
	--backlog-messages) BACKLOG_MESSAGES=$2; shift 2 ;;
	--backlog-body) BACKLOG_BODY=$2; shift 2 ;;
	--no-backlog) BACKLOG=0; shift ;;
	--out) OUT=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	-h|--help) sed -n '2,54p' "$0"; exit 0 ;;
	*) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/smqbench-cluster.XXXXXX)
[ -n "$OUT" ] || OUT="$WORK/out"
mkdir -p "$OUT" "$WORK/data"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS" # this run's results only
FAILED=0 # runs that failed: left out of the report, and the script exits 1
PIDS=()

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
	if [ "$KEEP" = 0 ]; then rm -rf "$WORK/data" "$WORK/bin" "$WORK/pki"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "cluster.sh: $*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
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

case " $SYSTEMS " in *" rabbitmq3 "*) RMQ=1 ;; *) RMQ=0 ;; esac
if [ "$RMQ" = 1 ]; then
	[ "$INSTALL" = 0 ] || rmq_install
	rmq_check
fi
log "building smqd, smqctl, and smqbench with the peers (module bench/peers)"
(cd "$ROOT" && go build -o "$WORK/bin/" ./cmd/smqd ./cmd/smqctl)
(cd "$ROOT/bench/peers" && go build -o "$WORK/bin/smqbench" ./cmd/smqbench)
SMQD="$WORK/bin/smqd"
SMQCTL="$WORK/bin/smqctl"
SMQBENCH="$WORK/bin/smqbench"

{
	echo "date: $(date -u +%FT%TZ)"
	echo "smqd commit: $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet -- engine wal index server cmd bench || echo ' (dirty)')"
	echo "go: $(go version)"
	[ "$RMQ" = 0 ] || echo "rabbitmq-server: $(rmq_version) (erlang $(dpkg-query -W -f '${Version}' erlang-base 2>/dev/null))"
	echo "nproc: $(nproc)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "memory: $(free -g | awk '/^Mem:/{print $2" GiB total, "$7" GiB available"}')"
	echo "kernel: $(uname -r)"
	echo "data fs: $(df -T "$WORK" | awk 'NR==2{print $2" on "$1}')"
	echo "queues: $QUEUES ($PREFIX-0 ..), shards: $SHARDS, cluster TLS: $TLS"
} | tee "$OUT/versions.txt" >&2

# --- servers -----------------------------------------------------------------
CREDS="$WORK/credentials"
echo "bench $(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32 || true)" >"$CREDS"
chmod 600 "$CREDS"
SMQD_CLUSTER_KEY=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32 || true)
export SMQD_CLUSTER_KEY

wait_healthy() { # api-port [tries of 100 ms]
	local port=$1 tries=${2:-600}
	for _ in $(seq "$tries"); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port/healthz")" = 200 ] && return 0
		sleep 0.1
	done
	log "127.0.0.1:$port not healthy"; return 1
}

SINGLE_PORT=""; SINGLE_PID=""
start_single() {
	SINGLE_PORT=$(free_port)
	"$SMQD" --listen "127.0.0.1:$SINGLE_PORT" --data-dir "$WORK/data/single" --sync always \
		--credentials-file "$CREDS" >"$OUT/smqd-single.log" 2>&1 &
	SINGLE_PID=$!; PIDS+=("$SINGLE_PID")
	wait_port "$SINGLE_PORT"; wait_healthy "$SINGLE_PORT"
	log "smqd single pid $SINGLE_PID api 127.0.0.1:$SINGLE_PORT"
}

declare -A API RAFT NPID
PEERS=""
# make_pki makes the cluster's CA and a certificate for 127.0.0.1 per node
# (--tls), as docs/operations.md's recipe does.
make_pki() {
	local i d="$WORK/pki"
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=bench cluster CA" -keyout "$d/ca-key.pem" -out "$d/ca.pem" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\n' >"$d/ext"
	for i in 1 2 3; do
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=node$i" \
			-keyout "$d/node$i-key.pem" -out "$d/node$i.csr" 2>/dev/null
		openssl x509 -req -in "$d/node$i.csr" -CA "$d/ca.pem" -CAkey "$d/ca-key.pem" -CAcreateserial \
			-days 2 -out "$d/node$i.pem" -extfile "$d/ext" 2>/dev/null
	done
	chmod 600 "$d"/*-key.pem
}
[ "$TLS" = 0 ] || make_pki
start_node() { # id
	local i=$1 tls=()
	[ "$TLS" = 0 ] || tls=(--cluster-tls-cert "$WORK/pki/node$i.pem" --cluster-tls-key "$WORK/pki/node$i-key.pem" --cluster-tls-ca "$WORK/pki/ca.pem")
	"$SMQD" --node-id "$i" --raft-listen "127.0.0.1:${RAFT[$i]}" --cluster-peers "$PEERS" --shards "$SHARDS" \
		--listen "127.0.0.1:${API[$i]}" --data-dir "$WORK/data/node$i" --sync always \
		--credentials-file "$CREDS" "${tls[@]}" ${NODE_FLAGS:-} >>"$OUT/smqd-node$i.log" 2>&1 &
	NPID[$i]=$!; PIDS+=("$!")
}
start_cluster() {
	local i
	for i in 1 2 3; do API[$i]=$(free_port); RAFT[$i]=$(free_port); done
	PEERS="1=127.0.0.1:${RAFT[1]},2=127.0.0.1:${RAFT[2]},3=127.0.0.1:${RAFT[3]}"
	for i in 1 2 3; do start_node "$i"; done
	for i in 1 2 3; do wait_port "${API[$i]}"; done
	for i in 1 2 3; do wait_healthy "${API[$i]}"; done
	log "smqd cluster pids ${NPID[1]} ${NPID[2]} ${NPID[3]} api 127.0.0.1:${API[1]},${API[2]},${API[3]} (shards $SHARDS)"
}
status() { # node id: GET /cluster as JSON (exit 5, a node not healthy, is an answer too)
	timeout 10 "$SMQCTL" cluster status --json --endpoint "http://127.0.0.1:${API[$1]}" --credentials-file "$CREDS" || [ $? -eq 5 ]
}

for s in $SYSTEMS; do
	case $s in
	single) start_single ;;
	cluster) start_cluster ;;
	rabbitmq3) rmq_cluster r1 r2 r3 ;;
	*) log "unknown system $s"; exit 2 ;;
	esac
done
if [ -n "${API[1]:-}" ]; then status 1 >"$OUT/cluster-status-start.json" || true; fi

# --- throughput runs -----------------------------------------------------------
run_one() { # system scenario repeat
	local sys=$1 s=$2 r=$3 batch args l
	case $s in
	b16) batch=16 ;;
	b1) batch=1 ;;
	*) log "unknown scenario $s"; exit 2 ;;
	esac
	l=$(load)
	log "run $r/$REPEAT $s $sys (load: $l)"
	args=(cycle --batch "$batch" --queues "$QUEUES" --sync always --producers 8 --consumers 8 --body 1024
		--warmup "$WARMUP" --duration "$DURATION" --label "$s|$sys|$r|$l" --json-out "$RESULTS" --quiet --progress=false)
	# RabbitMQ gets new queue names every run: a quorum queue declared again
	# right after its delete may be refused while its old members go away.
	[ "$sys" = rabbitmq3 ] && args+=(--queue-prefix "$PREFIX-$s-r$r")
	case $sys in
	single) args+=(--queue-prefix "$PREFIX" --target smqd --addr "127.0.0.1:$SINGLE_PORT" --credentials-file "$CREDS" --server-pid "$SINGLE_PID") ;;
	cluster) args+=(--queue-prefix "$PREFIX" --target smqd --endpoints "127.0.0.1:${API[1]},127.0.0.1:${API[2]},127.0.0.1:${API[3]}"
		--credentials-file "$CREDS" --server-pid "${NPID[1]},${NPID[2]},${NPID[3]}") ;;
	rabbitmq3) args+=(--target rabbitmq --addr "127.0.0.1:$(rmq_port r1),127.0.0.1:$(rmq_port r2),127.0.0.1:$(rmq_port r3)"
		--server-pid "$(rmq_pid r1),$(rmq_pid r2),$(rmq_pid r3)") ;;
	esac
	local before after dbefore dafter pids pbefore pafter
	case $sys in
	single) pids=$SINGLE_PID ;;
	cluster) pids="${NPID[1]} ${NPID[2]} ${NPID[3]}" ;;
	rabbitmq3) pids="$(rmq_pid r1) $(rmq_pid r2) $(rmq_pid r3)" ;;
	esac
	[ "$sys" = cluster ] && before=$(flush_counts)
	dbefore=$(dev_counts)
	# shellcheck disable=SC2086 # pids is a list
	pbefore=$(proc_counts $pids)
	timeout 300 "$SMQBENCH" "${args[@]}" >/dev/null 2>>"$OUT/smqbench.log" || { log "run failed: $s $sys (see $OUT/smqbench.log)"; FAILED=$((FAILED + 1)); }
	# shellcheck disable=SC2086
	pafter=$(proc_counts $pids)
	dafter=$(dev_counts)
	# The servers' system calls and context switches over the same span
	# (docs/cluster-benchmarks.md, "Frames a busy shard does without": the
	# counts judge a change that the throughput's spread hides).
	echo "$s|$sys|$r $pbefore $pafter" | awk '{print $1, "syscalls_read", $5-$2, "syscalls_write", $6-$3, "context_switches", $7-$4}' >>"$OUT/flushes.txt"
	if [ "$sys" = cluster ]; then
		after=$(flush_counts)
		# The whole run, warm-up included: log flushes (each log's waits)
		# and the file-system flushes they shared, summed over the nodes.
		echo "$s|$sys|$r $before $after" | awk '{print $1, "wal_fsyncs", $7-$2, "shared_flushes", $8-$3}' >>"$OUT/flushes.txt"
		# Where an operation's time goes: the mean wait of a log's Sync
		# and the mean time from a proposal to its commit, in µs
		# (docs/cluster-benchmarks.md, "Where a send's time goes").
		echo "$s|$sys|$r $before $after" | awk '{printf "%s log_sync_wait_us %d proposal_to_commit_us %d\n", $1,
			($7 > $2) ? ($9-$4)/($7-$2) : 0, ($11 > $6) ? ($10-$5)/($11-$6) : 0}' >>"$OUT/flushes.txt"
	fi
	# The data directory's block device over the same span, every system:
	# write requests, KiB written, flush requests (docs/cluster-benchmarks.md,
	# "What a flush costs on this disk"). Other programs count too.
	echo "$s|$sys|$r $dbefore $dafter" | awk '{d = ($4 == "-" || $7 == "-") ? "-" : $7-$4
		print $1, "device_writes", $5-$2, "device_kib", $6-$3, "device_flushes", d}' >>"$OUT/flushes.txt"
}
# dev_counts prints the block device holding the work directory: write
# requests, KiB written and flush requests so far (/proc/diskstats; flush
# counts since linux 5.5, "-" before), or "0 0 -" when it is not found.
DEV=$(basename "$(df --output=source "$WORK" 2>/dev/null | tail -1)")
dev_counts() {
	awk -v d="$DEV" '$3 == d {print $8, int($10 / 2), (NF >= 20 ? $19 : "-"); f = 1} END {if (!f) print "0 0 -"}' /proc/diskstats
}
# proc_counts PID... prints the read and write system calls (/proc/PID/io
# syscr and syscw: sockets and files) and the context switches (voluntary
# and not, of every thread alive at the time) of the processes, summed.
proc_counts() {
	local p r=0 w=0 c=0
	for p in "$@"; do
		[ -r "/proc/$p/io" ] || continue
		r=$((r + $(awk '$1=="syscr:"{print $2}' "/proc/$p/io")))
		w=$((w + $(awk '$1=="syscw:"{print $2}' "/proc/$p/io")))
		c=$((c + $(cat "/proc/$p"/task/*/status 2>/dev/null | awk '/ctxt_switches/{n+=$2} END{printf "%d", n+0}')))
	done
	echo "$r $w $c"
}
# flush_counts prints the cluster's smqd_wal_fsyncs_total and
# smqd_cluster_shared_flushes_total, then the time the logs' Syncs waited
# (smqd_wal_fsync_duration_seconds_sum, in µs) and the proposals' time
# to commit (smqd_cluster_shard_proposal_duration_seconds, sum in µs and
# count, every shard), each summed over the three nodes.
flush_counts() {
	local i f=0 sh=0 sw=0 ps=0 pc=0 m
	for i in 1 2 3; do
		m=$(curl -s --max-time 5 "http://127.0.0.1:${API[$i]}/metrics" || true)
		f=$((f + $(echo "$m" | awk '$1=="smqd_wal_fsyncs_total"{v=$2} END{printf "%d", v+0}')))
		sh=$((sh + $(echo "$m" | awk '$1=="smqd_cluster_shared_flushes_total"{v=$2} END{printf "%d", v+0}')))
		sw=$((sw + $(echo "$m" | awk '$1=="smqd_wal_fsync_duration_seconds_sum"{v=$2} END{printf "%d", v*1e6}')))
		ps=$((ps + $(echo "$m" | awk 'index($1, "smqd_cluster_shard_proposal_duration_seconds_sum")==1{v+=$2} END{printf "%d", v*1e6}')))
		pc=$((pc + $(echo "$m" | awk 'index($1, "smqd_cluster_shard_proposal_duration_seconds_count")==1{v+=$2} END{printf "%d", v}')))
	done
	echo "$f $sh $sw $ps $pc"
}
for r in $(seq "$REPEAT"); do
	for s in $SCENARIOS; do
		for sys in $SYSTEMS; do
			run_one "$sys" "$s" "$r"
		done
	done
done
if [ "$RMQ" = 1 ]; then rmq_queues r1; fi

summary() {
	python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = {}
loads = {}
failed = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    s, sysname, rep, l = r["label"].split("|")
    if r.get("error"):  # a failed run: left out of every figure, as smqbench report does
        failed[(s, sysname)] = failed.get((s, sysname), 0) + 1
        continue
    rows.setdefault((s, sysname), []).append(r)
    loads.setdefault((s, sysname), []).append(l)
for (s, name), n in sorted(failed.items()):
    print(f"{s} {name}: {n} failed run(s) left out")
scen = []
for s, _ in rows:
    if s not in scen:
        scen.append(s)
for s in scen:
    print(f"== {s}: cycle, 8P/8C, 1 KiB, sync always")
    print(f"{'system':10} {'runs':>4} {'deleted/s median':>16} {'min..max':>16} {'srv µs/msg':>10} {'srv cores':>9} {'send p50 ms':>11} {'e2e p50 ms':>10}  load (1/5/15 min) before each run")
    med = {}
    for (s2, name), rs in rows.items():
        if s2 != s:
            continue
        xs = [r["deleted_per_s"] for r in rs]
        med[name] = statistics.median(xs)
        cpu = statistics.median([r.get("server_cpu_us_per_msg", 0) for r in rs])
        cores = statistics.median([r.get("server_cores", 0) for r in rs])
        sp50 = statistics.median([r["send"]["p50_us"] for r in rs]) / 1000
        e2e = statistics.median([r["e2e"]["p50_us"] for r in rs]) / 1000
        print(f"{name:10} {len(rs):>4} {med[name]:>16.0f} {min(xs):>7.0f}..{max(xs):<8.0f} {cpu:>10.1f} {cores:>9.2f} {sp50:>11.2f} {e2e:>10.2f}  {'; '.join(loads[(s, name)])}")
    if "cluster" in med and "single" in med and med["single"]:
        print(f"cluster / single    = {med['cluster'] / med['single'] * 100:.0f} %")
    if "cluster" in med and "rabbitmq3" in med and med["rabbitmq3"]:
        print(f"cluster / rabbitmq3 = {med['cluster'] / med['rabbitmq3']:.2f}x")
    print()
EOF
}
if [ -s "$RESULTS" ]; then summary | tee "$OUT/summary.txt"; fi # --scenarios "": catch-up and backlog only

# --- catch-up and memory ---------------------------------------------------------
rss() { awk '/^VmRSS/{printf "%.0f MiB", $2/1024}' "/proc/$1/status"; }
if [ "$CATCHUP" = 1 ] && [ -n "${API[1]:-}" ]; then
	say() { echo "$*" | tee -a "$OUT/catchup.txt" >&2; }
	log "catch-up: stopping node 3 (pid ${NPID[3]}, SIGTERM)"
	kill -TERM "${NPID[3]}"
	for _ in $(seq 300); do kill -0 "${NPID[3]}" 2>/dev/null || break; sleep 0.1; done
	wait "${NPID[3]}" 2>/dev/null || true
	log "catch-up: sending $CATCHUP_MESSAGES messages of $CATCHUP_BODY B to $QUEUES queues through nodes 1 and 2 (load: $(load))"
	t0=$(date +%s.%N)
	timeout 1800 "$SMQBENCH" produce --messages "$CATCHUP_MESSAGES" --batch 16 --producers 8 --body "$CATCHUP_BODY" \
		--queues "$QUEUES" --queue-prefix "$PREFIX" --warmup 0s --duration 25m --sync always --label "catchup-preload" \
		--target smqd --endpoints "127.0.0.1:${API[1]},127.0.0.1:${API[2]}" --credentials-file "$CREDS" \
		--server-pid "${NPID[1]},${NPID[2]}" --json-out "$OUT/catchup-preload.jsonl" --quiet --progress=false >/dev/null 2>>"$OUT/smqbench.log"
	t1=$(date +%s.%N)
	say "preload: $CATCHUP_MESSAGES messages of $CATCHUP_BODY B in $(python3 -c "print(f'{$t1-$t0:.1f}')") s (load after: $(load))"
	# The leaders' commit per shard, from nodes 1 and 2.
	status 1 >"$OUT/catchup-n1.json"; status 2 >"$OUT/catchup-n2.json"
	target=$(python3 -c '
import json, sys
want = {}
for f in sys.argv[1:]:
    st = json.load(open(f))
    for sh in st["shards"]:
        if sh["role"] == "leader":
            want[sh["shard"]] = sh["commit_index"]
print(json.dumps(want))' "$OUT/catchup-n1.json" "$OUT/catchup-n2.json")
	say "leaders' commit index per shard at the restart: $target"
	log "catch-up: starting node 3 again (load: $(load))"
	t0=$(date +%s.%N)
	start_node 3
	wait_port "${API[3]}" 6000
	tl=$(date +%s.%N)
	done_at=""
	deadline=$(( $(date +%s) + 600 ))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		if ! kill -0 "${NPID[1]}" 2>/dev/null || ! kill -0 "${NPID[2]}" 2>/dev/null || ! kill -0 "${NPID[3]}" 2>/dev/null; then
			say "a node died during the catch-up: $(grep -h -m1 '^panic' "$OUT"/smqd-node?.log || echo 'no panic logged')"
			break
		fi
		if status 3 >"$OUT/catchup-n3.json" 2>/dev/null && python3 -c '
import json, sys
want = json.loads(sys.argv[2])
st = json.load(open(sys.argv[1]))
got = {sh["shard"]: sh["applied_index"] for sh in st["shards"]}
sys.exit(0 if all(str(k) in map(str, got) and got[int(k)] >= v for k, v in want.items()) else 1)' "$OUT/catchup-n3.json" "$target"; then
			done_at=$(date +%s.%N); break
		fi
		sleep 0.1
	done
	wait_healthy "${API[3]}" 100 || true
	th=$(date +%s.%N)
	say "node 3 (pid ${NPID[3]}): API port open after $(python3 -c "print(f'{$tl-$t0:.2f}')") s"
	if [ -n "$done_at" ]; then
		say "node 3 caught up (every shard's applied index >= its leader's commit at the restart) after $(python3 -c "print(f'{$done_at-$t0:.2f}')") s from its start"
	else
		say "node 3 did not catch up within 600 s"
	fi
	say "node 3 healthy after $(python3 -c "print(f'{$th-$t0:.2f}')") s; snapshots installed: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("snapshots_installed"))' "$OUT/catchup-n3.json")"
	status 1 >"$OUT/catchup-n1-after.json" || true
	say "followers' lag on node 1's leaders (shard: node=lag): $(python3 -c '
import json, sys
st = json.load(open(sys.argv[1]))
out = []
for sh in st["shards"]:
    if sh["role"] == "leader":
        out.append("s%d: %s" % (sh["shard"], ",".join("n%d=%d" % (f["node_id"], f["lag"]) for f in sh.get("followers") or [])))
print("; ".join(out))' "$OUT/catchup-n1-after.json")"
	say "resident memory with the $CATCHUP_MESSAGES messages of $CATCHUP_BODY B backlogged: node1 $(rss "${NPID[1]}"), node2 $(rss "${NPID[2]}"), node3 $(rss "${NPID[3]}") (load $(load))"
	say "data dirs: node1 $(du -sh "$WORK/data/node1" | cut -f1), node2 $(du -sh "$WORK/data/node2" | cut -f1), node3 $(du -sh "$WORK/data/node3" | cut -f1)"
fi

# --- resident memory with a backlog ----------------------------------------------
# Fresh queues, every node up: N messages of BACKLOG_BODY bytes sent, then
# each process's VmRSS right away and after 30 s idle.
if [ "$BACKLOG" = 1 ]; then
	say() { echo "$*" | tee -a "$OUT/backlog.txt" >&2; }
	backlog_rss() { # system args...
		local sys=$1; shift
		log "backlog: $BACKLOG_MESSAGES messages of $BACKLOG_BODY B to $sys (load: $(load))"
		local b0 b1 try
		# A 503 while leaders move (node 3 taking its shards back after the
		# catch-up) fails the queues' preparation: try again.
		for try in 1 2 3; do
			b0=$(date +%s.%N)
			if timeout 1800 "$SMQBENCH" produce --messages "$BACKLOG_MESSAGES" --batch 16 --producers 8 --body "$BACKLOG_BODY" \
				--queues "$QUEUES" --warmup 0s --duration 25m --sync always --label "backlog-$sys" \
				"$@" --json-out "$OUT/backlog.jsonl" --quiet --progress=false >/dev/null 2>>"$OUT/smqbench.log"; then
				break
			fi
			log "backlog preload failed: $sys (try $try)"
			sleep 5
		done
		b1=$(date +%s.%N)
		say "$sys: $BACKLOG_MESSAGES messages of $BACKLOG_BODY B sent in $(python3 -c "print(f'{$b1-$b0:.1f}')") s (load after: $(load))"
	}
	rss_all() { local p out=""; for p in "$@"; do out="$out $(rss "$p")"; done; echo "$out"; }
	for sys in $SYSTEMS; do
		case $sys in
		single)
			backlog_rss single --queue-prefix "$PREFIX" --target smqd --addr "127.0.0.1:$SINGLE_PORT" --credentials-file "$CREDS" --server-pid "$SINGLE_PID"
			say "single: VmRSS with the backlog:$(rss_all "$SINGLE_PID"); after 30 s idle:$(sleep 30; rss_all "$SINGLE_PID")" ;;
		cluster)
			kill -0 "${NPID[1]}" 2>/dev/null && kill -0 "${NPID[2]}" 2>/dev/null && kill -0 "${NPID[3]}" 2>/dev/null || { say "cluster: a node is down, no backlog run"; continue; }
			backlog_rss cluster --queue-prefix "$PREFIX" --target smqd --endpoints "127.0.0.1:${API[1]},127.0.0.1:${API[2]},127.0.0.1:${API[3]}" \
				--credentials-file "$CREDS" --server-pid "${NPID[1]},${NPID[2]},${NPID[3]}"
			say "cluster: VmRSS with the backlog (node 1, 2, 3):$(rss_all "${NPID[1]}" "${NPID[2]}" "${NPID[3]}"); after 30 s idle:$(sleep 30; rss_all "${NPID[1]}" "${NPID[2]}" "${NPID[3]}")" ;;
		rabbitmq3)
			backlog_rss rabbitmq3 --queue-prefix "$PREFIX-backlog" --target rabbitmq --addr "127.0.0.1:$(rmq_port r1),127.0.0.1:$(rmq_port r2),127.0.0.1:$(rmq_port r3)" \
				--server-pid "$(rmq_pid r1),$(rmq_pid r2),$(rmq_pid r3)"
			say "rabbitmq3: VmRSS with the backlog (r1, r2, r3):$(rss_all "$(rmq_pid r1)" "$(rmq_pid r2)" "$(rmq_pid r3)"); after 30 s idle:$(sleep 30; rss_all "$(rmq_pid r1)" "$(rmq_pid r2)" "$(rmq_pid r3)")"
			rmq_queues r1 ;;
		esac
	done
fi
log "out: $OUT"
if [ "$FAILED" -gt 0 ]; then
	log "$FAILED run(s) failed: left out of the report"
	exit 1
fi
