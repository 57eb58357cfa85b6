#!/usr/bin/env bash
# A real job engine, run here (issue 15): a one-node Slurm cluster on this machine converts an
# archive as a job array of 4 shards into one Codex home, `report merge` joins their reports,
# and the result must equal an unsharded run's: the same rollouts byte for byte, the same report
# lines, the same summary. Run by .ci/run after `cargo test --release`:
#
#   bash tests/slurm.sh            # uses target/release/rollover (built if missing)
#
# Installs Debian's slurm-wlm and munge when missing (it says so), starts munged (unless one
# answers already), slurmctld and slurmd from a slurm.conf in a scratch folder (localhost only),
# and stops what it started on exit. If the daemons cannot start here it says so and fails: it
# never skips. ROLLOVER_SLURM_KEEP=1 keeps the scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

say() { echo "slurm: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  say "installing Debian's slurm-wlm and munge (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null \
    || fail "cannot install slurm-wlm and munge with apt-get"
fi

bin=${ROLLOVER_BIN:-$repo/target/release/rollover}
if [ ! -x "$bin" ]; then
  say "building $bin"
  cargo build --release --quiet
fi

work=$(mktemp -d /tmp/rollover-slurm.XXXXXX)
chmod 755 "$work"
started_munged=""
cleanup() {
  local status=$?
  local pids=()
  for pidfile in "$work/slurmd.pid" "$work/slurmctld.pid"; do
    if [ -s "$pidfile" ]; then
      pids+=("$(cat "$pidfile")")
      kill "${pids[-1]}" 2>/dev/null || true
    fi
  done
  if [ -n "$started_munged" ]; then
    kill "$started_munged" 2>/dev/null || true
  fi
  # slurmctld saves its state into $work/state as it stops: removing the folder while it
  # still writes there failed the run once ("Directory not empty"). Wait (10 s at most)
  # for the daemons to be gone first.
  for _ in $(seq 100); do
    local alive=0
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive=1
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  if [ "$status" -ne 0 ]; then
    for log in slurmctld.log slurmd.log; do
      if [ -f "$work/$log" ]; then
        say "last lines of $log:"
        tail -n 15 "$work/$log" >&2
      fi
    done
  fi
  if [ -n "${ROLLOVER_SLURM_KEEP:-}" ]; then
    say "kept $work"
  else
    # A daemon still writing past the wait is no reason to fail a run that passed.
    rm -rf "$work" 2>/dev/null || { sleep 1; rm -rf "$work" || say "could not remove $work"; }
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'say "FAILED at line $LINENO: $BASH_COMMAND"' ERR

# Munge: a key, its folders, the daemon (one already answering is used as it is).
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 0400 /etc/munge/munge.key
  munged --force 2>"$work/munged.err" || fail "munged did not start on this machine: $(cat "$work/munged.err")"
  for _ in $(seq 1 50); do
    [ -s /run/munge/munged.pid ] && break
    sleep 0.1
  done
  started_munged=$(cat /run/munge/munged.pid 2>/dev/null || true)
  munge -n | unmunge >/dev/null || fail "munged started but does not answer (munge -n | unmunge)"
fi

# slurm.conf for this machine alone.
host=$(hostname -s)
cpus=$(nproc)
memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p "$work/state" "$work/spool"
cat > "$work/slurm.conf" <<CONF
ClusterName=rollover
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf

say "starting slurmctld and slurmd ($host, $cpus CPUs, $memory MiB)"
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start on this machine"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start on this machine"
state=""
for _ in $(seq 1 60); do
  state=$(sinfo -h -o %T 2>/dev/null | head -n 1 || true)
  [ "$state" = "idle" ] && break
  sleep 0.5
done
[ "$state" = "idle" ] || fail "the node is not idle after 30 s (sinfo says '${state:-nothing}'): the daemons cannot run jobs on this machine"
say "node $host is idle"

# The archive: the shipped samples, small generated files and one much larger than the rest.
mkdir -p "$work/archive/samples" "$work/archive/small" "$work/archive/huge"
for f in "$repo"/samples/*; do
  case "$f" in
    *.sh|*.py) ;;
    *) [ -f "$f" ] && cp "$f" "$work/archive/samples/" ;;
  esac
done
for seed in 1 2 3 4 5 6; do
  python3 "$repo/samples/generate.py" --records 10 --seed "$seed" --out "$work/archive/small/part-$seed.jsonl" >/dev/null
done
python3 "$repo/samples/generate.py" --records 600 --seed 42 --out "$work/archive/huge/big.jsonl" >/dev/null

cd "$work"
# The unsharded run, for comparison (1: done with findings). The reports name each file as
# the INPUT argument gives it: the same absolute path as the array's.
status=0
"$bin" convert "$work/archive" --out whole --quiet || status=$?
[ "$status" -le 1 ] || fail "the unsharded run exited $status"

say "sbatch --array=0-3 --wait samples/cluster/slurm-array.sh"
ROLLOVER_ARCHIVE=$work/archive ROLLOVER_OUT=$work/sharded ROLLOVER_SHARDS=4 ROLLOVER_BIN=$bin \
  ROLLOVER_ARGS="--split-bytes 256KiB" \
  sbatch --array=0-3 --wait --output="$work/task-%a.out" "$repo/samples/cluster/slurm-array.sh" \
  || { cat "$work"/task-*.out >&2 || true; fail "the job array failed"; }
for k in 0 1 2 3; do
  grep -q "shard $k/4 (from SLURM_ARRAY_TASK_ID, count from --shards)" "$work/task-$k.out" \
    || { cat "$work/task-$k.out" >&2; fail "task $k did not say it ran shard $k/4 from Slurm's index"; }
done

status=0
"$bin" report merge sharded || status=$?
[ "$status" -le 1 ] || fail "report merge exited $status"

diff -r whole/sessions sharded/sessions >/dev/null || fail "the shards' rollouts differ from the unsharded run's"
for name in conversations.jsonl quarantine.jsonl report.md; do
  cmp -s "whole/rollover/latest/$name" "sharded/rollover/latest/$name" \
    || fail "the merged $name differs from the unsharded run's"
done
python3 - whole/rollover/latest/summary.json sharded/rollover/latest/summary.json <<'PY' || fail "the merged summary.json differs from the unsharded run's"
import json, sys
whole, merged = (json.load(open(p)) for p in sys.argv[1:])
assert merged.pop("merged_shards") == 4, "merged_shards"
assert merged == whole, [k for k in whole if whole[k] != merged.get(k)]
assert whole["records"] == whole["converted"] + whole["quarantined"] + whole["joined"]
print("slurm: %d records in %d files = converted %d + quarantined %d + joined %d" % (
    whole["records"], whole["files"], whole["converted"], whole["quarantined"], whole["joined"]))
PY
say "ok: 4 array tasks on a real Slurm cluster give the unsharded run's rollouts and report"
