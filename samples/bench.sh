#!/usr/bin/env bash
# Throughput and memory of `rollover convert` against independent baselines and peers
# (issue 29), every tool on all cores, side by side in one run:
#
# - ../shared/bench/peer-gproxy: gproxy-protocol's own Chat Completions -> Responses request
#   converter, the fastest converter a user would pick instead (compare `convert --format
#   responses`, which writes the same bodies, validated and audited).
# - ../shared/bench/anchor: a round trip with the same crates (zstd, split, simd-json,
#   serialise, write). `simd` writes one stream per input (compare `convert --dry-run`);
#   `files` writes one file per record, as a Codex home needs (compare `convert`).
# - the LiteLLM peer (samples/peer_litellm.py): LiteLLM's own converter on one thread
#   (compare `convert --format responses -j 1`).
#
# Two corpora from samples/generate.py: agent transcripts (`--kind agent`, ~73 KB each,
# ~233 MB raw) and small Chat Completions records (`--kind small`, ~2 KB each, ~132 MB raw,
# every one of them a record the gproxy peer converts too). Every run is repeated RUNS times
# (default 5), the rounds interleaved, the best kept; each run writes into a fresh folder
# (ext4 creates files ~2x slower right after a mass delete), all deleted at the end. Prints
# seconds, CPU seconds and the cores they came to, MB/s (decompressed), records/s, peak RSS
# and CPU microseconds per record; then peak RSS at 0.5, 1 and 2 GB of input; then the
# issue's ratios, each marked met or not met.
#
#   bash samples/bench.sh            full corpora (generated once into $BENCH_DIR)
#   bash samples/bench.sh --quick    small corpora (400 agent records, 8000 small records), no
#                                    memory section
#   bash samples/bench.sh --memory   peak RSS at 0.25, 0.5, 1 and 2 GB of agent transcripts
#   bash samples/bench.sh --instructions
#                                    instructions (valgrind callgrind) of each thread of
#                                    `convert --dry-run -j 1` and of `anchor simd 1` on slices of
#                                    both corpora: deterministic, so a change of a few percent
#                                    shows even when the machine's timings swing by 25 %; and
#                                    the serial stages' share (the reader and the collector)
#                                    with the scaling it allows on 4, 8 and 16 cores
#
# BENCH_DIR (default ~/.cache/rollover-bench) holds the corpora and the LiteLLM venv; RUNS
# (default 5) the runs per measure; WORK (default a fresh folder under /tmp) the outputs;
# ANCHOR_TARGET and GPROXY_TARGET where the two baselines are built (once); ROLLOVER_BIN a
# rollover binary to time instead of building this checkout's (an older build, to compare a
# change before and after in the same session).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=full
case "${1:-}" in
  --quick) mode=quick ;;
  --memory) mode=memory ;;
  --instructions) mode=instructions ;;
  "") ;;
  *) echo "usage: bash samples/bench.sh [--quick|--memory|--instructions]" >&2; exit 2 ;;
esac
bench=${BENCH_DIR:-$HOME/.cache/rollover-bench}
runs=${RUNS:-5}
work=${WORK:-$(mktemp -d /tmp/rollover-bench.XXXXXX)}
mkdir -p "$bench/corpora" "$work"
anchor_dir=$root/../shared/bench/anchor
anchor_target=${ANCHOR_TARGET:-$HOME/.cache/anchor-target}
anchor=$anchor_target/release/anchor
gproxy_dir=$root/../shared/bench/peer-gproxy
gproxy_target=${GPROXY_TARGET:-$HOME/.cache/peer-gproxy-target}
gproxy=$gproxy_target/release/peer_gproxy

say() { echo "bench: $*" >&2; }

# ext4 without a journal (these machines: /proc/fs/jbd2 is empty) skips every inode deleted
# in the last 60 s (360 s while its inode table block is dirty) when it allocates one, and
# reads each one's deletion time to do so (fs/ext4/ialloc.c, find_inode_bit and
# recently_deleted). Right after a mass delete, creating a file scans past thousands of them:
# perf showed 63-74 % of the writer's time there. So the outputs of a run are deleted at its
# end with a stamp, and a run that follows within 6 minutes waits for the rest of them first
# (SETTLE=0 does not wait).
settle=${SETTLE:-360}
stamp=$bench/deleted-at
deleted() { rm -rf "$@"; date +%s > "$stamp"; }
wait_settled() {
  [ -s "$stamp" ] || return 0
  local left=$(( $(cat "$stamp") + settle - $(date +%s) ))
  if [ "$left" -gt 0 ]; then
    say "the last run deleted its outputs $((settle - left)) s ago: waiting ${left} s, since ext4 creates files"
    say "slowly for minutes after a mass delete (SETTLE=0 skips the wait)"
    sleep "$left"
  fi
}

corpus() { # name kind records
  local file=$bench/corpora/$1.jsonl.zst
  if [ ! -s "$file" ]; then
    say "generating $file ($3 $2 records)"
    python3 samples/generate.py --kind "$2" --records "$3" --out "$file" >/dev/null
  fi
  readlink -f "$file"  # rollover and zstd leave symlinks out
}

if [ -n "${ROLLOVER_BIN:-}" ]; then
  bin=$(readlink -f "$ROLLOVER_BIN")
  say "timing $bin (ROLLOVER_BIN)"
else
  say "building rollover (release)"
  cargo build --release --quiet || exit 2
  bin=$root/target/release/rollover
fi
if [ ! -x "$anchor" ]; then
  say "building the anchor baseline into $anchor_target"
  (cd "$anchor_dir" && CARGO_TARGET_DIR=$anchor_target cargo build --release --quiet) || exit 2
fi

if [ "$mode" = memory ]; then
  # Bigger inputs are the 256 MB agent corpus repeated (zstd frames concatenate): the same
  # record sizes, more of them, which is what flat memory is about.
  agent=$(corpus agent agent 3200)
  wait_settled
  printf '%-8s %-22s %8s %12s\n' input run seconds "peak RSS"
  for times in 1 2 4 8; do
    input=$work/agent-x$times.jsonl.zst
    for _ in $(seq "$times"); do cat "$agent"; done > "$input"
    raw=$(zstd -dc < "$input" | wc -c)
    for run in "--dry-run -j 1" "--dry-run -j 2" "-j 2"; do
      out=$work/mem-$times-$RANDOM
      # shellcheck disable=SC2086
      /usr/bin/time -f "%e %M" -o "$work/time" "$bin" convert "$input" --out "$out" $run >/dev/null 2>&1
      read -r secs rss < "$work/time"
      printf '%-8s %-22s %8.2f %9.1f MB\n' "$(awk "BEGIN{printf \"%.2f GB\", $raw/1e9}")" "convert $run" "$secs" "$(awk "BEGIN{print $rss/1024}")"
    done
    rm -f "$input"
  done
  deleted "$work"
  exit 0
fi

if [ "$mode" = instructions ]; then
  if ! command -v valgrind >/dev/null; then
    say "--instructions needs valgrind (apt-get install valgrind)"; exit 2
  fi
  # Slices of the two corpora: callgrind runs ~50x slower than the machine.
  agent=$(corpus agent agent 3200)
  small=$(corpus small small 64000)
  zstd -dc < "$agent" | head -150 | zstd -q > "$work/agent150.jsonl.zst"
  zstd -dc < "$small" | head -5000 | zstd -q > "$work/small5k.jsonl.zst"
  # Instructions of each thread of one run, largest first (callgrind writes a file a thread).
  threads() { # name command...
    local name=$1; shift
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$work/cg-$name" "$@" \
      >/dev/null 2>"$work/cg-$name.err" || { say "valgrind failed:"; tail -3 "$work/cg-$name.err" >&2; exit 2; }
    for f in "$work/cg-$name"-*; do
      sed -n 's/^totals: //p;s/^summary: //p' "$f" | head -1
    done | sort -rn
  }
  echo "rollover $(git describe --always --dirty 2>/dev/null), instructions (callgrind), $(date -u +%FT%TZ)"
  printf '%-9s %14s %14s %14s %14s %9s %9s\n' slice "anchor simd 1" "rollover all" "worker" "other threads" "anchor/worker" "anchor/all"
  for name in agent150 small5k; do
    a=$(threads "anchor-$name" "$anchor" simd 1 "$work/anchor-out" "$work/$name.jsonl.zst" | awk '{s+=$1} END{print s}')
    mapfile -t ours < <(threads "rollover-$name" "$bin" convert "$work/$name.jsonl.zst" --out "$work/out-$name" --dry-run -j 1)
    total=0; for t in "${ours[@]}"; do total=$((total + t)); done
    worker=${ours[0]}
    printf '%-9s %14s %14s %14s %14s %8.2fx %8.2fx\n' "$name" "$a" "$total" "$worker" "$((total - worker))" \
      "$(awk "BEGIN{print $a/$worker}")" "$(awk "BEGIN{print $a/$total}")"
  done
  echo "worker: the converting thread; anchor/worker estimates the -j 1 time ratio, anchor/all the"
  echo "CPU ratio."
  echo
  # The serial stages with several input files: each slice in 8 files, `-j 4` (two files
  # decompressed at once by read-ahead threads, four workers). Each thread is told apart by
  # the functions it ran: the main thread's start and end (the plan, the digests, the summary
  # and the report), a worker (process_work, or convert::convert where LTO inlined the first;
  # valgrind numbers a thread of the pool that looked at each file's first record like the
  # worker after it), the reader handing batches out in order (reader::spawn, or the record
  # identities and their routing, which only it runs), the collector placing and recording them in order
  # (pipeline::collect), a read-ahead thread decompressing and splitting a file (zstd), and
  # the writers.
  echo "serial stages, each slice in 8 files, convert -j 4 (instructions per record)"
  printf '%-9s %-10s %8s %8s %8s %8s %8s %7s %6s %6s %6s\n' slice run parallel "read-ahead" reader collector main serial "4 cores" "8" "16"
  for name in agent150 small5k; do
    n=$(zstd -dc < "$work/$name.jsonl.zst" | grep -c .)
    mkdir -p "$work/parts-$name"
    zstd -dc < "$work/$name.jsonl.zst" > "$work/$name.jsonl"
    split -n l/8 "$work/$name.jsonl" "$work/parts-$name/p-" && rm "$work/$name.jsonl"
    for f in "$work/parts-$name"/p-*; do zstd -q --rm "$f" -o "$f.jsonl.zst"; done
    for run in dry-run convert; do
      args=(--dry-run); [ "$run" = convert ] && args=()
      valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$work/cs-$name-$run" \
        "$bin" convert "$work/parts-$name" --out "$work/outs-$name-$run" -j 4 "${args[@]}" \
        >/dev/null 2>"$work/cs.err" || { say "valgrind failed:"; tail -3 "$work/cs.err" >&2; exit 2; }
      declare -A part=([workers]=0 [ahead]=0 [reader]=0 [collector]=0 [main]=0 [writers]=0)
      for f in "$work/cs-$name-$run"-*; do
        t=$(sed -n 's/^totals: //p;s/^summary: //p' "$f" | head -1)
        if grep -q 'rollover::main' "$f"; then k=main
        elif grep -qE 'process_work|\) rollover::convert::convert$' "$f"; then k=workers
        elif grep -qE 'pipeline::reader::spawn|Occurrences::next|FileRecords::route' "$f"; then k=reader
        elif grep -q 'pipeline::collect' "$f"; then k=collector
        elif grep -q 'ZSTD_decompress' "$f"; then k=ahead
        else k=workers; fi  # a writer, or a thread of the pool that looks at first records
        part[$k]=$(( ${part[$k]} + t ))
      done
      # Time on c cores per record, by instructions: the rest over c cores, no faster than
      # the slower serial thread, nor than the read-ahead over min(c/2, 8) threads. The main
      # thread's start and end are shown apart, in M for the whole run: most of it is fixed
      # (rule files parsed, the report rendered), whatever the number of records.
      awk -v n="$n" -v w="${part[workers]}" -v a="${part[ahead]}" -v r="${part[reader]}" \
          -v c="${part[collector]}" -v m="${part[main]}" -v name="$name" -v run="$run" 'BEGIN{
        p = w + a + r + c; slow = (r > c) ? r : c
        for (i = 1; i <= 3; i++) {
          cores = 2 ^ (i + 1); t = p / cores; if (slow > t) t = slow
          ahead = a / ((cores / 2 < 8) ? cores / 2 : 8); if (ahead > t) t = ahead
          s[i] = p / t }
        printf "%-9s %-10s %8.0f %8.0f %8.0f %8.0f %7.1fM %6.1f%% %6.1fx %5.1fx %5.1fx\n", name, run,
          w / n, a / n, r / n, c / n, m / 1e6, 100 * (r + c) / p, s[1], s[2], s[3] }'
      unset part
    done
  done
  echo "parallel: the workers and (writing) the writers; main: the main thread's start and end,"
  echo "for the whole run (mostly fixed: the rule files, the report); serial: the reader's and the"
  echo "collector's share of the instructions per record; N cores: the most a run of 8 files can"
  echo "gain on one core, by instructions per record: over N cores, no faster than the slower"
  echo "serial thread, nor than the read-ahead over min(N/2, 8) threads."
  deleted "$work"
  exit 0
fi

if [ "$mode" = quick ]; then
  agent=$(corpus agent400 agent 400)
  small=$(corpus small8k small 8000)
else
  agent=$(corpus agent agent 3200)
  small=$(corpus small small 64000)
fi

venv=$bench/venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import litellm" 2>/dev/null; then
  say "********************************************************************"
  say "installing LiteLLM (the peer) into $venv: pip install litellm zstandard"
  say "********************************************************************"
  python3 -m venv "$venv" && "$venv/bin/pip" install --quiet litellm zstandard || {
    say "could not install LiteLLM: the peer is left out"; }
fi
# LiteLLM fetches a model price map from the network on import; the local copy is enough.
export LITELLM_LOCAL_MODEL_COST_MAP=True

if [ ! -x "$gproxy" ]; then
  say "********************************************************************"
  say "building the gproxy peer into $gproxy_target (about 5 minutes on 2 cores)"
  say "********************************************************************"
  (cd "$gproxy_dir" && CARGO_TARGET_DIR=$gproxy_target cargo build --release --quiet) || {
    say "could not build the gproxy peer: it is left out"; }
fi

cores=$(nproc)
declare -A raw records best rss cpu
for name in agent small; do
  file=${!name}
  raw[$name]=$(zstd -dc < "$file" | wc -c)
  records[$name]=$(zstd -dc < "$file" | grep -c .)
  say "$name: $file, ${raw[$name]} bytes raw, ${records[$name]} records"
done

# One run: key, tool, arguments; keeps the best time with its CPU seconds and peak RSS under
# the key. Every run writes into its own fresh folder. Times are the whole process's (wall,
# /usr/bin/time), but the LiteLLM peer's, which times its own loop (without Python's start
# and LiteLLM's import).
measure() {
  local key=$1 tool=$2; shift 2
  local out=$work/run-$((++count))
  local cmd
  local pin=()
  if [ "$tool" = one-core ]; then pin=(taskset -c 0); tool=convert; fi
  case $tool in
    anchor) cmd=("$anchor" "$1" "$2" "$out" "$3") ;;          # mode threads file
    convert) cmd=("$bin" convert "$1" --out "$out" "${@:2}") ;; # file args...
    gproxy) cmd=("$gproxy" "$2" "$out.jsonl" "$1") ;;          # file threads
    litellm) cmd=("$venv/bin/python" samples/peer_litellm.py "$1" --out "$out.jsonl") ;;
  esac
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "${pin[@]}" "${cmd[@]}" >"$work/stdout" 2>"$work/stderr"
  local status=$?
  local secs kb user sys
  read -r secs kb user sys < "$work/time"
  if [ "$status" -gt 1 ]; then
    say "$key failed (exit $status):"; tail -3 "$work/stderr" >&2; return
  fi
  if [ "$tool" = litellm ]; then
    secs=$(sed -n 's/.* in \([0-9.]*\)s = .*/\1/p' "$work/stdout")
  fi
  if [ "$tool" = gproxy ]; then
    local failed; failed=$(sed -n 's/.*"failed":\([0-9]*\).*/\1/p' "$work/stdout")
    [ "${failed:-0}" = 0 ] || say "$key: the gproxy peer failed on $failed records"
  fi
  if [ -z "${best[$key]:-}" ] || awk "BEGIN{exit !($secs < ${best[$key]})}"; then
    best[$key]=$secs; rss[$key]=$kb; cpu[$key]=$(awk "BEGIN{print $user + $sys}")
  fi
}
count=0

wait_settled
for round in $(seq "$runs"); do
  say "round $round of $runs"
  for name in agent small; do
    file=${!name}
    [ -x "$gproxy" ] && measure "$name gproxy $cores" gproxy "$file" "$cores"
    measure "$name responses $cores" convert "$file" --format responses -j "$cores"
    measure "$name anchor-simd $cores" anchor simd "$cores" "$file"
    measure "$name dry-run $cores" convert "$file" --dry-run -j "$cores"
    measure "$name dry-run 1" one-core "$file" --dry-run -j 1
    measure "$name anchor-files $cores" anchor files "$cores" "$file"
    measure "$name convert $cores" convert "$file" -j "$cores"
    measure "$name responses 1" convert "$file" --format responses -j 1
    # LiteLLM takes 5-20x longer than the rest: two runs are enough to keep its best.
    if [ "$round" -le 2 ] && [ -x "$venv/bin/python" ]; then
      measure "$name litellm 1" litellm "$file"
    fi
  done
done

echo
echo "rollover $(git describe --always --dirty 2>/dev/null), $cores cores, best of $runs interleaved, $(date -u +%FT%TZ)"
printf '%-6s %-13s %2s %8s %6s %6s %8s %10s %9s %11s\n' corpus run j seconds "CPU s" cores MB/s records/s "peak RSS" "CPU us/rec"
for name in agent small; do
  for run in gproxy responses anchor-simd dry-run anchor-files convert litellm; do
    for threads in "$cores" 1; do
      key="$name $run $threads"
      [ -n "${best[$key]:-}" ] || continue
      s=${best[$key]}
      # The LiteLLM peer's seconds are its loop's, its CPU the whole process's (Python and
      # LiteLLM's import): no share of cores or CPU per record is worked out for it.
      if [ "$run" = litellm ]; then c=-; cr=-; us=-; else
        c=$(printf %.2f "${cpu[$key]}"); cr=$(awk "BEGIN{printf \"%.2f\", ${cpu[$key]}/$s}")
        us=$(awk "BEGIN{printf \"%.1f\", ${cpu[$key]}/${records[$name]}*1e6}"); fi
      label=$run; [ "$run" = dry-run ] && [ "$threads" = 1 ] && label=dry-one-core
      printf '%-6s %-13s %2s %8.2f %6s %6s %8.1f %10.0f %6.1f MB %11s\n' "$name" "$label" "$threads" "$s" \
        "$c" "$cr" "$(awk "BEGIN{print ${raw[$name]}/$s/1e6}")" \
        "$(awk "BEGIN{print ${records[$name]}/$s}")" "$(awk "BEGIN{print ${rss[$key]}/1024}")" "$us"
    done
  done
done
echo "gproxy: ../shared/bench/peer-gproxy; responses: convert --format responses; dry-one-core:"
echo "convert --dry-run -j 1 pinned to one core (taskset -c 0); convert: a Codex home written;"
echo "CPU s: user + sys of the run; cores: CPU s / seconds; CPU us/rec: CPU s per record."

# Peak RSS by input size: the agent corpus repeated (zstd frames concatenate), so the same
# records, more of them: every rollover run of the table at 0.5, 1 and 2 GB of input.
declare -A mem
if [ "$mode" = full ]; then
  for times in 2 4 8; do
    input=$work/agent-x$times.jsonl.zst
    for _ in $(seq "$times"); do cat "$agent"; done > "$input"
    for run in "--dry-run -j $cores" "-j $cores" "--format responses -j $cores" "--dry-run -j 1"; do
      # shellcheck disable=SC2086
      /usr/bin/time -f "%M" -o "$work/time" "$bin" convert "$input" --out "$work/mem-$times-$RANDOM" $run >/dev/null 2>&1
      mem["$times $run"]=$(cat "$work/time")
    done
    rm -f "$input"
  done
  echo
  printf '%-8s %-32s %9s\n' input run "peak RSS"
  for times in 2 4 8; do
    for run in "--dry-run -j $cores" "-j $cores" "--format responses -j $cores" "--dry-run -j 1"; do
      printf '%-8s %-32s %6.1f MB\n' "$(awk "BEGIN{printf \"%.2f GB\", ${raw[agent]}*$times/1e9}")" \
        "convert $run" "$(awk "BEGIN{print ${mem["$times $run"]}/1024}")"
    done
  done
fi

echo
printf '%-62s %7s %8s  %s\n' ratio value target verdict
verdict() { # label value target [max]: met when value >= target (<= target with max)
  local ok
  if [ "${4:-}" = max ]; then ok=$(awk "BEGIN{print ($2 <= $3)}"); else ok=$(awk "BEGIN{print ($2 >= $3)}"); fi
  printf '%-62s %6sx %7sx  %s\n' "$1" "$2" "$3" "$([ "$ok" = 1 ] && echo met || echo "NOT met")"
}
ratio() { # label numerator-key denominator-key target: time of den / time of num
  local a=${best[$2]:-} b=${best[$3]:-}
  if [ -z "$a" ] || [ -z "$b" ]; then printf '%-62s %7s %7sx  %s\n' "$1" - "$4" "not measured"; return; fi
  verdict "$1" "$(awk "BEGIN{printf \"%.2f\", $b/$a}")" "$4"
}
for name in agent small; do
  ratio "$name: gproxy $cores threads / convert --format responses -j $cores" "$name responses $cores" "$name gproxy $cores" 1.5
done
ratio "small: anchor simd $cores / convert --dry-run -j $cores" "small dry-run $cores" "small anchor-simd $cores" 1.0
ratio "agent: anchor simd $cores / convert --dry-run -j $cores" "agent dry-run $cores" "agent anchor-simd $cores" 1.3
ratio "agent: anchor files $cores / convert -j $cores (Codex home)" "agent convert $cores" "agent anchor-files $cores" 1.0
for name in agent small; do
  ratio "$name: --dry-run -j $cores / one core (taskset -c 0, -j 1)" "$name dry-run $cores" "$name dry-run 1" 1.8
done
if [ -n "${cpu[small gproxy $cores]:-}" ] && [ -n "${cpu[small responses $cores]:-}" ]; then
  verdict "small: CPU s per record, --format responses / gproxy" \
    "$(awk "BEGIN{printf \"%.2f\", ${cpu[small responses $cores]}/${cpu[small gproxy $cores]}}")" 1.0 max
fi
for name in agent small; do
  ratio "$name: LiteLLM peer / convert --format responses -j 1" "$name responses 1" "$name litellm 1" 5
done
peak=0 where=""
for key in "${!rss[@]}"; do
  case $key in *gproxy*|*anchor*|*litellm*) continue ;; esac
  [ "${rss[$key]}" -gt "$peak" ] && { peak=${rss[$key]}; where=$key; }
done
for key in "${!mem[@]}"; do
  [ "${mem[$key]}" -gt "$peak" ] && { peak=${mem[$key]}; where="memory: x$key"; }
done
printf '%-62s %5.0f MB %5s MB  %s\n' "peak RSS of every rollover run ($where)" "$(awk "BEGIN{print $peak/1024}")" 64 \
  "$(awk "BEGIN{print ($peak/1024 < 64) ? \"met\" : \"NOT met\"}")"

say "deleting the outputs in $work"
deleted "$work"
