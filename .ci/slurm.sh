#!/usr/bin/env bash
# A single-node SLURM cluster on this machine for the cluster tests (tests/cluster, pytest -m cluster):
# Debian's slurm-wlm (munged, slurmctld and slurmd on localhost, no cgroups: proctrack/linuxproc,
# task/none) with job accounting (slurmdbd on a MariaDB of its own, no TCP: submitit reads the state
# of a job through `sacct`, and without it waits forever for a cancelled one), installed with
# apt-get where missing. As root:
#   .ci/slurm.sh start    install if needed, write /etc/slurm/slurm.conf and slurmdbd.conf, start the
#                         daemons, wait until `sinfo` shows the node idle (exit 1 with their logs if not)
#   .ci/slurm.sh stop     stop the daemons this script started
# An existing /etc/slurm/slurm.conf that this script did not write is left alone (exit 1).
set -euo pipefail
STATE=/var/lib/plmbench-slurm        # spool directories, the database, pid files and logs
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
MARK="# written by plmbench .ci/slurm.sh"

stop() {
  for name in slurmd slurmctld slurmdbd run/mariadb munged; do
    if [ -f "$STATE/$name.pid" ]; then kill "$(cat "$STATE/$name.pid")" 2>/dev/null || true; rm -f "$STATE/$name.pid"; fi
  done
  sleep 1
}

# the accounting database: MariaDB on a socket of its own, slurmdbd over it
start_accounting() {
  mkdir -p "$STATE"/mysql "$STATE"/run
  chown mysql:mysql "$STATE"/mysql "$STATE"/run
  if [ ! -d "$STATE"/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir="$STATE"/mysql >/dev/null
  fi
  rm -f "$STATE"/run/mysqld.sock
  mariadbd --user=mysql --datadir="$STATE"/mysql --socket="$STATE"/run/mysqld.sock --skip-networking \
    --pid-file="$STATE"/run/mariadb.pid --log-error="$STATE"/run/mariadb.log &
  for _ in $(seq 120); do mariadb --socket="$STATE"/run/mysqld.sock -e "SELECT 1" >/dev/null 2>&1 && break; sleep 0.5; done
  mariadb --socket="$STATE"/run/mysqld.sock -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'plmbench';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  cat > "$DBD_CONF" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=plmbench
StorageHost=localhost
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/slurmdbd.log
EOF
  chmod 600 "$DBD_CONF"
  MYSQL_UNIX_PORT="$STATE"/run/mysqld.sock /usr/sbin/slurmdbd   # the client library's socket
  for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
  sacctmgr -i add cluster plmbench >/dev/null 2>&1 || true
}

start() {
  [ "$(id -u)" = 0 ] || { echo "slurm.sh: run as root (it installs packages and starts daemons)" >&2; exit 1; }
  if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null || ! command -v mariadbd >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      slurm-wlm slurmdbd munge mariadb-server
  fi
  for conf in "$CONF" "$DBD_CONF"; do
    if [ -f "$conf" ] && ! grep -qF "$MARK" "$conf"; then
      echo "slurm.sh: $conf exists and is not ours; not touching a real cluster's configuration" >&2; exit 1
    fi
  done
  stop
  mkdir -p "$STATE"/ctld "$STATE"/d /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null;
                                   chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  cp /run/munge/munged.pid "$STATE"/munged.pid
  start_accounting
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
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# a job cancelled or requeued gets 5 s between SIGTERM and SIGKILL
KillWait=5
JobRequeue=1
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  /usr/sbin/slurmctld
  /usr/sbin/slurmd
  for _ in $(seq 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qx idle && sacct -n -X >/dev/null 2>&1; then sinfo; return 0; fi
    sleep 1
  done
  echo "slurm.sh: the node is not idle, or accounting not answering, after 60 s:" >&2
  sinfo >&2 || true
  tail -n 20 "$STATE"/slurmctld.log "$STATE"/slurmd.log "$STATE"/slurmdbd.log >&2 || true
  exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
