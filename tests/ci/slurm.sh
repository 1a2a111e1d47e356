#!/usr/bin/env bash
# A real one-host Slurm cluster for the campaign tests (tests/test_campaign_slurm.py): munge, slurmctld and
# SLURM_CI_NODES slurmd "nodes" (node1, node2, ... one CPU each, all on 127.0.0.1 with their own ports),
# from Debian's packages. Idempotent: on a machine where the cluster already answers it checks and exits.
# Needs root. Prints one line per thing it did.
#
#   bash tests/ci/slurm.sh            # install if missing, configure, start, wait until the nodes are idle
#   SLURM_CI_NODES=3 bash tests/ci/slurm.sh
#
# No accounting daemon (slurmdbd): AccountingStorageType=accounting_storage/none, so `sacct` has nothing
# to say; job completions go to a text file (jobcomp/filetxt) and `repro campaign status` reads squeue,
# scontrol and the run directories instead.
set -euo pipefail

NODES=${SLURM_CI_NODES:-2}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm
RUN=/run/slurm
FIRST_PORT=17001
say() { echo "slurm cluster: $*"; }

nodes_idle() {  # every configured node answers and is idle, mixed or allocated
  local states
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
  [ "$(echo "$states" | grep -cE '^node[0-9]+ (idle|mixed|allocated|completing)$')" -ge "$NODES" ]
}

# --- 1. packages -----------------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v sbatch >/dev/null; then
  say "installing slurmctld, slurmd, slurm-client and munge from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

# --- 2. the configuration (rewritten only when it changed) -------------------------------------------------
HOST=$(hostname -s)
mkdir -p "$CONF_DIR" "$STATE" "$SPOOL" "$LOGS" "$RUN"
want=$(mktemp)
trap 'rm -f "$want"' EXIT
{
  cat <<EOF
# Written by tests/ci/slurm.sh: a one-host test cluster of $NODES one-CPU nodes.
ClusterName=repro-ci
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
# No cgroups in a CI container: track processes by parentage, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGS/jobcomp.txt
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# A node that comes back (a restarted slurmd) takes jobs again without an admin.
ReturnToService=2
# SIGTERM, then SIGKILL this many seconds later: the task wrapper writes its run's status in between.
KillWait=15
MinJobAge=3600
SchedulerParameters=defer_batch=0
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
EOF
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((FIRST_PORT + i - 1)) CPUs=1 RealMemory=1024 State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
} >"$want"
changed=0
if ! cmp -s "$want" "$CONF"; then
  say "writing $CONF ($NODES nodes)"
  cp "$want" "$CONF"
  changed=1
fi
# Debian's slurmd reads cgroup.conf when present; the plugins above need none.

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pidfile() {
  local pid
  if alive "$1"; then
    pid=$(cat "$1")
    say "stopping pid $pid ($1) for the new configuration"
    kill "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
}

if [ "$changed" = 1 ]; then  # daemons of an older configuration must read the new one
  for i in $(seq 1 32); do stop_pidfile "$RUN/slurmd-node$i.pid"; done
  stop_pidfile "$RUN/slurmctld.pid"
fi

# --- 3. munge ---------------------------------------------------------------------------------------------
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  say "munge: running"
else
  if [ ! -s /etc/munge/munge.key ]; then
    say "munge: creating /etc/munge/munge.key"
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || \
      dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  say "munge: starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || { echo "slurm cluster: munged did not start" >&2; exit 1; }
fi

# --- 4. slurmctld and one slurmd per node -----------------------------------------------------------------
if alive "$RUN/slurmctld.pid" && scontrol ping >/dev/null 2>&1; then
  say "slurmctld: running"
else
  say "slurmctld: starting (log $LOGS/slurmctld.log)"
  slurmctld
  for _ in $(seq 1 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
  scontrol ping >/dev/null 2>&1 || { echo "slurm cluster: slurmctld did not answer" >&2;
                                     tail -20 "$LOGS/slurmctld.log" >&2; exit 1; }
fi
for i in $(seq 1 "$NODES"); do
  node=node$i
  mkdir -p "$SPOOL/$node"
  if alive "$RUN/slurmd-$node.pid"; then
    say "slurmd $node: running"
  else
    say "slurmd $node: starting on port $((FIRST_PORT + i - 1)) (log $LOGS/slurmd-$node.log)"
    slurmd -N "$node"
  fi
done

# --- 5. wait until every node takes jobs ------------------------------------------------------------------
for _ in $(seq 1 150); do
  nodes_idle && break
  # A node left down or drained by an earlier, broken start: ReturnToService=2 covers a restart only.
  for node in $(sinfo -h -N -t down,drain -o '%N' 2>/dev/null); do
    scontrol update NodeName="$node" State=RESUME 2>/dev/null || true
  done
  sleep 0.2
done
if ! nodes_idle; then
  echo "slurm cluster: the nodes did not become idle:" >&2
  sinfo -N -l >&2 || true
  exit 1
fi
say "ready: $(sinfo -h -N -o '%N=%T' | tr '\n' ' ')"
