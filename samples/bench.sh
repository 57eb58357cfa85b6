#!/usr/bin/env bash
# Throughput and memory of `rollover convert` against a baseline measured in the same run:
# the same binary, reader and writer doing only decompress + split + parse + serialise + write
# (`--baseline`). Prints records/s, MB/s (decompressed), peak RSS and the ratio. Machines are
# shared and noisy: read the ratio, not the absolute figures.
#
#   bash samples/bench.sh [RECORDS] [RUNS]      (default 50000 records, 3 runs each)
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-50000}
runs=${2:-3}
work=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
archive="$work/bench-$records.jsonl.zst"
[ -f "$archive" ] || python3 samples/generate.py --records "$records" --out "$archive"
cargo build --release --quiet
bin=target/release/rollover
raw=$(zstd -dc "$archive" | wc -c)
echo "archive: $archive ($(stat -c %s "$archive") bytes zstd, $raw bytes raw, $records records)"

measure() { # name, extra args
  local name=$1; shift
  local best=""
  for _ in $(seq "$runs"); do
    rm -rf "$work/out"
    /usr/bin/time -f "%e %M" -o "$work/time" "$bin" convert "$archive" --out "$work/out" "$@" >/dev/null 2>&1 || true
    read -r secs rss < "$work/time"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; best_rss=$rss; fi
  done
  printf '%-9s best of %s: %6.2f s  %9.0f records/s  %7.1f MB/s  peak RSS %6.1f MB\n' \
    "$name" "$runs" "$best" "$(awk "BEGIN{print $records/$best}")" "$(awk "BEGIN{print $raw/$best/1e6}")" "$(awk "BEGIN{print $best_rss/1024}")"
  eval "${name}_secs=$best"
}
measure baseline --baseline
measure convert
awk "BEGIN{printf \"convert throughput = %.0f%% of baseline\n\", 100*$baseline_secs/$convert_secs}"
