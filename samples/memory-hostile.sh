#!/usr/bin/env bash
# Peak memory of the largest hostile inputs of issue 57, each built here (python3; nothing is
# kept in git) and run through `rollover` under /usr/bin/time: a chatty Claude Code session of
# 1 GB (~280-byte lines) at --jobs 1 and 2, two such sessions at --jobs 2, a 1,000-entry
# chain of Responses objects linked by previous_response_id (oldest and newest first), and a
# 400 MB ChatGPT conversations.json written on one line (6,841 conversations). Each row gives
# the input's size, the peak RSS, their ratio, and what `--memory` charges the work held whole
# (`charge`: the per-format cost in samples/BENCHMARKS.md; the run's budget, by default half the machine's
# memory, bounds the sum of what is admitted at once).
#
#   bash samples/memory-hostile.sh                 every case
#   bash samples/memory-hostile.sh CASE...         only these (session-j1 session-j2
#                                                  two-sessions chain-oldest chain-newest
#                                                  loose-export)
#
# ROLLOVER (default target/release/rollover) is the binary measured; SCALE (default 1) scales
# the sessions' and the export's sizes (0.1 for a quick look; the chain is 1,000 entries); WORK (default a fresh folder under /tmp, removed
# at the end) holds the inputs and outputs; MEMORY, when set, is passed as --memory.
# The runs are `audit` (a dry run: every stage but the writing), so the disk is not measured.
set -uo pipefail
cd "$(dirname "$0")/.."

cases_all=(session-j1 session-j2 two-sessions chain-oldest chain-newest loose-export)
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=("${cases_all[@]}")
bin=${ROLLOVER:-target/release/rollover}
[ -x "$bin" ] || { echo "memory-hostile: no binary $bin (cargo build --release)" >&2; exit 2; }
bin=$(readlink -f "$bin")
scale=${SCALE:-1}
work=${WORK:-$(mktemp -d /tmp/rollover-memory.XXXXXX)}
mkdir -p "$work"
[ -z "${WORK:-}" ] && trap 'rm -rf "$work"' EXIT
extra=()
[ -n "${MEMORY:-}" ] && extra=(--memory "$MEMORY")

cat > "$work/gen.py" <<'PY'
import json, os, sys

case, scale, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
os.makedirs(out, exist_ok=True)


def session(path, size, sid):
    """A Claude Code session of ~280-byte lines, user and assistant in turn; its lines."""
    written = lines = 0
    parent = None
    with open(path, "w") as f:
        while written < size:
            uuid = f"{lines:08d}-aaaa-4bbb-8ccc-dddddddddddd"
            if lines % 2 == 0:
                message = {"role": "user", "content": f"go on {lines}"}
            else:
                message = {"id": f"msg_{lines}", "type": "message", "role": "assistant",
                           "model": "claude-opus-4-6",
                           "content": [{"type": "text", "text": f"done {lines}"}]}
            line = json.dumps({"parentUuid": parent, "isSidechain": False,
                               "cwd": "/home/me/proj", "sessionId": sid, "version": "2.1.38",
                               "type": "user" if lines % 2 == 0 else "assistant",
                               "message": message, "uuid": uuid,
                               "timestamp": "2026-02-10T10:00:00.000Z"}) + "\n"
            f.write(line)
            written += len(line)
            lines += 1
            parent = uuid
    return lines


if case in ("session-j1", "session-j2"):
    lines = session(os.path.join(out, "session.jsonl"), int(1e9 * scale),
                    "11111111-2222-4333-8444-555555555555")
    print(os.path.join(out, "session.jsonl"), lines)
elif case == "two-sessions":
    lines = 0
    for k in range(2):
        lines += session(os.path.join(out, f"session-{k}.jsonl"), int(1e9 * scale),
                         f"11111111-2222-4333-8444-55555555555{k}")
    print(out, lines)
elif case in ("chain-oldest", "chain-newest"):
    n = 1000
    order = range(n) if case == "chain-oldest" else range(n - 1, -1, -1)
    path = os.path.join(out, "chain.jsonl")
    with open(path, "w") as f:
        for i in order:
            e = {"object": "response", "id": f"resp_{i}", "status": "completed", "model": "gpt-5",
                 "input": [{"role": "user", "content": f"step {i}: " + "please go on " * 30}],
                 "output": [{"type": "message", "role": "assistant",
                             "content": [{"type": "output_text", "text": f"done {i}: " + "ok " * 40}]}]}
            if i > 0:
                e["previous_response_id"] = f"resp_{i - 1}"
            f.write(json.dumps(e) + "\n")
    print(path, n)
elif case == "loose-export":
    # 6,841 conversations of ~58 KB on one line: 400 MB.
    n = max(1, int(6841 * scale))
    path = os.path.join(out, "conversations.json")
    with open(path, "w") as f:
        f.write("[")
        for i in range(n):
            mapping = {"root": {"id": "root", "parent": None, "children": ["m0"], "message": None}}
            parent = "root"
            for k in range(40):
                node = f"m{k}"
                role = "user" if k % 2 == 0 else "assistant"
                mapping[node] = {"id": node, "parent": parent,
                                 "children": [f"m{k + 1}"] if k < 39 else [],
                                 "message": {"author": {"role": role}, "create_time": 1.7e9 + k,
                                             "content": {"content_type": "text",
                                                         "parts": [f"{role} {i}.{k} " + "x" * 1300]}}}
                parent = node
            f.write(("," if i else "") + json.dumps({"id": f"conv-{i}", "title": f"c{i}",
                    "create_time": 1.7e9, "current_node": "m39", "mapping": mapping}))
        f.write("]\n")
    print(path, n)
else:
    sys.exit(f"no case {case}")
PY

# The charge `--memory` makes for a file of BYTES bytes and RECORDS records, held whole.
charge() {
  case $1 in
    session-*|two-sessions) awk -v b="$2" -v r="$3" 'BEGIN { printf "%d", (3 * b + 1024 * r) / 1048576 }' ;;
    chain-*) awk -v b="$2" -v r="$3" 'BEGIN { printf "%d", (12 * b + 8192 * r) / 1048576 }' ;;
    *) echo - ;;
  esac
}

echo "rollover: $bin"
printf '%-14s %6s %10s %10s %8s %10s %8s\n' case jobs input_MB peak_MB ratio charge_MB seconds
for c in "${cases[@]}"; do
  read -r input records < <(python3 "$work/gen.py" "$c" "$scale" "$work/$c") || exit 2
  bytes=$(du -sb "$input" | cut -f1)
  jobs=1
  case $c in session-j2|two-sessions) jobs=2 ;; esac
  rm -rf "$work/out"
  /usr/bin/time -o "$work/time" -f "%M %e" "$bin" audit "$input" --out "$work/out" \
    --quiet --jobs "$jobs" "${extra[@]}" >/dev/null 2>"$work/stderr"
  status=$?
  read -r rss secs < <(tail -n 1 "$work/time")
  [ "$status" -gt 1 ] && echo "memory-hostile: $c: exit $status: $(tail -n 1 "$work/stderr")" >&2
  printf '%-14s %6s %10d %10d %8s %10s %8s\n' "$c" "$jobs" $((bytes / 1048576)) $((rss / 1024)) \
    "$(awk -v r="$rss" -v b="$bytes" 'BEGIN { printf "%.2f", r * 1024 / b }')" \
    "$(charge "$c" "$bytes" "$records")" "$secs"
  rm -rf "$work/$c" "$work/out"
done
