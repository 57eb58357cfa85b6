#!/usr/bin/env bash
# A Slurm job array that converts one archive into one Codex home, one shard per array task
# (README "Running on a cluster"). Submit it from a folder on the shared filesystem:
#
#   ROLLOVER_ARCHIVE=/shared/archive ROLLOVER_OUT=/shared/codex-home ROLLOVER_SHARDS=4 \
#     sbatch --array=0-3 --wait samples/cluster/slurm-array.sh
#   rollover report merge /shared/codex-home
#
# Each task reads its index from SLURM_ARRAY_TASK_ID; the shard count is ROLLOVER_SHARDS,
# passed as --shards, not the array's size: a failed shard is submitted again alone
# (`sbatch --array=2 ...`, whose SLURM_ARRAY_TASK_COUNT is 1) with the same ROLLOVER_SHARDS.
#
#SBATCH --job-name=rollover
#SBATCH --array=0-3
#SBATCH --ntasks=1
#SBATCH --output=rollover-%A-%a.out
set -euo pipefail

: "${ROLLOVER_ARCHIVE:?set ROLLOVER_ARCHIVE to the archive folder (on the shared filesystem)}"
: "${ROLLOVER_OUT:?set ROLLOVER_OUT to the Codex home to write (on the shared filesystem)}"
: "${ROLLOVER_SHARDS:?set ROLLOVER_SHARDS to the number of shards (the size of --array)}"
rollover=${ROLLOVER_BIN:-rollover}
# More options for every shard (the same for all of them: report merge checks), e.g.
# ROLLOVER_ARGS="--rules default --rules site.toml".
read -r -a extra <<< "${ROLLOVER_ARGS:-}"

status=0
"$rollover" convert "$ROLLOVER_ARCHIVE" --out "$ROLLOVER_OUT" --shards "$ROLLOVER_SHARDS" \
  --jobs "${SLURM_CPUS_ON_NODE:-1}" "${extra[@]}" || status=$?
# 1 means "done, with findings" (quarantined records, a damaged file): the shard finished and
# its report says what it found; the merged report is where to read it. Anything else failed.
if [ "$status" -eq 1 ]; then
  echo "rollover: shard ${SLURM_ARRAY_TASK_ID} finished with findings (see the merged report)" >&2
  exit 0
fi
exit "$status"
