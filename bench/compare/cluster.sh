# shellcheck shell=bash disable=SC2034,SC2154  # run.sh's variables, set and read there
# Sourced by bench/compare/run.sh for --scenario=cluster: a Redis Cluster of
# 3 masters + 3 replicas from Debian's redis-server (the recipe of
# testing/redis_cluster.cc: AOF on, a short cluster-node-timeout, created with
# redis-cli --cluster create), the CPU time its processes spend, and a master
# killed mid-run.
#
#   start_cluster                   # sets cluster_ports, cluster_seeds
#   flush_cluster                   # FLUSHALL on every master
#   cpu_seconds PID...              # user + system CPU of those processes
#   cluster_pids master|replica     # the PIDs of the nodes in that role now
#   kill_master_later DELAY FILE LABEL   # in the background: see below
#   rejoin_killed FILE              # after the run: see below
#
# Uses run.sh's start_redis (which it calls with ports in [10000, 15000), so
# that each node's bus port, port + 10000, is below run.sh's single servers),
# server_pid, server_port and server_pids (so run.sh's EXIT trap stops every
# node by PID), $work and $redis_server.

cluster_ports=()
cluster_node_pids=()
cluster_seeds=

# Node i's port, PID and directory are cluster_ports[i],
# cluster_node_pids[i] and ${work}/redis-<port>.
start_cluster() {
  local i redis_port_low=10000 redis_port_high=15000 seeds=() port ok
  for i in 0 1 2 3 4 5; do
    start_redis "$(command -v "$redis_server")" "appendonly yes" "appendfsync everysec" \
      "cluster-enabled yes" "cluster-config-file nodes.conf" \
      "cluster-node-timeout ${cluster_node_timeout}"
    cluster_ports+=("$server_port")
    cluster_node_pids+=("$server_pid")
    seeds+=("127.0.0.1:${server_port}")
  done
  cluster_seeds="$(IFS=,; echo "${seeds[*]}")"
  redis-cli --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes >"${work}/cluster-create.log" 2>&1 || {
    echo "run.sh: redis-cli --cluster create failed: $(tail -5 "${work}/cluster-create.log")" >&2
    exit 1
  }
  await_cluster || { echo "run.sh: the Redis Cluster did not become ready" >&2; exit 1; }
}

# Every node says cluster_state:ok with 3 masters, and every replica's link to
# its master is up; false after 60 s.
await_cluster() {
  local i port ok info
  for i in $(seq 600); do
    ok=1
    for port in "${cluster_ports[@]}"; do
      info="$(redis-cli -p "$port" cluster info 2>/dev/null | tr -d '\r')"
      grep -q '^cluster_state:ok' <<<"$info" && grep -q '^cluster_size:3' <<<"$info" || ok=0
      info="$(redis-cli -p "$port" info replication 2>/dev/null | tr -d '\r')"
      grep -q '^role:master' <<<"$info" || grep -q '^master_link_status:up' <<<"$info" || ok=0
    done
    [[ $ok == 1 ]] && return 0
    sleep 0.1
  done
  return 1
}

role_of() { redis-cli -p "$1" role 2>/dev/null | head -1; }

cluster_pids() {  # master|replica
  local want=$1 i role
  for i in "${!cluster_ports[@]}"; do
    role="$(role_of "${cluster_ports[$i]}")"
    if [[ ($want == master && $role == master) || ($want == replica && $role == slave) ]]; then
      echo "${cluster_node_pids[$i]}"
    fi
  done
}

flush_cluster() {
  local port
  for port in "${cluster_ports[@]}"; do
    [[ "$(role_of "$port")" == master ]] && redis-cli -p "$port" flushall >/dev/null
  done
  await_cluster || { echo "run.sh: the Redis Cluster is not ready after FLUSHALL" >&2; exit 1; }
}

cpu_seconds() {  # PID...: fields 14 and 15 of /proc/PID/stat, after the command name
  local pid ticks=0 t
  for pid in "$@"; do
    t="$(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/${pid}/stat" 2>/dev/null || echo 0)"
    ticks=$((ticks + t))
  done
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}'
}

# kill_master_later DELAY FILE LABEL: runs in the background. After DELAY seconds
# SIGKILLs the first master, waits for its replica to be promoted, then
# starts the killed node again on its port and directory (it keeps its
# nodes.conf, so it rejoins as a replica of the promoted one — a supervisor
# restarting it) and waits until its replication link is up. Writes to FILE
# "<index> <new pid>" on the first line, then a RESULT line: ms from the kill
# to the promotion and to the link, as LABEL's. The caller reads FILE afterwards
# (rejoin_killed) so that run.sh's trap stops the restarted node.
kill_master_later() {
  local delay=$1 file=$2 label=$3 i victim='' replica_port='' start promoted='' linked='' conf
  sleep "$delay"
  for i in "${!cluster_ports[@]}"; do
    if [[ "$(role_of "${cluster_ports[$i]}")" == master ]]; then victim=$i; break; fi
  done
  [[ -n "$victim" ]] || return 0
  replica_port="$(redis-cli -p "${cluster_ports[$victim]}" info replication | tr -d '\r' |
    sed -n 's/^slave0:.*port=\([0-9]*\),.*/\1/p')"
  start=$(date +%s%3N)
  kill -KILL "${cluster_node_pids[$victim]}"
  for i in $(seq 600); do
    if [[ "$(role_of "$replica_port")" == master ]]; then promoted=$(($(date +%s%3N) - start)); break; fi
    sleep 0.02
  done
  conf="${work}/redis-${cluster_ports[$victim]}/redis.conf"
  "$(command -v "$redis_server")" "$conf" >/dev/null 2>&1 &
  echo "$victim $!" >"$file"
  for i in $(seq 1500); do
    if redis-cli -p "${cluster_ports[$victim]}" info replication 2>/dev/null | tr -d '\r' |
      grep -q '^master_link_status:up'; then
      linked=$(($(date +%s%3N) - start))
      break
    fi
    sleep 0.02
  done
  echo "RESULT ${label} failover killed_port=${cluster_ports[$victim]} promoted_ms=${promoted:-never} replica_linked_ms=${linked:-never}" >>"$file"
}

# rejoin_killed FILE: adopts the node kill_master_later started again.
rejoin_killed() {
  local file=$1 index pid
  [[ -s "$file" ]] || return 0
  read -r index pid <"$file"
  cluster_node_pids[index]=$pid
  server_pids+=("$pid")
  grep '^RESULT ' "$file" | tee -a "$results"
  await_cluster || { echo "run.sh: the Redis Cluster did not recover from the failover" >&2; exit 1; }
}
