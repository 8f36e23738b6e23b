#!/usr/bin/env bash
# A single-node SLURM cluster on this machine for the cluster tests (tests/cluster, pytest -m cluster):
# Debian's slurm-wlm (munged, slurmctld and slurmd on localhost, no cgroups: proctrack/linuxproc,
# task/none, no accounting database), installed with apt-get where missing. As root:
#   .ci/slurm.sh start    install if needed, write /etc/slurm/slurm.conf, start the daemons, wait
#                         until `sinfo` shows the node idle (exit 1 with the daemons' logs if not)
#   .ci/slurm.sh stop     stop the daemons this script started
# An existing /etc/slurm/slurm.conf that this script did not write is left alone (exit 1).
set -euo pipefail
STATE=/var/lib/plmbench-slurm        # spool directories, pid files and logs
CONF=/etc/slurm/slurm.conf
MARK="# written by plmbench .ci/slurm.sh"

stop() {
  for pidfile in "$STATE"/slurmd.pid "$STATE"/slurmctld.pid "$STATE"/munged.pid; do
    if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; rm -f "$pidfile"; fi
  done
}

start() {
  [ "$(id -u)" = 0 ] || { echo "slurm.sh: run as root (it installs packages and starts daemons)" >&2; exit 1; }
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge
  fi
  if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    echo "slurm.sh: $CONF exists and is not ours; not touching a real cluster's configuration" >&2; exit 1
  fi
  stop
  mkdir -p "$STATE"/ctld "$STATE"/d /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null;
                                   chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  cp /run/munge/munged.pid "$STATE"/munged.pid
  host=$(hostname -s)
  cpus=$(nproc)
  memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
  cat > "$CONF" <<EOF
$MARK: a single-node cluster for plmbench's cluster tests
ClusterName=plmbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
# no cgroups (containers rarely delegate them): processes tracked by their parent, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# a job cancelled or requeued gets 5 s between SIGTERM and SIGKILL; a requeued job may start at once
KillWait=5
JobRequeue=1
ReturnToService=2
SchedulerParameters=nohold_on_prolog_fail
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  /usr/sbin/slurmctld
  /usr/sbin/slurmd
  for _ in $(seq 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qx idle; then sinfo; return 0; fi
    sleep 1
  done
  echo "slurm.sh: the node is not idle after 60 s:" >&2
  sinfo >&2 || true
  tail -n 20 "$STATE"/slurmctld.log "$STATE"/slurmd.log >&2 || true
  exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
