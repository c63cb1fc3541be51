#!/bin/bash
# A single-node Slurm cluster on this machine, for testing `npusim sweep --slurm` for real: munged,
# slurmctld and slurmd from Debian's slurm-wlm and munge packages, all state in one folder, on ports of
# their own, with ProctrackType=proctrack/linuxproc and TaskPlugin=task/none (no cgroups needed).
#
#   slurm_test_cluster.sh start DIR      start the daemons; prints the SLURM_CONF to export
#   slurm_test_cluster.sh stop DIR       stop the daemons started by `start DIR` (by their recorded pids)
#   slurm_test_cluster.sh test NPUSIM SWEEP.yaml [DIR]
#                                        start a cluster, run SWEEP locally and through Slurm, check
#                                        that the merged results equal the local ones, stop the cluster
#
# Exit status: 0 success, 1 failure, 77 when the cluster cannot be started here (the reason is printed;
# ctest treats 77 as skipped).
set -uo pipefail

SKIP=77
die() { echo "slurm_test_cluster: $*" >&2; exit 1; }
skip() { echo "slurm_test_cluster: SKIPPED: $*" >&2; exit $SKIP; }

# A free TCP port near $1 (the daemons of concurrent test runs must not collide).
free_port() {
  local p=$1
  while (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}

start() {
  local dir=$1
  for b in munged mungekey slurmctld slurmd sbatch sinfo; do
    command -v "$b" >/dev/null || [[ -x /usr/sbin/$b ]] || skip "$b is not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
  done
  [[ $(id -u) == 0 ]] || skip "slurmd must run as root to start jobs as their user, and this is uid $(id -u)"
  export PATH=/usr/sbin:$PATH
  mkdir -p "$dir"/{state,spool,munge,log}
  dir=$(cd "$dir" && pwd)
  chmod 700 "$dir/munge"

  # munge: a fresh key and a socket of our own, so a system munged (if any) is left alone.
  rm -f "$dir/munge/munge.key"
  mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1 \
    || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munge.seed" --log-file="$dir/log/munged.log" \
    >"$dir/log/munged.out" 2>&1 || skip "munged would not start: $(tail -n 3 "$dir/log/munged.log" "$dir/log/munged.out" 2>/dev/null | tr '\n' ' ')"
  for _ in $(seq 50); do [[ -S $dir/munge/munge.sock ]] && break; sleep 0.1; done
  [[ -S $dir/munge/munge.sock ]] || { stop "$dir"; skip "munged started but made no socket"; }

  local host ctld_port slurmd_port cpus
  host=$(hostname -s)
  ctld_port=$(free_port $((20000 + $$ % 10000)))
  slurmd_port=$(free_port $((ctld_port + 1)))
  cpus=$(nproc)
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm_test_cluster.sh: a single-node test cluster.
ClusterName=npusimtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.started"
  slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/slurmd.started"
  local state=""
  for _ in $(seq 150); do
    state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1)
    [[ $state == idle* ]] && break
    if ! kill -0 "$(cat "$dir/slurmctld.started")" 2>/dev/null || ! kill -0 "$(cat "$dir/slurmd.started")" 2>/dev/null; then
      local why
      why=$(tail -n 5 "$dir"/log/slurm*.out "$dir"/log/slurm*.log 2>/dev/null | tr '\n' ' ')
      stop "$dir"
      skip "a Slurm daemon exited at start: $why"
    fi
    sleep 0.2
  done
  if [[ $state != idle* ]]; then
    local why
    why=$(tail -n 5 "$dir"/log/slurm*.log 2>/dev/null | tr '\n' ' ')
    stop "$dir"
    die "the node never became idle (state '$state'): $why"
  fi
  echo "export SLURM_CONF=$SLURM_CONF"
}

stop() {
  local dir=$1 f pid
  # slurmd first (it reports to slurmctld), munged last; each by the pid we recorded.
  for f in slurmd.started slurmctld.started; do
    [[ -f $dir/$f ]] || continue
    pid=$(cat "$dir/$f")
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    rm -f "$dir/$f"
  done
  if [[ -f $dir/munge/munged.pid ]]; then
    pid=$(cat "$dir/munge/munged.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/munge/munged.pid"
  fi
  return 0
}

run_test() {
  local npusim=$1 sweep=$2 dir=${3:-}
  [[ -x $npusim ]] || die "no npusim binary at $npusim"
  [[ -f $sweep ]] || die "no sweep file $sweep"
  local own=0
  if [[ -z $dir ]]; then dir=$(mktemp -d /tmp/npusim-slurm.XXXXXX); own=1; fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local conf
  conf=$(start "$dir/cluster") || exit $?
  eval "$conf"
  trap 'stop "$dir/cluster"' EXIT

  "$npusim" sweep "$sweep" -j 2 -o "$dir/local" >"$dir/local.log" 2>&1 || die "local sweep failed: $(tail -n 5 "$dir/local.log")"
  timeout 600 "$npusim" sweep "$sweep" --slurm --wait -o "$dir/slurm" >"$dir/slurm.log" 2>&1 \
    || die "Slurm sweep failed: $(tail -n 5 "$dir/slurm.log"; tail -n 5 "$dir"/slurm/slurm/*.log 2>/dev/null)"
  local f
  for f in results.csv results.jsonl; do
    [[ -s $dir/slurm/$f ]] || die "the Slurm run wrote no $f"
    cmp -s "$dir/local/$f" "$dir/slurm/$f" || die "$f differs between the local and the Slurm run: $(diff "$dir/local/$f" "$dir/slurm/$f" | head -n 5)"
  done
  local tasks rows
  tasks=$(ls "$dir"/slurm/shards/*.jsonl 2>/dev/null | wc -l)
  rows=$(($(wc -l <"$dir/slurm/results.csv") - 1))
  ((tasks > 1)) || die "expected several array tasks, found $tasks shard files"
  echo "slurm_test_cluster: $rows points through $tasks array tasks; merged results equal the local run"
  stop "$dir/cluster"
  trap - EXIT
  ((own)) && rm -rf "$dir"
  return 0
}

case ${1:-} in
  start) [[ $# == 2 ]] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [[ $# == 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
  test) [[ $# -ge 3 ]] || die "usage: $0 test NPUSIM SWEEP.yaml [DIR]"; run_test "$2" "$3" "${4:-}" ;;
  *) echo "usage: $0 start DIR | stop DIR | test NPUSIM SWEEP.yaml [DIR]" >&2; exit 2 ;;
esac
