#!/usr/bin/env bash
# Scheduled runs: the cost of a re-run with nothing changed, and of --durable, against a first
# full conversion measured in the same run (machines are shared and noisy: read the ratios).
#
#   bash samples/bench-incremental.sh [FILES] [RECORDS_PER_FILE]     (default 10 x 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-10}
per_file=${2:-5000}
work=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work/archive"
for i in $(seq 1 "$files"); do
  f="$work/archive/part-$(printf %02d "$i").jsonl.zst"
  [ -f "$f" ] || python3 samples/generate.py --records "$per_file" --seed "$i" --out "$f"
done
cargo build --release --quiet
bin=target/release/rollover
echo "archive: $files files x $per_file records, $(du -sb "$work/archive" | cut -f1) bytes zstd"

timed() { # label, out, extra args -> prints seconds
  local label=$1 out=$2; shift 2
  /usr/bin/time -f "%e" -o "$work/time" "$bin" convert "$work/archive" --out "$out" "$@" >/dev/null 2>&1 || true
  local secs; secs=$(cat "$work/time")
  printf '%-34s %7.2f s\n' "$label" "$secs" >&2
  echo "$secs"
}
first=$(timed "first run (converts everything)" "$work/home")
again=$(timed "re-run, nothing changed" "$work/home")
durable=$(timed "first run with --durable" "$work/home-durable" --durable)
touch "$work/archive/part-01.jsonl.zst"
touched=$(timed "re-run, one file touched (same bytes)" "$work/home")
awk "BEGIN{printf \"re-run / first run   = %.3f (target < 0.1)\n--durable / first run = %.2f\n\", $again/$first, $durable/$first}"
rm -rf "$work/home" "$work/home-durable"
