#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for testing the cluster profile end to end:
#   workflow/scripts/slurm_cluster.sh start    install (Debian packages) if missing, configure, start
#   workflow/scripts/slurm_cluster.sh status   daemons and node state; exit 0 only when the node is usable
#   workflow/scripts/slurm_cluster.sh stop     stop the daemons this script started (by their pid files)
# start and stop are idempotent and need root (daemons, /etc/slurm, mknod): they re-execute with sudo -n.
#
# What it builds, and why:
# - munged with its own key and socket under $HNCLIP_SLURM_DIR, so a site munge (if any) is untouched;
# - slurmctld + slurmd as root, proctrack/linuxproc, no cgroups, no accounting: they work in
#   containers and CI machines that have no systemd or cgroup delegation;
# - one node with this machine's CPUs and memory (from `slurmd -C`), partitions named like the
#   profile's (cpu, gpu), and a fake GPU GRES: gres.conf must name character devices, so we mknod
#   /dev/null's numbers (c 1 3); slurmd rejects a regular file;
# - the config at SLURM's default path /etc/slurm/slurm.conf: the executor plugin's job step clears
#   SLURM_CONF, so any other path is lost inside jobs;
# - MinJobAge=3600: without accounting `--slurm-status-command squeue` is the only status source, and
#   squeue forgets finished jobs after MinJobAge (the plugin falls back to sacct, which then waits
#   forever, when MinJobAge < 3x its first status interval); an hour also lets tests read back what
#   every job of a run requested (squeue's tres-per-job; the granted-TRES list needs slurmdbd for gres).
#
# Settings (environment): HNCLIP_SLURM_DIR (state, logs; default /var/lib/hnclip-slurm),
# HNCLIP_SLURM_GPUS (fake GPUs, default 2), HNCLIP_SLURM_PARTITIONS (default "cpu gpu"; the first is
# the default partition), HNCLIP_SLURM_FORCE=1 (overwrite an /etc/slurm/slurm.conf this script did not write).
set -euo pipefail

STATE=${HNCLIP_SLURM_DIR:-/var/lib/hnclip-slurm}
GPUS=${HNCLIP_SLURM_GPUS:-2}
PARTITIONS=${HNCLIP_SLURM_PARTITIONS:-cpu gpu}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
GRES_CONF=$CONF_DIR/gres.conf
MARKER="# written by hnclip workflow/scripts/slurm_cluster.sh"
MUNGE_SOCKET=$STATE/munge/munge.socket
PACKAGES=(slurmctld slurmd slurm-client munge)
[[ $GPUS =~ ^[1-9][0-9]*$ ]] || { echo "slurm_cluster.sh: HNCLIP_SLURM_GPUS must be >= 1, got '$GPUS'" >&2; exit 1; }

die() { echo "slurm_cluster.sh: $*" >&2; exit 1; }
say() { echo "slurm_cluster.sh: $*" >&2; }

# start/stop need root (daemons, $CONF, mknod); status only reads pid files and asks SLURM.
# sudo -n: fail at once rather than wait for a password nobody types in CI.
if [[ $(id -u) -ne 0 && ${1:-} != status ]]; then
  command -v sudo >/dev/null 2>&1 || die "$1 must run as root (daemons, $CONF, mknod) and sudo is not installed"
  exec sudo -n --preserve-env=HNCLIP_SLURM_DIR,HNCLIP_SLURM_GPUS,HNCLIP_SLURM_PARTITIONS,HNCLIP_SLURM_FORCE \
    bash "$0" "$@"
fi

# ---------------------------------------------------------------------------------------- helpers
# The pid in $1 if that process is alive and runs the program $2 (a stale pid file is not "running").
live_pid() {
  local file=$1 name=$2 pid
  [[ -s $file ]] || return 1
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] && [[ -d /proc/$pid ]] || return 1
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name"* ]] || return 1
  echo "$pid"
}

# wait_for SECONDS DESCRIPTION PIDFILE NAME COMMAND...: poll COMMAND every 0.5 s until it succeeds;
# give up at once when daemon NAME (PIDFILE) has exited, as it does on a fatal config error
wait_for() {
  local seconds=$1 what=$2 file=$3 name=$4
  shift 4
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    live_pid "$file" "$name" >/dev/null || { sleep 1; live_pid "$file" "$name" >/dev/null; } || return 1
    sleep 0.5
  done
  say "$what"
}

stop_daemon() {  # stop_daemon PIDFILE NAME: SIGTERM, wait up to 20 s, then SIGKILL; only our own pid
  local file=$1 name=$2 pid
  if pid=$(live_pid "$file" "$name"); then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do [[ -d /proc/$pid ]] || break; sleep 0.5; done
    if [[ -d /proc/$pid ]]; then
      say "$name (pid $pid) ignored SIGTERM for 20 s; sending SIGKILL"
      kill -9 "$pid" 2>/dev/null || true
    fi
    say "stopped $name (pid $pid)"
  fi
  rm -f "$file"
}

node_name() { slurmd -C | sed -n 's/^NodeName=\([^ ]*\).*/\1/p'; }

# ---------------------------------------------------------------------------------------- install
install_packages() {
  local missing=()
  command -v slurmctld >/dev/null 2>&1 || missing+=(slurmctld)
  command -v slurmd >/dev/null 2>&1 || missing+=(slurmd)
  command -v sbatch >/dev/null 2>&1 || missing+=(slurm-client)
  command -v munged >/dev/null 2>&1 || missing+=(munge)
  ((${#missing[@]} == 0)) && return 0
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get: install ${PACKAGES[*]} by hand"
  say "installing ${missing[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ------------------------------------------------------------------------------------------ munge
munge_answers() { munge -S "$MUNGE_SOCKET" -n | unmunge -S "$MUNGE_SOCKET"; }

start_munge() {
  install -d -m 0755 "$STATE" "$STATE/munge" "$STATE/run" "$STATE/log"
  if [[ ! -s $STATE/munge/munge.key ]]; then
    # a private key: jobs of this cluster authenticate only to this cluster's daemons
    head -c 1024 /dev/urandom >"$STATE/munge/munge.key.tmp"
    chmod 0400 "$STATE/munge/munge.key.tmp"
    mv "$STATE/munge/munge.key.tmp" "$STATE/munge/munge.key"
  fi
  live_pid "$STATE/run/munged.pid" munged >/dev/null && return 0
  rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  munged --force --socket="$MUNGE_SOCKET" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" \
    --seed-file="$STATE/munge/munged.seed" ||
    die "munged failed to start; see $STATE/log/munged.log"
  wait_for 20 "munged up (socket $MUNGE_SOCKET)" "$STATE/run/munged.pid" munged munge_answers ||
    die "munged does not answer on $MUNGE_SOCKET; see $STATE/log/munged.log"
}

# ------------------------------------------------------------------------------------------ config
fake_gpus() {  # character devices for gres.conf (a regular file is rejected by slurmd)
  local i dev
  install -d -m 0755 "$STATE/dev"
  for ((i = 0; i < GPUS; i++)); do
    dev=$STATE/dev/fakegpu$i
    if [[ ! -c $dev ]]; then
      rm -f "$dev"
      mknod -m 0666 "$dev" c 1 3
    fi
  done
}

render_config() {
  local node hw cpus memory part default=YES partitions=""
  node=$(node_name)
  [[ -n $node ]] || die "slurmd -C printed no NodeName"
  # CPUs and topology exactly as slurmd detects them; a node configured above its hardware is drained
  hw=$(slurmd -C | sed -n 's/^NodeName=[^ ]* \(.*RealMemory=[0-9]*\).*/\1/p')
  cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
  memory=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  [[ -n $cpus && -n $memory ]] || die "could not read CPUs/RealMemory from slurmd -C: $(slurmd -C | head -1)"
  for part in $PARTITIONS; do
    partitions+="PartitionName=$part Nodes=$node Default=$default MaxTime=INFINITE State=UP OverSubscribe=NO"$'\n'
    default=NO
  done
  cat <<EOF
$MARKER
# Single-node test cluster: $cpus CPUs, $memory MB, $GPUS fake GPUs. State and logs in $STATE.
ClusterName=hnclip
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
NodeName=$node NodeAddr=127.0.0.1 $hw Gres=gpu:$GPUS State=UNKNOWN
$partitions
EOF
}

write_if_changed() {  # write_if_changed FILE CONTENT: 0 when FILE now differs from before
  local file=$1 content=$2
  if [[ -f $file ]] && [[ $(<"$file") == "$content" ]]; then
    return 1
  fi
  printf '%s\n' "$content" >"$file.tmp"
  mv "$file.tmp" "$file"
}

write_config() {
  local node changed=1 gres
  install -d -m 0755 "$CONF_DIR" "$STATE/slurmctld" "$STATE/slurmd"
  for file in "$CONF" "$GRES_CONF"; do
    if [[ -f $file ]] && ! grep -qF "$MARKER" "$file" && [[ ${HNCLIP_SLURM_FORCE:-0} != 1 ]]; then
      die "$file exists and was not written by this script; move it away or set HNCLIP_SLURM_FORCE=1"
    fi
  done
  node=$(node_name)
  gres="$MARKER"$'\n'"NodeName=$node Name=gpu File=$STATE/dev/fakegpu[0-$((GPUS - 1))]"
  ((GPUS == 1)) && gres="$MARKER"$'\n'"NodeName=$node Name=gpu File=$STATE/dev/fakegpu0"
  write_if_changed "$CONF" "$(render_config)" && changed=0
  write_if_changed "$GRES_CONF" "$gres" && changed=0
  return $changed
}

# ------------------------------------------------------------------------------------------ slurm
node_state() { sinfo -h -N -o %t 2>/dev/null | head -1; }  # the only node's: idle, mix, down*, ...
node_registered() { local state; state=$(node_state); [[ -n $state && $state != unk* ]]; }
node_usable() { [[ $(node_state) =~ ^(idle|mix|alloc) ]]; }
controller_up() { scontrol ping | grep -q UP; }

start_slurm() {
  if ! live_pid "$STATE/run/slurmctld.pid" slurmctld >/dev/null; then
    # -c: a clean start; jobs of an earlier cluster life are gone with their processes
    slurmctld -c || die "slurmctld failed to start; see $STATE/log/slurmctld.log"
  fi
  wait_for 60 "slurmctld up" "$STATE/run/slurmctld.pid" slurmctld controller_up ||
    die "slurmctld does not answer; see $STATE/log/slurmctld.log"
  if ! live_pid "$STATE/run/slurmd.pid" slurmd >/dev/null; then
    slurmd || die "slurmd failed to start; see $STATE/log/slurmd.log"
  fi
  wait_for 60 "node $(node_name) registered" "$STATE/run/slurmd.pid" slurmd node_registered || true
  case $(node_state) in
    down* | drain* | drng* | fail*)
      scontrol update NodeName="$(node_name)" State=RESUME || true ;;
  esac
  wait_for 60 "node $(node_name) usable" "$STATE/run/slurmd.pid" slurmd node_usable ||
    die "node $(node_name) is '$(node_state)', not usable: $(sinfo -h -N -o '%N %t %E' 2>&1); see $STATE/log/slurmd.log"
}

cmd_start() {
  install_packages
  start_munge
  fake_gpus
  if write_config; then
    # the config changed under running daemons: restart them so they read it
    stop_daemon "$STATE/run/slurmd.pid" slurmd
    stop_daemon "$STATE/run/slurmctld.pid" slurmctld
  fi
  start_slurm
  cmd_status
}

cmd_stop() {
  stop_daemon "$STATE/run/slurmd.pid" slurmd
  stop_daemon "$STATE/run/slurmctld.pid" slurmctld
  stop_daemon "$STATE/run/munged.pid" munged
  # our config only: a stale one would point clients at a dead munge socket
  for file in "$CONF" "$GRES_CONF"; do
    if [[ -f $file ]] && grep -qF "$MARKER" "$file"; then rm -f "$file"; fi
  done
}

cmd_status() {
  local ok=0 daemon pid
  for daemon in munged slurmctld slurmd; do
    if pid=$(live_pid "$STATE/run/$daemon.pid" "$daemon"); then
      echo "$daemon: running (pid $pid)"
    else
      echo "$daemon: not running"
      ok=1
    fi
  done
  if ((ok == 0)); then
    sinfo -o '%P %a %D %t %c %m %G' || ok=1
    node_usable || ok=1
  fi
  return $ok
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) die "usage: $0 {start|stop|status}" ;;
esac
