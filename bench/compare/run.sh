#!/usr/bin/env bash
# Runs the same workload against lapse and against what users would pick
# instead, in one run on this machine, and prints them side by side.
#
#   bench/compare/run.sh [flags]
#
# Peers (each started here on 127.0.0.1 with a throwaway config and stopped
# afterwards, also on error; lapsed binds port 0 and reports its port, Redis
# gets a random port below the ephemeral range and retries when it is taken):
#   lapse            lapsed, memory-only
#   lapse-durable    lapsed --data_dir --fsync=everysec (when lapsed has them)
#   redis-classic    Redis: values in a hash per collection, deadlines in one
#                    sorted set, a poller (Lua: ZRANGEBYSCORE/HMGET/HDEL/
#                    ZREMRANGEBYRANK) that PUBLISHes what it removed to a
#                    channel the watcher SUBSCRIBEs to; run with each
#                    --poll-intervals value (default 100ms and 10ms)
#   redis-aof        the same with appendonly yes, appendfsync everysec
#                    (beside lapse-durable)
#   redis-hfe        native hash-field expiration (HPEXPIREAT + `hexpired`
#                    keyspace events): needs Redis >= 7.4 or Valkey >= 9, given
#                    with --redis-hfe-server, else <repo>/../shared/bin/
#                    redis-server-hfe when it exists, else found on PATH;
#                    otherwise "not measured" with the reason
#
# Scenarios per peer (lapse-bench for lapse, lapse-redis-bench for Redis):
#   put             --members members at --batch per RPC/pipelined batch and
#                   --concurrency in flight, TTL 1h; plus resident memory per
#                   member (lapsed VmRSS, Redis INFO used_memory_rss, after -
#                   before, over members)
#   put-batch1      --small-members members, one per RPC/batch; for lapse also
#                   through the C++ client library (--concurrency calls in
#                   flight on its write stream, each call's callback making the
#                   next), against the same Redis row
#   expiry-latency  --pending members, deadlines spread over --spread, one
#                   watcher: received - deadline, lost
#   drain           --drain members sharing one deadline
#   reconnect       --reconnect-members over --reconnect-spread; the watcher
#                   drops off for --reconnect-pause mid-way (lapse resumes by
#                   sequence; pub/sub has no replay)
#   sparse          --sparse-members over --sparse-spread (one expiry every
#                   half second or so): latency on an otherwise idle server
#
# With --scenario=group, instead (lapse-bench group against lapsed,
# lapse-redis-bench group against the peer redis-streams: the classic poller
# every 10 ms XADDs each due member to a stream read by a Redis Streams
# consumer group; each run its own server):
#   burst           --group-members members sharing one deadline, read by a
#                   group of each of --group-consumers consumers (lapse: one
#                   Consume stream each, max_in_flight --max-in-flight; Redis:
#                   XREADGROUP COUNT --max-in-flight BLOCK, XACK per entry):
#                   events/s acked, ack - deadline
#   rate            --group-members over --group-spread, 3 consumers: ack -
#                   deadline at a steady rate
#   redelivery      --group-redelivery-members sharing one deadline, 3
#                   consumers, one of which dies holding --max-in-flight
#                   events: from its death to each being acked by another,
#                   minus --visibility-timeout (lapse: the group's visibility
#                   timeout; Redis: XAUTOCLAIM min-idle, run by each consumer
#                   every --claim-interval)
# Every member must be acked exactly once, on both sides (else exit 1).
#
# With --scenario=cluster, instead: a Redis Cluster of 3 masters + 3 replicas
# (Debian's redis-server, AOF everysec, --cluster-node-timeout, started here
# on random ports below the ephemeral range, stopped by PID), and side by side
# lapse (lapsed, embedded store), lapse-cluster-1 and lapse-cluster-2 (1 and
# 2 lapsed --store=redis-cluster replicas on it; lapse-bench spreads its RPCs
# over both and watches the first) and redis-classic (the recipe above, one
# redis-server, poller every last --poll-intervals value):
#   put, put-batch1, expiry-latency, drain   as above, --cluster-members and
#                   --cluster-small-members for the puts, --lead 3 s + 1 s per
#                   20k members for the three lapse peers; each run on fresh
#                   servers (the cluster emptied with FLUSHALL), with the
#                   CPU seconds of the masters, the Redis replicas and lapsed
#   store puts      lapse-cluster-bench: puts straight into the store (no
#                   gRPC) at one partition's master (batch --batch and 1),
#                   then over every partition, for --cluster-bench-time each:
#                   per-master throughput and master CPU per member
#   failover        (--failover=yes) lapse-cluster-2 again: a put run for
#                   --failover-put-time and an expiry-latency run, each with
#                   a master SIGKILLed mid-run (its replica is promoted, the
#                   killed node started again as a supervisor would, and it
#                   rejoins as a replica): the put stall (max RPC latency,
#                   errors) and the expiry gap (max latency, lost events)
#
# Flags (defaults finish in a few minutes; the 1M-size runs in docs/benchmarks.md
# use --pending=1000000 --spread=20s --drain=1000000):
#   --build-dir=DIR          Release build to use (default <repo>/build-bench)
#   --no-build               use the binaries as they are
#   --members=N              put size (default 1000000)
#   --small-members=N        put-batch1 size (default 100000)
#   --batch=N                members per RPC / pipelined batch (default 1000)
#   --concurrency=N          RPCs / batches in flight (default 16)
#   --pending=N              expiry-latency size (default 100000)
#   --spread=DUR             expiry-latency deadline window (default 10s)
#   --drain=N                drain size (default 100000)
#   --reconnect-members=N    (default 50000)
#   --reconnect-spread=DUR   (default 5s)
#   --reconnect-pause=DUR    (default 1s)
#   --sparse-members=N       (default 20)
#   --sparse-spread=DUR      (default 10s)
#   --poll-intervals=LIST    classic poller periods (default 100ms,10ms)
#   --redis-hz=N             Redis hz (default 100; the server's default is 10)
#   --redis-server=PATH      Redis for the classic recipe (default: redis-server)
#   --redis-hfe-server=PATH  a Redis >= 7.4 / Valkey >= 9 binary (default
#                            <repo>/../shared/bin/redis-server-hfe if present)
#   --lapsed-preload=LIB     LD_PRELOAD for lapsed (e.g. libjemalloc.so.2)
#   --durable=auto|yes|no    run lapse-durable and redis-aof (default auto)
#   --only=PEERS             comma-separated subset of the peers above
#   --scenario=SET           default (the scenarios above), group or cluster
#   --group-members=N        group burst and rate size (default 20000)
#   --group-consumers=LIST   consumer counts of the burst runs (default 1,3,10)
#   --group-spread=DUR       group rate run's deadline window (default 4s)
#   --group-redelivery-members=N   (default 5000)
#   --max-in-flight=N        unacked events per consumer (default 100)
#   --visibility-timeout=DUR (default 1s)
#   --claim-interval=DUR     Redis: XAUTOCLAIM period per consumer (default 100ms)
#   --cluster-members=N      cluster set: put size (default 200000)
#   --cluster-small-members=N  cluster set: batch-1 put size (default 20000)
#   --cluster-partitions=N   lapsed --redis_partitions (default 64)
#   --cluster-node-timeout=MS  Redis cluster-node-timeout (default 1000)
#   --cluster-bench-time=DUR lapse-cluster-bench run length (default 5s)
#   --cluster-in-flight=N    lapse-cluster-bench calls in flight at batch 1 (default
#                            64; at --batch, --concurrency)
#   --failover=yes|no        the failover runs (default yes)
#   --failover-put-time=DUR  failover put run length (default 20s)
#   --smoke                  tiny sizes (the bench-smoke ctests)
#
# Exits 1 when a lapse scenario saw errors or lost events (the peers'
# losses are part of the comparison, not failures; in the group set a peer
# that did not ack every member exactly once fails too), 2 on bad flags.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../common/lapsed.sh
source "${repo}/bench/common/lapsed.sh"
# shellcheck source=cluster.sh
source "${repo}/bench/compare/cluster.sh"
build="${repo}/build-bench"
do_build=1
members=1000000
small_members=100000
batch=1000
concurrency=16
pending=100000
spread=10s
drain=100000
reconnect_members=50000
reconnect_spread=5s
reconnect_pause=1s
sparse_members=20
sparse_spread=10s
poll_intervals=100ms,10ms
redis_hz=100
redis_server=redis-server
redis_hfe_server=
lapsed_preload=
durable=auto
only=
smoke=0
scenario_set=default
group_members=20000
group_consumers=1,3,10
group_spread=4s
group_redelivery_members=5000
max_in_flight=100
visibility_timeout=1s
claim_interval=100ms
cluster_members=200000
cluster_small_members=20000
cluster_partitions=64
cluster_node_timeout=1000
cluster_bench_time=5s
cluster_in_flight=64
failover=yes
failover_put_time=20s

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

for arg in "$@"; do
  case "$arg" in
    --build-dir=*) build="${arg#*=}" ;;
    --no-build) do_build=0 ;;
    --members=*) members="${arg#*=}" ;;
    --small-members=*) small_members="${arg#*=}" ;;
    --batch=*) batch="${arg#*=}" ;;
    --concurrency=*) concurrency="${arg#*=}" ;;
    --pending=*) pending="${arg#*=}" ;;
    --spread=*) spread="${arg#*=}" ;;
    --drain=*) drain="${arg#*=}" ;;
    --reconnect-members=*) reconnect_members="${arg#*=}" ;;
    --reconnect-spread=*) reconnect_spread="${arg#*=}" ;;
    --reconnect-pause=*) reconnect_pause="${arg#*=}" ;;
    --sparse-members=*) sparse_members="${arg#*=}" ;;
    --sparse-spread=*) sparse_spread="${arg#*=}" ;;
    --poll-intervals=*) poll_intervals="${arg#*=}" ;;
    --redis-hz=*) redis_hz="${arg#*=}" ;;
    --redis-server=*) redis_server="${arg#*=}" ;;
    --redis-hfe-server=*) redis_hfe_server="${arg#*=}" ;;
    --lapsed-preload=*) lapsed_preload="${arg#*=}" ;;
    --durable=*) durable="${arg#*=}" ;;
    --only=*) only="${arg#*=}" ;;
    --smoke) smoke=1 ;;
    --scenario=*) scenario_set="${arg#*=}" ;;
    --group-members=*) group_members="${arg#*=}" ;;
    --group-consumers=*) group_consumers="${arg#*=}" ;;
    --group-spread=*) group_spread="${arg#*=}" ;;
    --group-redelivery-members=*) group_redelivery_members="${arg#*=}" ;;
    --max-in-flight=*) max_in_flight="${arg#*=}" ;;
    --visibility-timeout=*) visibility_timeout="${arg#*=}" ;;
    --claim-interval=*) claim_interval="${arg#*=}" ;;
    --cluster-members=*) cluster_members="${arg#*=}" ;;
    --cluster-small-members=*) cluster_small_members="${arg#*=}" ;;
    --cluster-partitions=*) cluster_partitions="${arg#*=}" ;;
    --cluster-node-timeout=*) cluster_node_timeout="${arg#*=}" ;;
    --cluster-bench-time=*) cluster_bench_time="${arg#*=}" ;;
    --cluster-in-flight=*) cluster_in_flight="${arg#*=}" ;;
    --failover=*) failover="${arg#*=}" ;;
    --failover-put-time=*) failover_put_time="${arg#*=}" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown flag $arg (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $smoke == 1 ]]; then
  members=20000 small_members=2000 pending=3000 spread=1s drain=5000
  reconnect_members=3000 reconnect_spread=2s reconnect_pause=300ms
  sparse_members=3 sparse_spread=1s
  group_members=2000 group_consumers=1,3 group_spread=1s group_redelivery_members=1000
  visibility_timeout=500ms
  cluster_members=5000 cluster_small_members=500 cluster_bench_time=1s failover_put_time=4s
fi
if [[ "$scenario_set" != default && "$scenario_set" != group && "$scenario_set" != cluster ]]; then
  echo "run.sh: --scenario must be default, group or cluster" >&2
  exit 2
fi
if [[ "$failover" != yes && "$failover" != no ]]; then
  echo "run.sh: --failover must be yes or no" >&2
  exit 2
fi

lapsed="${build}/server/lapsed"
lapse_bench="${build}/bench/load/lapse-bench"
redis_bench="${build}/bench/compare/lapse-redis-bench"
cluster_bench="${build}/bench/cluster/lapse-cluster-bench"

if [[ $do_build == 1 ]]; then
  build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "${build}/CMakeCache.txt" 2>/dev/null || true)"
  if [[ "${build_type}" != "Release" ]]; then
    cmake -S "${repo}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  targets=(lapsed lapse-bench lapse-redis-bench)
  [[ $scenario_set == cluster ]] && targets+=(lapse-cluster-bench)
  cmake --build "${build}" -j"${JOBS:-2}" --target "${targets[@]}"
fi
for bin in "$lapsed" "$lapse_bench"; do
  [[ -x "$bin" ]] || { echo "run.sh: $bin is missing (build it, or pass --build-dir)" >&2; exit 2; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/lapse-compare.XXXXXX")"
results="${work}/results"
: >"$results"
server_pids=()
lapse_failed=()

stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local pid
  for pid in "${server_pids[@]}"; do stop_pid "$pid"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wanted() { [[ -z "$only" || ",$only," == *",$1,"* ]]; }

# ---- servers ----------------------------------------------------------------

server_pid=
server_port=

# run_lapsed [lapsed flags...]: sets server_pid and server_port.
run_lapsed() {
  LAPSED_PRELOAD="${lapsed_preload}" start_lapsed "$work" "$lapsed" --log_level=error \
    --shutdown_grace=1s "$@"
  server_pid=$lapsed_pid
  server_pids+=("$server_pid")
  server_port=$lapsed_port
}

# Redis cannot bind port 0 and report the port it got, and lapse-redis-bench
# speaks TCP only, so Redis gets a random port below the kernel's ephemeral
# range (where client sockets and port-0 servers live); if another process
# holds it, Redis fails to bind and start_redis tries another. A single
# server's port is at least 25000; Redis Cluster nodes, here (cluster.sh) and
# in the tests (testing/redis_cluster.cc), take ports in [10000, 15000) and
# bus ports (port + 10000) in [20000, 25000). So compare_smoke runs beside the
# tests that kill a node and restart it on its port.
redis_ports_end="$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
(( redis_ports_end > 26000 )) || redis_ports_end=32768
# A caller may narrow the range with redis_port_low / redis_port_high.
redis_port_candidate() {
  local low=${redis_port_low:-25000} high=${redis_port_high:-$redis_ports_end}
  echo $((low + RANDOM % (high - low)))
}

# start_redis BINARY [config lines...]: sets server_pid and server_port.
start_redis() {
  local bin=$1 dir conf i attempt
  shift
  for attempt in $(seq 20); do
    server_port="$(redis_port_candidate)"
    dir="${work}/redis-${server_port}"
    rm -rf "$dir"
    mkdir -p "$dir"
    conf="${dir}/redis.conf"
    {
      echo "bind 127.0.0.1"
      echo "port ${server_port}"
      echo "dir ${dir}"
      echo "daemonize no"
      echo "save \"\""
      echo "appendonly no"
      echo "hz ${redis_hz}"
      echo "logfile ${dir}/redis.log"
      printf '%s\n' "$@"
    } >"$conf"
    "$bin" "$conf" >/dev/null 2>&1 &
    server_pid=$!
    server_pids+=("$server_pid")
    # Ready only once this Redis has bound the port: a PONG alone could come
    # from another server on it.
    for i in $(seq 100); do
      if grep -q "Ready to accept connections" "${dir}/redis.log" 2>/dev/null &&
        [[ "$(redis-cli -p "$server_port" ping 2>/dev/null)" == PONG ]]; then
        return 0
      fi
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    if grep -q "Address already in use" "${dir}/redis.log" 2>/dev/null; then
      stop_server
      continue
    fi
    break
  done
  echo "run.sh: $bin did not start: $(tail -3 "${dir}/redis.log" 2>/dev/null)" >&2
  exit 1
}

stop_server() {
  stop_pid "$server_pid"
  local kept=() pid
  for pid in "${server_pids[@]}"; do [[ "$pid" != "$server_pid" ]] && kept+=("$pid"); done
  server_pids=("${kept[@]+"${kept[@]}"}")
}

lapsed_rss() {
  sleep 1
  awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$1/status"
}
# Redis refreshes used_memory_rss in its cron (every 100 ms), hence the pause.
redis_rss() {
  sleep 1
  redis-cli -p "$1" info memory | tr -d '\r' | sed -n 's/^used_memory_rss://p'
}

# ---- running a scenario -------------------------------------------------------

# run_bench PEER lapse|redis|strict|fault CMD...: runs one scenario, shows
# its output, keeps its RESULT line, and notes a failure of lapse or of a
# strict (group) peer (a fault run's errors are what it measures).
run_bench() {
  local peer=$1 kind=$2 status
  shift 2
  set +e
  "$@" 2>&1 | tee "${work}/last"
  status=${PIPESTATUS[0]}
  set -e
  grep '^RESULT ' "${work}/last" >>"$results" || true
  if [[ $status != 0 && ($kind == lapse || $kind == strict) ]]; then
    lapse_failed+=("$peer: ${*:2:1}")
  fi
  return 0
}

memory_result() {  # PEER BEFORE AFTER MEMBERS
  local per
  per=$(awk -v b="$2" -v a="$3" -v n="$4" 'BEGIN {printf "%.1f", (a - b) / n}')
  echo "  resident memory: ${2} -> ${3} bytes, ${per} bytes per member"
  echo "RESULT $1 memory bytes_per_member=${per} rss_before=${2} rss_after=${3} members=${4}" >>"$results"
}

common=(--batch="$batch" --concurrency="$concurrency")

run_lapse_peer() {  # PEER [lapsed flags...]
  local peer=$1 before after
  shift
  echo
  echo "######## ${peer}: lapsed $*"
  run_lapsed "$@"
  before=$(lapsed_rss "$server_pid")
  run_bench "$peer" lapse "$lapse_bench" put --addr="127.0.0.1:${server_port}" --peer="$peer" \
    "${common[@]}" --members="$members"
  after=$(lapsed_rss "$server_pid")
  memory_result "$peer" "$before" "$after" "$members"
  stop_server

  run_lapsed "$@"
  run_bench "$peer" lapse "$lapse_bench" put --addr="127.0.0.1:${server_port}" \
    --peer="${peer}-batch1" --batch=1 --concurrency="$concurrency" --members="$small_members"
  stop_server

  run_lapsed "$@"
  run_bench "$peer" lapse "$lapse_bench" put --addr="127.0.0.1:${server_port}" \
    --peer="${peer}-client1" --client_library --batch=1 --concurrency="$concurrency" \
    --members="$small_members"
  stop_server

  run_lapsed "$@"
  run_bench "$peer" lapse "$lapse_bench" expiry-latency --addr="127.0.0.1:${server_port}" \
    --peer="$peer" "${common[@]}" --members="$pending" --spread="$spread"
  stop_server

  run_lapsed "$@"
  run_bench "$peer" lapse "$lapse_bench" drain --addr="127.0.0.1:${server_port}" \
    --peer="$peer" "${common[@]}" --members="$drain"
  stop_server

  run_lapsed "$@"
  run_bench "$peer" lapse "$lapse_bench" expiry-latency --addr="127.0.0.1:${server_port}" \
    --peer="$peer" "${common[@]}" --members="$reconnect_members" --spread="$reconnect_spread" \
    --reconnect-at="$(awk -v s="${reconnect_spread%s}" 'BEGIN {print s * 0.3 "s"}')" \
    --reconnect-pause="$reconnect_pause"
  stop_server

  run_lapsed "$@"
  run_bench "$peer" lapse "$lapse_bench" expiry-latency --addr="127.0.0.1:${server_port}" \
    --peer="${peer}-sparse" --batch=1 --concurrency=1 --members="$sparse_members" \
    --spread="$sparse_spread" --lead=1s
  stop_server
}

# run_redis_peer PEER BINARY MODE POLL_INTERVALS WITH_PUT WITH_RECONNECT [config lines...]
run_redis_peer() {
  local peer=$1 bin=$2 mode=$3 intervals=$4 with_put=$5 with_reconnect=$6 before after p label
  shift 6
  echo
  echo "######## ${peer}: $("$bin" --version | head -1)"
  local rb=("$redis_bench" --mode="$mode" "${common[@]}")
  if [[ $with_put == 1 ]]; then
    start_redis "$bin" "$@"
    before=$(redis_rss "$server_port")
    run_bench "$peer" redis "${rb[@]}" put --port="$server_port" --peer="$peer" --members="$members"
    after=$(redis_rss "$server_port")
    memory_result "$peer" "$before" "$after" "$members"
    stop_server
    start_redis "$bin" "$@"
    run_bench "$peer" redis "$redis_bench" --mode="$mode" put --port="$server_port" \
      --peer="${peer}-batch1" --batch=1 --concurrency="$concurrency" --members="$small_members"
    stop_server
  fi
  IFS=, read -r -a intervals_list <<<"$intervals"
  for p in "${intervals_list[@]}"; do
    label="$peer"
    local poll=()
    if [[ $mode == classic ]]; then
      label="${peer}-poll${p}"
      poll=(--poll-interval="$p")
    fi
    start_redis "$bin" "$@"
    run_bench "$label" redis "${rb[@]}" expiry-latency --port="$server_port" --peer="$label" \
      "${poll[@]}" --members="$pending" --spread="$spread"
    stop_server
    start_redis "$bin" "$@"
    run_bench "$label" redis "${rb[@]}" drain --port="$server_port" --peer="$label" \
      "${poll[@]}" --members="$drain"
    stop_server
    if [[ $with_reconnect == 1 ]]; then
      start_redis "$bin" "$@"
      run_bench "$label" redis "${rb[@]}" expiry-latency --port="$server_port" --peer="$label" \
        "${poll[@]}" --members="$reconnect_members" --spread="$reconnect_spread" \
        --reconnect-at="$(awk -v s="${reconnect_spread%s}" 'BEGIN {print s * 0.3 "s"}')" \
        --reconnect-pause="$reconnect_pause"
      stop_server
    fi
    start_redis "$bin" "$@"
    run_bench "$label" redis "$redis_bench" --mode="$mode" expiry-latency --port="$server_port" \
      --peer="${label}-sparse" "${poll[@]}" --batch=1 --concurrency=1 \
      --members="$sparse_members" --spread="$sparse_spread" --lead=1s
    stop_server
  done
}

# Redis >= 7.4 or Valkey >= 9: the version of BINARY is new enough.
hfe_capable() {
  local v
  v="$("$1" --version 2>/dev/null | sed -n 's/.* v=\([0-9]*\.[0-9]*\).*/\1/p')"
  [[ -n "$v" ]] || return 1
  if "$1" --version | grep -qi valkey; then
    awk -v v="$v" 'BEGIN {split(v, a, "."); exit !(a[1] >= 9)}'
  else
    awk -v v="$v" 'BEGIN {split(v, a, "."); exit !(a[1] > 7 || (a[1] == 7 && a[2] >= 4))}'
  fi
}

# ---- the run ------------------------------------------------------------------

echo "== lapse vs Redis, $(date -u +%Y-%m-%dT%H:%MZ), lapse $(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
echo "   machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r); client and servers share it"
if [[ $scenario_set == group ]]; then
  echo "   sizes: group burst ${group_members} (consumers ${group_consumers}), rate ${group_members} over" \
    "${group_spread}, redelivery ${group_redelivery_members}; max in flight ${max_in_flight}," \
    "visibility timeout ${visibility_timeout}"
elif [[ $scenario_set == cluster ]]; then
  echo "   sizes: put ${cluster_members} (batch ${batch}, concurrency ${concurrency}), batch-1 put" \
    "${cluster_small_members}, expiry-latency ${pending} over ${spread}, drain ${drain};" \
    "${cluster_partitions} partitions, cluster-node-timeout ${cluster_node_timeout} ms"
  echo "   load: $(uptime | sed 's/.*load average/load average/')"
else
  echo "   sizes: put ${members} (batch ${batch}, concurrency ${concurrency}), batch-1 put ${small_members}," \
    "expiry-latency ${pending} over ${spread}, drain ${drain}, reconnect ${reconnect_members} over ${reconnect_spread}," \
    "sparse ${sparse_members} over ${sparse_spread}"
fi

hfe_reason=
if [[ -n "$redis_hfe_server" ]]; then
  if [[ ! -x "$redis_hfe_server" ]]; then
    hfe_reason="--redis-hfe-server=${redis_hfe_server} is not an executable"
    redis_hfe_server=
  elif ! hfe_capable "$redis_hfe_server"; then
    hfe_reason="--redis-hfe-server=${redis_hfe_server} is version $("$redis_hfe_server" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'): no hash-field expiration (needs Redis >= 7.4 or Valkey >= 9)"
    redis_hfe_server=
  fi
elif [[ -x "${repo}/../shared/bin/redis-server-hfe" ]] &&
  hfe_capable "${repo}/../shared/bin/redis-server-hfe"; then
  redis_hfe_server="$(cd "${repo}/../shared/bin" && pwd)/redis-server-hfe"
else
  for candidate in valkey-server redis-server; do
    if command -v "$candidate" >/dev/null && hfe_capable "$(command -v "$candidate")"; then
      redis_hfe_server="$(command -v "$candidate")"
      break
    fi
  done
  if [[ -z "$redis_hfe_server" ]]; then
    hfe_reason="no Redis >= 7.4 or Valkey >= 9 at ${repo}/../shared/bin/redis-server-hfe or on PATH ($("$redis_server" --version 2>/dev/null | sed -n 's/.* v=\([^ ]*\).*/redis-server is \1/p')); pass --redis-hfe-server=PATH"
  fi
fi

durable_flags=()
if [[ "$durable" != no ]]; then
  help="$("$lapsed" --helpfull 2>&1 || true)"
  if grep -q -- '-data_dir' <<<"$help" && grep -q -- '-fsync' <<<"$help"; then
    durable_flags=(--data_dir="${work}/lapse-data" --fsync=everysec)
  elif grep -q -- '-data-dir' <<<"$help" && grep -q -- '-fsync' <<<"$help"; then
    durable_flags=(--data-dir="${work}/lapse-data" --fsync=everysec)
  elif [[ "$durable" == yes ]]; then
    echo "run.sh: --durable=yes but lapsed has no --data_dir/--fsync flags" >&2
    exit 2
  fi
fi

have_redis=1
if ! command -v "$redis_server" >/dev/null || [[ ! -x "$redis_bench" ]] || ! command -v redis-cli >/dev/null; then
  have_redis=0
  echo "   Redis peers skipped: need redis-server, redis-cli and lapse-redis-bench (libhiredis-dev)"
fi

# run_group_peer PEER lapse|redis: the group set against a fresh server per run.
run_group_peer() {
  local peer=$1 kind=$2 c
  echo
  echo "######## ${peer}: consumer groups"
  local g=(--batch="$batch" --concurrency="$concurrency" --max-in-flight="$max_in_flight"
    --visibility-timeout="$visibility_timeout")
  group_run() {  # LABEL FLAGS...
    local label=$1
    shift
    if [[ $kind == lapse ]]; then
      run_lapsed
      run_bench "$label" strict "$lapse_bench" group --addr="127.0.0.1:${server_port}" \
        --peer="$label" "${g[@]}" "$@"
    else
      start_redis "$(command -v "$redis_server")"
      run_bench "$label" strict "$redis_bench" group --port="$server_port" --peer="$label" \
        --poll-interval=10ms --claim-interval="$claim_interval" "${g[@]}" "$@"
    fi
    stop_server
  }
  IFS=, read -r -a consumer_counts <<<"$group_consumers"
  for c in "${consumer_counts[@]}"; do
    group_run "${peer}-g${c}" --members="$group_members" --spread=0s --consumers="$c"
  done
  group_run "${peer}-rate" --members="$group_members" --spread="$group_spread" --consumers=3
  group_run "${peer}-redelivery" --members="$group_redelivery_members" --spread=0s \
    --consumers=3 --kill-consumer
}

# ---- the cluster set ------------------------------------------------------------

replica_pids=()
replica_addrs=

# start_replicas N [lapsed flags...]: N lapsed, each with a directory of its
# own; sets replica_pids and replica_addrs (comma-separated).
start_replicas() {
  local n=$1 i
  shift
  replica_pids=()
  replica_addrs=
  for i in $(seq "$n"); do
    mkdir -p "${work}/replica${i}"
    LAPSED_PRELOAD="${lapsed_preload}" start_lapsed "${work}/replica${i}" "$lapsed" \
      --log_level=error --shutdown_grace=1s "$@"
    replica_pids+=("$lapsed_pid")
    server_pids+=("$lapsed_pid")
    replica_addrs+="${replica_addrs:+,}127.0.0.1:${lapsed_port}"
  done
}

stop_replicas() {
  local pid
  for pid in "${replica_pids[@]}"; do
    server_pid=$pid
    stop_server
  done
  replica_pids=()
}

# cluster_run PEER REPLICAS WHAT LAPSE-BENCH-ARGS...: one lapse-bench run on
# fresh servers — REPLICAS lapsed on the emptied cluster, or with 0 one lapsed
# on its embedded store — and a "RESULT PEER cpu-WHAT" line with the CPU
# seconds the masters, the Redis replicas and lapsed spent during it.
cluster_run() {
  local peer=$1 replicas=$2 what=$3 masters=() redis_replicas=() m r l
  shift 3
  if [[ $replicas == 0 ]]; then
    start_replicas 1
  else
    flush_cluster
    start_replicas "$replicas" "${cluster_flags[@]}"
    read -r -a masters <<<"$(cluster_pids master | tr '\n' ' ')"
    read -r -a redis_replicas <<<"$(cluster_pids replica | tr '\n' ' ')"
  fi
  m=$(cpu_seconds "${masters[@]}")
  r=$(cpu_seconds "${redis_replicas[@]}")
  l=$(cpu_seconds "${replica_pids[@]}")
  run_bench "$peer" lapse "$lapse_bench" "$@" --addr="$replica_addrs"
  m=$(awk -v a="$(cpu_seconds "${masters[@]}")" -v b="$m" 'BEGIN {printf "%.2f", a - b}')
  r=$(awk -v a="$(cpu_seconds "${redis_replicas[@]}")" -v b="$r" 'BEGIN {printf "%.2f", a - b}')
  l=$(awk -v a="$(cpu_seconds "${replica_pids[@]}")" -v b="$l" 'BEGIN {printf "%.2f", a - b}')
  echo "RESULT ${peer} cpu-${what} masters_s=${m} redis_replicas_s=${r} lapsed_s=${l}" |
    tee -a "$results"
  stop_replicas
}

# The cluster set's --lead for N members: loading through the cluster store
# is slower than lapse-bench's default lead (2 s + 1 s per 100k) allows.
cluster_lead() { echo "$((3 + $1 / 20000))s"; }

# run_cluster_peer PEER REPLICAS: put, put-batch1, expiry-latency, drain.
run_cluster_peer() {
  local peer=$1 replicas=$2
  echo
  echo "######## ${peer}: $([[ $replicas == 0 ]] && echo "lapsed, embedded store" ||
    echo "${replicas} lapsed --store=redis-cluster over 3 masters + 3 replicas")"
  cluster_run "$peer" "$replicas" put put --peer="$peer" "${common[@]}" \
    --members="$cluster_members"
  cluster_run "$peer" "$replicas" put-batch1 put --peer="${peer}-batch1" --batch=1 \
    --concurrency="$concurrency" --members="$cluster_small_members"
  cluster_run "$peer" "$replicas" expiry-latency expiry-latency --peer="$peer" "${common[@]}" \
    --members="$pending" --spread="$spread" --lead="$(cluster_lead "$pending")"
  cluster_run "$peer" "$replicas" drain drain --peer="$peer" "${common[@]}" --members="$drain" \
    --lead="$(cluster_lead "$drain")"
}

# run_store_bench: lapse-cluster-bench at partition 0's master (batch --batch
# with --concurrency calls in flight, then batch 1 with --cluster-in-flight),
# then over every partition.
run_store_bench() {
  local b
  echo
  echo "######## store puts: lapse-cluster-bench, no gRPC"
  for b in "$batch" 1; do
    flush_cluster
    run_bench "store-p0-b${b}" lapse "$cluster_bench" --seeds="$cluster_seeds" \
      --peer="store-p0-b${b}" --partition=0 --partitions="$cluster_partitions" --batch="$b" \
      --in-flight="$([[ $b == 1 ]] && echo "$cluster_in_flight" || echo "$concurrency")" \
      --duration="$cluster_bench_time"
  done
  flush_cluster
  run_bench "store-all-b${batch}" lapse "$cluster_bench" --seeds="$cluster_seeds" \
    --peer="store-all-b${batch}" --partitions="$cluster_partitions" --batch="$batch" \
    --in-flight="$concurrency" --duration="$cluster_bench_time"
}

# run_failover: lapse-cluster-2 with a master killed during a put run, then
# during an expiry-latency run (at 40 % of its spread).
run_failover() {
  local peer=lapse-cluster-2-failover killer lead_s=$((3 + pending / 20000))
  echo
  echo "######## failover: 2 lapsed --store=redis-cluster, a master SIGKILLed mid-run"
  flush_cluster
  start_replicas 2 "${cluster_flags[@]}"
  : >"${work}/failover-put"
  kill_master_later "$(awk -v d="${failover_put_time%s}" 'BEGIN {print d * 0.3}')" \
    "${work}/failover-put" "${peer}-put" &
  killer=$!
  run_bench "$peer" fault "$lapse_bench" put --addr="$replica_addrs" --peer="$peer" \
    "${common[@]}" --duration="$failover_put_time" --keep-going
  wait "$killer" || true
  rejoin_killed "${work}/failover-put"
  stop_replicas

  flush_cluster
  start_replicas 2 "${cluster_flags[@]}"
  : >"${work}/failover-expiry"
  kill_master_later "$(awk -v l="$lead_s" -v s="${spread%s}" 'BEGIN {print l + s * 0.4}')" \
    "${work}/failover-expiry" "${peer}-expiry" &
  killer=$!
  run_bench "$peer" fault "$lapse_bench" expiry-latency --addr="$replica_addrs" --peer="$peer" \
    "${common[@]}" --members="$pending" --spread="$spread" --lead="${lead_s}s" --drain-timeout=15s
  wait "$killer" || true
  rejoin_killed "${work}/failover-expiry"
  stop_replicas
}

if [[ $scenario_set == cluster ]]; then
  if wanted store && [[ ! -x "$cluster_bench" ]]; then
    echo "run.sh: $cluster_bench is missing" >&2
    exit 2
  fi
  if ! command -v "$redis_server" >/dev/null || ! command -v redis-cli >/dev/null; then
    echo "run.sh: --scenario=cluster needs redis-server and redis-cli" >&2
    exit 2
  fi
  if { wanted lapse-cluster-1 || wanted lapse-cluster-2 || wanted failover; } &&
    [[ "$("$lapsed" --helpfull 2>&1 || true)" != *redis_nodes* ]]; then
    echo "run.sh: this lapsed has no --store=redis-cluster (--redis_nodes)" >&2
    exit 2
  fi
  echo
  echo "######## Redis Cluster: 3 masters + 3 replicas"
  start_cluster
  echo "   nodes ${cluster_seeds}"
  cluster_flags=(--store=redis-cluster --redis_nodes="$cluster_seeds"
    --redis_partitions="$cluster_partitions")
  wanted lapse && run_cluster_peer lapse 0
  wanted lapse-cluster-1 && run_cluster_peer lapse-cluster-1 1
  wanted lapse-cluster-2 && run_cluster_peer lapse-cluster-2 2
  if wanted redis-classic && [[ $have_redis == 1 ]]; then
    members=$cluster_members small_members=$cluster_small_members
    run_redis_peer redis-classic "$(command -v "$redis_server")" classic "${poll_intervals##*,}" 1 0
  fi
  wanted store && run_store_bench
  if [[ $failover == yes ]] && wanted failover; then run_failover; fi
elif [[ $scenario_set == group ]]; then
  wanted lapse && run_group_peer lapse lapse
  if wanted redis-streams && [[ $have_redis == 1 ]]; then run_group_peer redis-streams redis; fi
else
  wanted lapse && run_lapse_peer lapse
  if wanted redis-classic && [[ $have_redis == 1 ]]; then
    run_redis_peer redis-classic "$(command -v "$redis_server")" classic "$poll_intervals" 1 1
  fi
  if [[ ${#durable_flags[@]} -gt 0 ]]; then
    wanted lapse-durable && { rm -rf "${work}/lapse-data"; mkdir -p "${work}/lapse-data"; run_lapse_peer lapse-durable "${durable_flags[@]}"; }
    if wanted redis-aof && [[ $have_redis == 1 ]]; then
      run_redis_peer redis-aof "$(command -v "$redis_server")" classic "${poll_intervals##*,}" 1 0 \
        "appendonly yes" "appendfsync everysec" "aof-use-rdb-preamble yes"
    fi
  elif [[ "$durable" != no ]]; then
    echo
    echo "######## lapse-durable / redis-aof: not measured: this lapsed has no --data_dir and --fsync flags"
  fi
  if wanted redis-hfe && [[ $have_redis == 1 ]]; then
    if [[ -n "$redis_hfe_server" ]]; then
      run_redis_peer redis-hfe "$redis_hfe_server" hfe "-" 1 1 "notify-keyspace-events Eh"
    else
      echo
      echo "######## redis-hfe: not measured: ${hfe_reason}"
    fi
  fi
fi

# ---- the side-by-side table ------------------------------------------------------

declare -A r=()
while read -r _ peer scenario rest; do
  for kv in $rest; do r["${peer}|${scenario}|${kv%%=*}"]="${kv#*=}"; done
done <"$results"

get() { echo "${r[$1|$2|$3]:-}"; }

# One row: LABEL SCENARIO KEY HIGHER_IS_BETTER(1|0) LAPSE_PEER then PEER... pairs
# of "peer:scenario-peer-name".
row() {
  local label=$1 scenario=$2 key=$3 higher=$4 base=$5
  shift 5
  local lv out peer pv ratio verdict
  lv="$(get "$base" "$scenario" "$key")"
  out="$(printf '%-34s %12s' "$label" "${lv:--}")"
  for peer in "$@"; do
    pv="$(get "$peer" "$scenario" "$key")"
    if [[ -z "$lv" || -z "$pv" ]]; then
      out+="$(printf ' %12s %8s' "${pv:-n/m}" "")"
      continue
    fi
    ratio="$(awk -v a="$lv" -v b="$pv" 'BEGIN { if (b == 0) print (a == 0 ? "=" : "inf"); else printf "%.2f", a / b }')"
    verdict="$(awk -v a="$lv" -v b="$pv" -v h="$higher" 'BEGIN { if (a == b) print "="; else if ((h == 1) == (a > b)) print "+"; else print "-" }')"
    out+="$(printf ' %12s %7s%s' "$pv" "$ratio" "$verdict")"
  done
  echo "$out"
}

table() {  # BASE PEER_SPEC...  (PEER_SPEC = "column-name=peer-for-put=peer-for-watch")
  local base=$1
  shift
  local header spec puts=() watches=() batch1=() sparse=()
  header="$(printf '%-34s %12s' metric "$base")"
  for spec in "$@"; do
    IFS== read -r name put watch <<<"$spec"
    header+="$(printf ' %12s %8s' "$name" "lapse/it")"
    puts+=("$put")
    watches+=("$watch")
    batch1+=("${put}-batch1")
    sparse+=("${watch}-sparse")
  done
  echo "$header"
  echo "$header" | sed 's/./-/g'
  row "put members/s (batch ${batch})" put members_per_s 1 "$base" "${puts[@]}"
  row "put p99 per RPC/batch (ms)" put rpc_p99_ms 0 "$base" "${puts[@]}"
  row "put members/s (batch 1)" put members_per_s 1 "${base}-batch1" "${batch1[@]}"
  row "put members/s (batch 1, client lib)" put members_per_s 1 "${base}-client1" "${batch1[@]}"
  row "resident bytes per member" memory bytes_per_member 0 "$base" "${puts[@]}"
  row "expiry latency p50 (ms)" expiry-latency event_p50_ms 0 "$base" "${watches[@]}"
  row "expiry latency p99 (ms)" expiry-latency event_p99_ms 0 "$base" "${watches[@]}"
  row "expiry latency p99.9 (ms)" expiry-latency event_p999_ms 0 "$base" "${watches[@]}"
  row "expiry latency max (ms)" expiry-latency event_max_ms 0 "$base" "${watches[@]}"
  row "expiry events lost (steady)" expiry-latency lost 0 "$base" "${watches[@]}"
  row "drain: all notified after (ms)" drain all_ms 0 "$base" "${watches[@]}"
  row "drain: events/s" drain events_per_s 1 "$base" "${watches[@]}"
  row "events lost (watcher reconnects)" reconnect lost 0 "$base" "${watches[@]}"
  row "sparse expiry latency p50 (ms)" expiry-latency event_p50_ms 0 "${base}-sparse" "${sparse[@]}"
  row "sparse expiry latency max (ms)" expiry-latency event_max_ms 0 "${base}-sparse" "${sparse[@]}"
}

group_table() {
  local header c
  header="$(printf '%-34s %12s' metric lapse)$(printf ' %12s %8s' redis-streams lapse/it)"
  echo "$header"
  echo "$header" | sed 's/./-/g'
  IFS=, read -r -a consumer_counts <<<"$group_consumers"
  for c in "${consumer_counts[@]}"; do
    row "burst: events/s acked, ${c} cons." group events_per_s 1 "lapse-g${c}" "redis-streams-g${c}"
  done
  for c in "${consumer_counts[@]}"; do
    row "burst: ack-deadline p99 ms, ${c} c." group ack_p99_ms 0 "lapse-g${c}" "redis-streams-g${c}"
  done
  row "rate: ack - deadline p50 (ms)" group ack_p50_ms 0 lapse-rate redis-streams-rate
  row "rate: ack - deadline p99 (ms)" group ack_p99_ms 0 lapse-rate redis-streams-rate
  row "rate: ack - deadline max (ms)" group ack_max_ms 0 lapse-rate redis-streams-rate
  row "redelivery - timeout p50 (ms)" group-redelivery redelivery_p50_ms 0 lapse-redelivery \
    redis-streams-redelivery
  row "redelivery - timeout p99 (ms)" group-redelivery redelivery_p99_ms 0 lapse-redelivery \
    redis-streams-redelivery
  row "redelivery - timeout max (ms)" group-redelivery redelivery_max_ms 0 lapse-redelivery \
    redis-streams-redelivery
  row "redelivered events (dead held)" group-redelivery redelivery_count 1 lapse-redelivery \
    redis-streams-redelivery
}

# A figure to three significant digits or so: 441256.4 -> 441256, 8.07; a
# count stays a count.
figure() {
  awk -v v="$1" 'BEGIN { if (v !~ /^-?[0-9.]+$/ || v ~ /^-?[0-9]+$/) print v;
    else if (v >= 1000) printf "%.0f", v;
    else if (v >= 100) printf "%.1f", v; else printf "%.2f", v }'
}

# cluster_row LABEL SCENARIO KEY PEER...: the figures side by side, no ratios.
cluster_row() {
  local label=$1 scenario=$2 key=$3 out peer v
  shift 3
  out="$(printf '%-38s' "$label")"
  for peer in "$@"; do
    v="$(get "$peer" "$scenario" "$key")"
    [[ -n "$v" ]] && v="$(figure "$v")"
    out+="$(printf ' %15s' "${v:-n/m}")"
  done
  echo "$out"
}

# cpu_row LABEL WHAT KEY MEMBERS PEER...: CPU microseconds per member.
cpu_row() {
  local label=$1 what=$2 key=$3 n=$4 out peer v
  shift 4
  out="$(printf '%-38s' "$label")"
  for peer in "$@"; do
    v="$(get "$peer" "cpu-${what}" "$key")"
    [[ -n "$v" ]] && v="$(awk -v s="$v" -v n="$n" 'BEGIN {printf "%.2f", s * 1e6 / n}')"
    out+="$(printf ' %15s' "${v:-n/m}")"
  done
  echo "$out"
}

cluster_table() {
  local c=(lapse lapse-cluster-1 lapse-cluster-2) rc=redis-classic
  local rp="redis-classic-poll${poll_intervals##*,}" header
  header="$(printf '%-38s %15s %15s %15s %15s' metric lapse-embedded cluster-1-lapsed \
    cluster-2-lapsed "classic-${poll_intervals##*,}")"
  echo "$header"
  echo "${header//?/-}"
  cluster_row "put members/s (batch ${batch})" put members_per_s "${c[@]}" "$rc"
  cluster_row "put p99 per RPC/batch (ms)" put rpc_p99_ms "${c[@]}" "$rc"
  cluster_row "put members/s (batch 1)" put members_per_s "${c[@]/%/-batch1}" "${rc}-batch1"
  cluster_row "put p99 (batch 1, ms)" put rpc_p99_ms "${c[@]/%/-batch1}" "${rc}-batch1"
  cluster_row "expiry latency p50 (ms)" expiry-latency event_p50_ms "${c[@]}" "$rp"
  cluster_row "expiry latency p99 (ms)" expiry-latency event_p99_ms "${c[@]}" "$rp"
  cluster_row "expiry latency p99.9 (ms)" expiry-latency event_p999_ms "${c[@]}" "$rp"
  cluster_row "expiry latency max (ms)" expiry-latency event_max_ms "${c[@]}" "$rp"
  cluster_row "expiry events lost" expiry-latency lost "${c[@]}" "$rp"
  cluster_row "drain: all notified after (ms)" drain all_ms "${c[@]}" "$rp"
  cluster_row "drain: events/s" drain events_per_s "${c[@]}" "$rp"
  cpu_row "CPU us/member, put: masters" put masters_s "$cluster_members" "${c[@]}"
  cpu_row "CPU us/member, put: Redis replicas" put redis_replicas_s "$cluster_members" "${c[@]}"
  cpu_row "CPU us/member, put: lapsed" put lapsed_s "$cluster_members" "${c[@]}"
  cpu_row "CPU us/member, batch-1 put: masters" put-batch1 masters_s "$cluster_small_members" \
    "${c[@]}"
  cpu_row "CPU us/member, batch-1 put: lapsed" put-batch1 lapsed_s "$cluster_small_members" \
    "${c[@]}"
  cpu_row "CPU us/member, drain run: masters" drain masters_s "$drain" "${c[@]}"
  cpu_row "CPU us/member, drain run: lapsed" drain lapsed_s "$drain" "${c[@]}"
  echo "   (CPU: user + system seconds of the processes during the run, over its members; a"
  echo "   drain run also loads its members. Redis classic's CPU is not measured.)"
  echo
  local s=("store-p0-b${batch}" store-p0-b1 "store-all-b${batch}")
  header="$(printf '%-38s %15s %15s %15s' "store puts (lapse-cluster-bench)" "1 master, b${batch}" \
    "1 master, b1" "3 masters, b${batch}")"
  echo "$header"
  echo "${header//?/-}"
  cluster_row "members/s" put members_per_s "${s[@]}"
  cluster_row "call p99 (ms)" put rpc_p99_ms "${s[@]}"
  cluster_row "master CPU us/member" cpu master_us_per_member "${s[@]}"
  cluster_row "master CPU us/call" cpu master_us_per_call "${s[@]}"
  cluster_row "store client CPU us/member" cpu client_us_per_member "${s[@]}"
  cluster_row "errors" put errors "${s[@]}"
  if [[ $failover == yes ]] && wanted failover; then
    local f=lapse-cluster-2-failover
    echo
    echo "== Failover: a master SIGKILLed mid-run, 2 lapsed (cluster-node-timeout ${cluster_node_timeout} ms)"
    cluster_row "put run: promoted after (ms)" failover promoted_ms "${f}-put"
    cluster_row "put run: replica back after (ms)" failover replica_linked_ms "${f}-put"
    cluster_row "put run: max RPC latency (ms)" put rpc_max_ms "$f"
    cluster_row "put run: members/s overall" put members_per_s "$f"
    cluster_row "put run: RPC errors" put errors "$f"
    cluster_row "expiry run: promoted after (ms)" failover promoted_ms "${f}-expiry"
    cluster_row "expiry run: replica back after (ms)" failover replica_linked_ms "${f}-expiry"
    cluster_row "expiry run: latency p99 (ms)" expiry-latency event_p99_ms "$f"
    cluster_row "expiry run: latency max (ms)" expiry-latency event_max_ms "$f"
    cluster_row "expiry run: events lost" expiry-latency lost "$f"
    cluster_row "expiry run: duplicates" expiry-latency duplicates "$f"
  fi
}

if [[ $scenario_set == cluster ]]; then
  echo
  echo "== Redis Cluster store side by side (n/m: not measured)"
  cluster_table
elif [[ $scenario_set == group ]]; then
  echo
  echo "== Consumer groups (lapse/it = lapse / peer; + lapse ahead, - lapse behind; n/m not measured)"
  echo "   burst ${group_members} sharing a deadline; rate ${group_members} over ${group_spread}, 3 consumers;"
  echo "   redelivery: ${group_redelivery_members} in a burst, 3 consumers, one dies holding ${max_in_flight};"
  echo "   visibility timeout ${visibility_timeout} (Redis: XAUTOCLAIM min-idle, every ${claim_interval});"
  echo "   each member acked exactly once in every run (else run.sh exits 1)."
  group_table
else
  echo
  echo "== Side by side (lapse/it = lapse / peer; + lapse ahead, - lapse behind; n/m not measured)"
  specs=()
  IFS=, read -r -a intervals_list <<<"$poll_intervals"
  for p in "${intervals_list[@]}"; do specs+=("classic-${p}=redis-classic=redis-classic-poll${p}"); done
  specs+=("native-hfe=redis-hfe=redis-hfe")
  table lapse "${specs[@]}"
  if [[ ${#durable_flags[@]} -gt 0 ]]; then
    echo
    echo "== Durable (lapse --fsync=everysec vs Redis appendfsync everysec, classic recipe)"
    table lapse-durable "aof-${poll_intervals##*,}=redis-aof=redis-aof-poll${poll_intervals##*,}"
  fi
  if [[ -n "$hfe_reason" ]]; then echo "   native-hfe: not measured: ${hfe_reason}"; fi
  echo
  echo "   Notifications carry: lapse: collection, key, value (include_values), deadline,"
  echo "   expired_at, sequence; classic: whatever the poller publishes (here collection, key,"
  echo "   value, deadline); native-hfe: only the hash (collection) name."
fi

if [[ ${#lapse_failed[@]} -gt 0 ]]; then
  echo
  echo "run.sh: lapse scenarios with errors or lost events:"
  printf '  %s\n' "${lapse_failed[@]}"
  exit 1
fi
