#!/usr/bin/env bash
# scripts/localcluster.sh — a real Slurm cluster of N simulated hosts on this one machine,
# for tests and for measuring partrain across "nodes" linked by a network of a chosen rate.
#
# Usage: scripts/localcluster.sh [--dir DIR] [--name NAME] COMMAND
#   up N             start N hosts node1..nodeN (each its own network and UTS namespace, so
#                    its own hostname and address), slurmctld on host "ctl", one munged;
#                    a second `up` with the same N does nothing, another N restarts it
#   down             stop every daemon, delete the namespaces and DIR (safe to repeat); only a
#                    DIR that holds this script's marker with this NAME (DIR/.localcluster)
#   status           the hosts, their addresses, sinfo's view
#   exec HOST CMD... run CMD inside HOST's namespaces (HOST: node1..nodeN or ctl) with
#                    SLURM_CONF set and the cluster's MPI settings exported, e.g.
#                      scripts/localcluster.sh exec ctl srun --mpi=pmix -N 3 hostname
#                      scripts/localcluster.sh exec ctl sbatch -N 3 scripts/slurm/mpi.sbatch
#   rate RATE|off    shape both ends of every veth to RATE (tc tbf; e.g. 1gbit, 10gbit,
#                    25gbit); off removes it. Bandwidth only: this kernel has no netem
#                    (sch_netem), so no delay or loss can be added; the links' latency is the
#                    veths' own (microseconds)
#   counters         each bridge port's rx/tx bytes (rx: bytes the host sent into the network)
#   cpu-usage        nanoseconds of CPU the hosts' processes used so far (slurmd and all it
#                    started, ranks included: a cgroup accounts them); benchmarks subtract it
#                    from the machine's busy time, since those ranks are not their children
#   hostfile [R]     print an OpenMPI hostfile of the hosts, R slots each (default 1)
#   rsh-agent        print the path of the rsh agent with which `mpirun --hostfile` starts its
#                    daemons inside the hosts' namespaces (exec sets OMPI_MCA_plm_rsh_agent to it):
#                      scripts/localcluster.sh hostfile 2 >hosts
#                      scripts/localcluster.sh exec node1 scripts/mpirun.sh --hostfile hosts 6 mpi/mpi
# Network: 10.250.0.0/24, a subnet that exists only inside the namespaces (nothing routed
#   to or from the host's network): nodeK = 10.250.0.K, ctl = 10.250.0.254, joined by veth
#   pairs to a bridge in its own namespace. Namespaces: NAME-br, NAME-ctl, NAME-node1..
#   (--name, or PARTRAIN_CLUSTER_NAME, default partrain; clusters of other names and DIRs
#   can run side by side, each its own isolated 10.250.0.0/24; tests/test_cluster.sh does).
# CPUs: each host is given all $(nproc) CPUs in slurm.conf, so the hosts share this
#   machine's cores, and exec's environment sets OMPI_MCA_mpi_yield_when_idle=1 whenever
#   N x CPUs exceed them (N >= 2): a rank that spins while it waits in MPI would otherwise
#   starve the ranks of the other "hosts".
# Files: everything (munge key and socket, slurm.conf, state, spools, logs, TmpFS=DIR/%n)
#   under DIR (--dir, or PARTRAIN_CLUSTER_DIR, default /tmp/partrain-cluster). DIR/.localcluster
#   names the cluster that made DIR; /run/partrain-localcluster/NAME names the DIR of the
#   cluster NAME. `up` refuses (exit 2) a DIR that exists without that marker or with
#   another NAME's, and a NAME whose namespaces belong to another DIR; `down` refuses the
#   same, so it never deletes a directory or kills daemons it did not make.
# Binding: TaskPlugin=task/affinity, as at a site: a step's task is bound to its CPUs
#   (srun --cpus-per-task), so a rank's threads squeezed onto one CPU show.
# Needs root, ip/tc (iproute2), unshare/nsenter (util-linux), and the packages slurmctld
# slurmd slurm-client munge slurm-wlm-basic-plugins (scripts/setup.sh test installs them).
# Exit status: 0; 1 when a step fails (its log named); 2 on a usage error or a missing
# prerequisite, with the reason on stderr.
set -euo pipefail
export LC_ALL=C

die() { echo "localcluster: $*" >&2; exit 2; }
fail() { echo "localcluster: $*" >&2; exit 1; }
dir=${PARTRAIN_CLUSTER_DIR:-/tmp/partrain-cluster} PFX=${PARTRAIN_CLUSTER_NAME:-partrain}
while [ $# -gt 0 ]; do
  case "$1" in
    --name) [ $# -ge 2 ] && [ -n "$2" ] || die "--name needs a value"; PFX=$2; shift 2 ;;
    --dir) [ $# -ge 2 ] && [ -n "$2" ] || die "--dir needs a value"; dir=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[[ $PFX =~ ^[a-z][a-z0-9-]{0,15}$ ]] || die "--name: '$PFX' is not 1-16 of a-z, 0-9, -"
[ $# -ge 1 ] || die "usage: scripts/localcluster.sh [--dir DIR] [--name NAME] up N|down|status|exec HOST CMD...|rate RATE|off|counters|hostfile [R]|rsh-agent (see --help)"
cmd=$1; shift
case "$dir" in /*) ;; *) dir=$PWD/$dir ;; esac
NET=10.250.0 BR=$PFX-br
SBIN=${PARTRAIN_SLURM_SBIN:-/usr/sbin}

# prereqs: every tool and package the cluster needs, else exit 2 naming what is missing
prereqs() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, bridge, daemons)"
  local t miss=()
  for t in ip tc unshare nsenter; do command -v "$t" >/dev/null || miss+=("$t"); done
  [ ${#miss[@]} = 0 ] || die "missing ${miss[*]} (apt-get install iproute2 util-linux)"
  for t in "$SBIN/slurmctld" "$SBIN/slurmd" "$SBIN/munged"; do [ -x "$t" ] || miss+=("$(basename "$t")"); done
  command -v sbatch >/dev/null || miss+=(slurm-client)
  [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || ls /usr/lib/*/slurm*/mpi_pmix.so >/dev/null 2>&1 ||
    miss+=(slurm-wlm-basic-plugins)
  [ ${#miss[@]} = 0 ] || die "missing ${miss[*]} (apt-get install slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins)"
}
nodes() { cat "$dir/nodes" 2>/dev/null || echo 0; }
# ownership: DIR's marker names the cluster that made it; REG names the DIR of cluster PFX
MARK=$dir/.localcluster REG=/run/partrain-localcluster/$PFX
# owned_or_die WHAT: exit 2 unless DIR is absent or made by this script for NAME, and NAME's
# namespaces are absent or DIR's
owned_or_die() {
  if [ -e "$dir" ] || [ -L "$dir" ]; then
    [ -d "$dir" ] && [ ! -L "$dir" ] && [ -f "$MARK" ] ||
      die "$1: $dir exists and was not made by scripts/localcluster.sh (no $MARK): not touched"
    [ "$(cat "$MARK")" = "partrain-localcluster $PFX" ] ||
      die "$1: $dir holds another cluster ($(cat "$MARK")): give its --name or another --dir"
  fi
  if [ -f "$REG" ] && [ "$(cat "$REG")" != "$dir" ]; then
    die "$1: the cluster '$PFX' runs from $(cat "$REG"): give that --dir or another --name"
  fi
  if [ ! -f "$REG" ] && [ -n "$(our_netns)" ] && [ ! -f "$MARK" ]; then
    die "$1: namespaces $PFX-* exist but no cluster '$PFX' is recorded: not touched (ip netns list)"
  fi
}
ns_of() { case "$1" in ctl) echo $PFX-ctl ;; node[1-9]*) echo "$PFX-$1" ;; *) return 1 ;; esac; }
addr_of() { case "$1" in ctl) echo $NET.254 ;; node*) echo "$NET.${1#node}" ;; esac; }
# at HOST CMD...: run CMD in HOST's network and UTS namespaces (nsenter, not `ip netns exec`,
# which remounts /sys: slurmd then fails to find its cgroups)
at() { local h=$1; shift; nsenter --net=/run/netns/"$(ns_of "$h")" --uts="$dir/uts/$h" -- "$@"; }
# the environment every command run in the cluster gets (exec, the rsh agent)
cluster_env() {
  local n cpus
  n=$(nodes) cpus=$(nproc)
  echo "SLURM_CONF=$dir/slurm.conf"
  echo "OMPI_MCA_btl_tcp_if_include=$NET.0/24"
  echo "OMPI_MCA_oob_tcp_if_include=$NET.0/24"
  echo "OMPI_MCA_plm_rsh_agent=$dir/rsh-agent"
  echo "OMPI_ALLOW_RUN_AS_ROOT=1"
  echo "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
  [ $((n * cpus)) -le "$(nproc)" ] || echo "OMPI_MCA_mpi_yield_when_idle=1"
}
our_netns() { ip netns list | awk -v p="$PFX" '$1 ~ "^" p "-(br|ctl|node[0-9]+)$" { print $1 }'; }
hosts() { local i; echo ctl; for i in $(seq 1 "$(nodes)"); do echo node$i; done; }

write_conf() {   # N: slurm.conf for N nodes
  local n=$1 cpus
  cpus=$(nproc)
  cat >"$dir/slurm.conf" <<EOF
# written by scripts/localcluster.sh: $n simulated hosts on one machine (see docs/cluster.md)
ClusterName=partrain
SlurmctldHost=ctl($NET.254)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/ctl/state
SlurmctldPidFile=$dir/ctl/slurmctld.pid
SlurmctldLogFile=$dir/ctl/slurmctld.log
SlurmdSpoolDir=$dir/%n/spool
SlurmdPidFile=$dir/%n/slurmd.pid
SlurmdLogFile=$dir/%n/slurmd.log
TmpFS=$dir/%n/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
MinJobAge=30
EOF
  local i
  for i in $(seq 1 "$n"); do echo "NodeName=node$i NodeAddr=$NET.$i CPUs=$cpus State=UNKNOWN" >>"$dir/slurm.conf"; done
  echo "PartitionName=main Nodes=node[1-$n] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >>"$dir/slurm.conf"
}

up() {
  local n=$1 h i t0 ns
  t0=$(date +%s.%N)
  if [ "$(nodes)" = "$n" ] && alive; then echo "localcluster: $n hosts already up ($dir)"; return 0; fi
  owned_or_die up
  if [ -e "$dir" ] || [ -n "$(our_netns)" ]; then down >/dev/null; fi
  mkdir -p "$(dirname "$dir")" && mkdir "$dir" || fail "cannot create $dir"
  echo "partrain-localcluster $PFX" >"$MARK"
  mkdir -p /run/partrain-localcluster && echo "$dir" >"$REG"
  mkdir -p "$dir"/{munge,ctl/state,uts}
  chmod 700 "$dir/munge"
  echo "$n" >"$dir/nodes"
  # one munged, with its own key and socket (there is no systemd here to start the system's)
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"; chmod 400 "$dir/munge/munge.key"
  "$SBIN/munged" --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" ||
    fail "munged did not start: see $dir/munge/munged.log"
  write_conf "$n"
  # mpirun's rsh agent (OMPI_MCA_plm_rsh_agent in exec's environment): "AGENT HOST CMD" runs
  # CMD (mpirun's orted) in HOST's namespaces, as ssh would on a real cluster
  cat >"$dir/rsh-agent" <<EOF
#!/bin/sh
# written by scripts/localcluster.sh: mpirun's rsh agent for the simulated hosts
h=\$1; shift
exec nsenter --net=/run/netns/$PFX-\$h --uts=$dir/uts/\$h -- sh -c "\$*"
EOF
  chmod +x "$dir/rsh-agent"
  # the network: a bridge in its own namespace, one veth pair per host
  ip netns add $BR
  ip -n $BR link add br0 type bridge
  ip -n $BR link set lo up
  ip -n $BR link set br0 up
  # each host's namespaces and daemon set up in parallel (bring-up time is mostly these
  # commands' start-up)
  local pids=()
  for h in $(hosts); do host_up "$h" & pids+=($!); done
  for i in "${pids[@]}"; do wait "$i" || fail "setting up a host failed (see above; logs in $dir)"; done
  # ready when sinfo sees every node idle
  for i in $(seq 1 300); do
    [ "$(at ctl env SLURM_CONF="$dir/slurm.conf" sinfo -h -t idle -o '%D' 2>/dev/null | head -n 1)" = "$n" ] && break
    sleep 0.1
  done
  [ "$i" -lt 300 ] || fail "the nodes did not become idle within 30 s: see $dir/ctl/slurmctld.log and $dir/node*/slurmd.log"
  echo "localcluster: $n hosts up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s ($dir, $NET.0/24)"
}

host_up() {   # HOST: its namespace, veth to the bridge, hostname, daemon (slurmctld on ctl)
  local h=$1 ns
  ns=$(ns_of "$h")
  ip netns add "$ns"
  ip link add "p-$h" netns $BR type veth peer name eth0 netns "$ns"
  ip -n $BR link set "p-$h" master br0 up
  ip -n "$ns" addr add "$(addr_of "$h")/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  # its own hostname: a UTS namespace kept by a bind mount of it on DIR/uts/HOST
  mkdir -p "$dir/$h/spool" "$dir/$h/tmp"
  touch "$dir/uts/$h"
  unshare --uts="$dir/uts/$h" hostname "$h"
  if [ "$h" = ctl ]; then
    at ctl "$SBIN/slurmctld" -c -f "$dir/slurm.conf" || fail "slurmctld did not start: see $dir/ctl/slurmctld.log"
  else
    at "$h" "$SBIN/slurmd" -f "$dir/slurm.conf" || fail "slurmd on $h did not start: see $dir/$h/slurmd.log"
    # its CPU time (and that of every job step it forks) is accounted in the cluster's cgroup
    local i
    for i in $(seq 1 50); do [ -s "$dir/$h/slurmd.pid" ] && break; sleep 0.05; done
    [ -z "$(cgroup_dir)" ] || [ ! -s "$dir/$h/slurmd.pid" ] || echo "$(cat "$dir/$h/slurmd.pid")" >>"$(cgroup_dir)/cgroup.procs" || true
  fi
}

# cgroup_dir: the cgroup that accounts the hosts' CPU time (cgroup v1 cpuacct or v2),
# created on first use; empty when neither can be made here
cgroup_dir() {
  local d
  if [ -d /sys/fs/cgroup/cpuacct ]; then d=/sys/fs/cgroup/cpuacct/partrain-$PFX        # v1
  elif [ -e /sys/fs/cgroup/cgroup.controllers ]; then d=/sys/fs/cgroup/partrain-$PFX  # v2
  else return 0; fi
  # mkdir -p: the hosts come up in parallel, and a second mkdir must not fail
  mkdir -p "$d" 2>/dev/null && [ -w "$d/cgroup.procs" ] && echo "$d"
  return 0
}
# cpu_ns: nanoseconds of CPU used so far by the hosts' processes (slurmd, job steps, ranks)
cpu_ns() {
  local d; d=$(cgroup_dir)
  if [ -r "$d/cpuacct.usage" ]; then cat "$d/cpuacct.usage"
  elif [ -r "$d/cpu.stat" ]; then awk '$1 == "usage_usec" { printf "%d000\n", $2 }' "$d/cpu.stat"
  else die "cpu-usage: no cgroup accounts the hosts' CPU time here (cgroup v1 cpuacct or v2 needed)"; fi
}

alive() {   # every daemon of the cluster runs
  local f i
  for f in "$dir/munge/munged.pid" "$dir/ctl/slurmctld.pid" $(for i in $(seq 1 "$(nodes)"); do echo "$dir/node$i/slurmd.pid"; done); do
    [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null || return 1
  done
}

down() {
  local f left ns
  owned_or_die down
  # SIGKILL at once: DIR, with every state the daemons would save, is deleted anyway (on
  # SIGTERM they take ~2 s to exit)
  for f in "$dir"/node*/slurmd.pid "$dir/ctl/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  # whatever is left in the hosts' namespaces (job steps: slurmstepd and its tasks) goes too
  for ns in $(our_netns); do
    left=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$left" ] || kill -9 $left 2>/dev/null || true
    ip netns delete "$ns" 2>/dev/null || true
  done
  for f in "$dir"/uts/*; do [ -e "$f" ] && umount "$f" 2>/dev/null || true; done
  [ ! -f "$MARK" ] || rm -rf "$dir"
  rm -f "$REG"
  local cg i; cg=$(cgroup_dir)
  for i in 1 2 3 4 5; do [ -z "$cg" ] || rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
  echo "localcluster: down"
}

case "$cmd" in
  up)
    [ $# = 1 ] && [[ $1 =~ ^[1-9][0-9]{0,2}$ ]] && [ "$1" -le 253 ] || die "up needs N, the number of hosts (1..253), got '${1:-}'"
    prereqs; up "$1" ;;
  cpu-usage) [ $# = 0 ] || die "cpu-usage takes no arguments"; cpu_ns ;;
  down) [ $# = 0 ] || die "down takes no arguments"; [ "$(id -u)" = 0 ] || die "needs root"; down ;;
  status)
    alive || { echo "localcluster: not up ($dir)"; exit 1; }
    for h in $(hosts); do echo "$h $(addr_of "$h") netns $(ns_of "$h")"; done
    at ctl env SLURM_CONF="$dir/slurm.conf" sinfo ;;
  exec)
    [ $# -ge 2 ] || die "exec needs HOST and a command"
    ns_of "$1" >/dev/null && [ -e "$dir/uts/$1" ] || die "exec: no host '$1' (up? hosts: $(hosts | tr '\n' ' '))"
    h=$1; shift
    mapfile -t envs < <(cluster_env)
    at "$h" env "${envs[@]}" "$@" ;;
  rate)
    [ $# = 1 ] || die "rate needs RATE (e.g. 10gbit) or off"
    RATE=$1
    if [ "$RATE" != off ]; then
      [[ $RATE =~ ^([1-9][0-9]*)(kbit|mbit|gbit)$ ]] || die "rate: '$RATE' is not NUMBER followed by kbit, mbit or gbit, or off"
      num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
      case $unit in kbit) bits=$((num * 1000)) ;; mbit) bits=$((num * 1000000)) ;; gbit) bits=$((num * 1000000000)) ;; esac
      # the bucket: 200 us at RATE, at least 128 KiB (a GSO segment of 64 KiB must fit, and
      # less than two of them does not reach the rate). Small on purpose: a link idle for a
      # while would otherwise send a whole bucket at the veth's speed, and a message's time
      # would depend on the traffic before it (reduce then bcast reuse each other's idle link)
      burst=$(( bits / 8 / 5000 )); [ $burst -ge 131072 ] || burst=131072
    fi
    alive || die "the cluster is not up"
    for h in $(hosts); do
      for end in "$BR p-$h" "$(ns_of "$h") eth0"; do
        read -r ns dev <<<"$end"
        if [ "$RATE" = off ]; then tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
        else tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$RATE" burst "$burst" latency 50ms ||
          fail "tc refused rate $RATE on $dev in $ns"
        fi
      done
    done
    echo "localcluster: links $([ "$RATE" = off ] && echo unshaped || echo "at $RATE (tbf, burst $burst B)")" ;;
  counters)
    alive || die "the cluster is not up"
    # "port host rx_bytes tx_bytes": rx is what the host sent into the network, tx what it got
    echo "port host rx_bytes tx_bytes"
    ip -n $BR -s -o link show master br0 | awk '{ name = $2; sub(/@.*/, "", name); sub(/:$/, "", name)
      for (i = 1; i <= NF; i++) { if ($i == "RX:") rx = $(i + 8); if ($i == "TX:") tx = $(i + 8) }
      h = name; sub(/^p-/, "", h); print name, h, rx, tx }' ;;
  hostfile)
    r=${1:-1}; [[ $r =~ ^[1-9][0-9]*$ ]] || die "hostfile: R must be a positive integer, got '$r'"
    alive || die "the cluster is not up"
    for i in $(seq 1 "$(nodes)"); do echo "node$i slots=$r"; done ;;
  rsh-agent) echo "$dir/rsh-agent" ;;
  *) die "unknown command '$cmd' (see --help)" ;;
esac
