# bench/rabbitmq.sh — RabbitMQ nodes for the benchmarks, sourced by
# bench/peers.sh and bench/cluster.sh (not run by itself).
#
# The caller defines WORK (a temp dir), OUT (logs), a PIDS array that its
# EXIT trap kills in order (TERM, then KILL), log() and wait_port PORT
# [TRIES]. Every node:
#   - is Debian's rabbitmq-server run as the caller (root in CI) from
#     /usr/lib/rabbitmq/bin, not through /usr/sbin's wrapper (which would
#     switch to the rabbitmq user, who cannot write the temp dir);
#   - listens on 127.0.0.1 only: AMQP (listeners.tcp), Erlang distribution
#     (inet_dist_use_interface) and an epmd of this run's own on a free
#     port (ERL_EPMD_PORT), so that nothing touches a system epmd on 4369;
#   - keeps mnesia, Raft logs and logs under $WORK/data/rabbitmq-NAME, with
#     a cookie of this run in $WORK/rabbitmq-home (HOME);
#   - has no plugins (no management API: the bench counts messages over
#     AMQP), and queue_leader_locator = balanced, so that the quorum queues
#     of a cluster spread their leaders over the nodes as smqd spreads its
#     shards' leaders;
#   - is stopped by the PID of its beam.smp (from RABBITMQ_PID_FILE), put at
#     the front of PIDS, then its start script's.
# A quorum queue confirms a publish once a majority of its members has the
# entry in its Raft log fsynced (Ra's WAL fdatasyncs a batch of writes
# before the member reports them written), so the "always" class needs no
# setting here: there is no "interval" class for quorum queues.

RMQ_BIN=${RMQ_BIN:-/usr/lib/rabbitmq/bin}
RMQ_HOME=""
RMQ_EPMD_PORT=""

# rmq_install installs rabbitmq-server (and Erlang, epmd) with apt-get.
rmq_install() {
	if [ ! -x "$RMQ_BIN/rabbitmq-server" ] || ! command -v epmd >/dev/null; then
		log "installing rabbitmq-server (apt-get)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null
	fi
}

rmq_check() {
	[ -x "$RMQ_BIN/rabbitmq-server" ] && command -v epmd >/dev/null || { log "rabbitmq-server or epmd missing (apt-get install rabbitmq-server)"; return 1; }
}

rmq_version() { dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || echo "?"; }

# rmq_epmd starts this run's epmd (once) and the cookie every node and
# rabbitmqctl share.
rmq_epmd() {
	[ -z "$RMQ_EPMD_PORT" ] || return 0
	RMQ_HOME="$WORK/rabbitmq-home"
	mkdir -p "$RMQ_HOME"
	tr -dc 'A-Z' </dev/urandom | head -c 32 >"$RMQ_HOME/.erlang.cookie" || true
	chmod 400 "$RMQ_HOME/.erlang.cookie"
	RMQ_EPMD_PORT=$(free_port)
	epmd -address 127.0.0.1 -port "$RMQ_EPMD_PORT" >"$OUT/epmd.log" 2>&1 &
	PIDS+=($!)
	wait_port "$RMQ_EPMD_PORT"
}

# rmq_env NAME AMQP_PORT DIST_PORT prints the environment of node NAME.
rmq_env() {
	local name=$1 port=$2 dist=$3 dir="$WORK/data/rabbitmq-$1"
	echo "HOME=$RMQ_HOME"
	echo "ERL_EPMD_PORT=$RMQ_EPMD_PORT"
	echo "RABBITMQ_NODENAME=$name@localhost"
	echo "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1"
	echo "RABBITMQ_NODE_PORT=$port"
	echo "RABBITMQ_DIST_PORT=$dist"
	echo "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}"
	echo "RABBITMQ_MNESIA_BASE=$dir/mnesia"
	echo "RABBITMQ_LOG_BASE=$dir/log"
	echo "RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins"
	echo "RABBITMQ_CONFIG_FILE=$dir/rabbitmq"
	echo "RABBITMQ_PID_FILE=$dir/beam.pid"
}

# rmq_start NAME: starts node NAME on free ports without waiting; sets
# RMQ_PORT_<NAME> (AMQP). rmq_wait NAME waits for it and records its beam
# PID in RMQ_PID_<NAME>.
rmq_start() {
	local name=$1 port dist dir="$WORK/data/rabbitmq-$1"
	rmq_epmd
	port=$(free_port); dist=$(free_port)
	mkdir -p "$dir"
	echo '[].' >"$dir/enabled_plugins"
	cat >"$dir/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$port
loopback_users.guest = true
queue_leader_locator = balanced
EOF
	local envs=()
	mapfile -t envs < <(rmq_env "$name" "$port" "$dist")
	env "${envs[@]}" "$RMQ_BIN/rabbitmq-server" >"$OUT/rabbitmq-$name.log" 2>&1 &
	PIDS+=($!)
	printf -v "RMQ_PORT_$name" '%s' "$port"
	printf -v "RMQ_DIST_$name" '%s' "$dist"
}
rmq_wait() {
	local name=$1 dir="$WORK/data/rabbitmq-$1" port pid
	port=$(rmq_port "$name")
	wait_port "$port" 1800 || { tail -20 "$OUT/rabbitmq-$name.log" >&2; return 1; }
	for _ in $(seq 100); do [ -s "$dir/beam.pid" ] && break; sleep 0.1; done
	pid=$(cat "$dir/beam.pid")
	PIDS=("$pid" "${PIDS[@]}")
	printf -v "RMQ_PID_$name" '%s' "$pid"
	log "rabbitmq node $name@localhost beam pid $pid amqp 127.0.0.1:$port"
}
rmq_port() { local v="RMQ_PORT_$1"; echo "${!v}"; }
rmq_pid() { local v="RMQ_PID_$1"; echo "${!v}"; }

# rmqctl NAME args...: rabbitmqctl against node NAME, bounded in time.
rmqctl() {
	local name=$1; shift
	env HOME="$RMQ_HOME" ERL_EPMD_PORT="$RMQ_EPMD_PORT" timeout 120 "$RMQ_BIN/rabbitmqctl" -n "$name@localhost" "$@"
}

# rmq_cluster A B C...: starts the nodes, waits for them, and joins every
# node after the first to the first's cluster (stop_app, join_cluster,
# start_app). Quorum queues declared afterwards have a member on every
# node (the default initial group size is the cluster's size).
rmq_cluster() {
	local first=$1 n
	for n in "$@"; do rmq_start "$n"; done
	for n in "$@"; do rmq_wait "$n"; done
	shift
	for n in "$@"; do
		rmqctl "$n" stop_app >>"$OUT/rabbitmqctl.log" 2>&1
		rmqctl "$n" join_cluster "$first@localhost" >>"$OUT/rabbitmqctl.log" 2>&1
		rmqctl "$n" start_app >>"$OUT/rabbitmqctl.log" 2>&1
		wait_port "$(rmq_port "$n")" 1800
	done
	local st
	st=$(rmqctl "$first" cluster_status --formatter json 2>>"$OUT/rabbitmqctl.log" || true)
	echo "$st" >>"$OUT/rabbitmqctl.log"
	log "rabbitmq cluster running: $(echo "$st" | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["running_nodes"]))' 2>/dev/null || echo '?')"
}

# rmq_queues NAME: logs the quorum queues' members and leaders.
rmq_queues() {
	rmqctl "$1" list_queues name type leader members messages >>"$OUT/rabbitmqctl.log" 2>&1 || true
}
