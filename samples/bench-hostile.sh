#!/usr/bin/env bash
# Growth of time and memory on hostile inputs (issue 26, item 2: linear time in the input's
# size for every reader and stage; issue 57: and linear memory). Each case's input is built at
# N, 2N and 4N (python3, zstd) and run through `rollover convert` (`audit` where the input
# holds N conversations, so that creating N files is not what is timed) under /usr/bin/time;
# a table gives the seconds and peak RSS at each size and the ratios per doubling of both. A
# case is `ok` when all four ratios are <= 2.3 (linear is 2, quadratic 4); the script exits 1
# when one is not.
# The cases are issue 26's (blank lines, plain and zstd; JSON arrays pretty and compact;
# parallel calls, as tool messages and as one `tool_call_ids` list; a ChatGPT zip with 10
# images a conversation; a Claude Code session; a Batch results file after blank lines),
# four more found with them (ShareGPT observations, Anthropic SSE blocks, server-tool
# blocks of N types, requests that each start a conversation), an OTLP export of N traces
# in one JSON document (issue 61: streamed span by span, a trace held until its root span),
# a Parquet dataset of N rows (issue 61: 4N of its base is a 1 GB file; memory must stay
# flat in its size), and issue 57's (a chain of N Responses entries linked by
# previous_response_id, written oldest and newest first; a chatty Claude Code session of
# short lines; a ChatGPT conversations.json on one line; a zip whose conversations.json
# holds N bytes of white space).
#
# N doubles from the case's base until the faster of two runs takes MIN_SECONDS, so fixed
# costs do not hide the growth. N, 2N and 4N then run in RUNS rounds, the fastest of each
# kept; a ratio over 2.3 gets up to EXTRA more rounds (noise only slows a run down) unless
# every ratio is over 3, and 4N is not run when 2N says it would outlast TIMEOUT. Times are
# user CPU seconds (every thread): on a machine shared with other jobs, wall time swings
# with their load, and the kernel's share with the memory pressure, by more than the 15 %
# between linear and failing.
#
#   bash samples/bench-hostile.sh                  every case
#   bash samples/bench-hostile.sh CASE...          only these (`--list` names them)
#
# ROLLOVER (default target/release/rollover, built when missing) is the binary measured;
# CLOCK=user|cpu|wall (cpu is user + sys); RUNS (default 3); EXTRA (default 3); MIN_SECONDS
# (default 0.3); TIMEOUT (default 30) wall seconds a run may take; MEM_CAP (default 4G) its
# address space (prlimit --as), so that an input that needs memory without bound fails the
# case, not the machine; WORK (default a fresh folder under /tmp, removed at the end) the
# inputs and outputs.
set -uo pipefail
cd "$(dirname "$0")/.."

cases_all=(blank-lines blank-lines-zst pretty-array compact-array parallel-calls
  call-ids-list chatgpt-zip claude-code batch-blank sharegpt-calls anthropic-sse
  block-types request-chains otlp-traces parquet chain-oldest chain-newest chatty-session
  loose-export zip-whitespace)

case "${1:-}" in
  --list) printf '%s\n' "${cases_all[@]}"; exit 0 ;;
  -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=("${cases_all[@]}")
for c in "${cases[@]}"; do
  [[ " ${cases_all[*]} " == *" $c "* ]] || { echo "bench-hostile: no case \`$c\` (--list)" >&2; exit 2; }
done

clock=${CLOCK:-user}
runs=${RUNS:-3}
extra=${EXTRA:-3}
min_seconds=${MIN_SECONDS:-0.3}
timeout_s=${TIMEOUT:-30}
mem_cap=${MEM_CAP:-4G}
limit=2.3
bin=${ROLLOVER:-target/release/rollover}
if [ -z "${ROLLOVER:-}" ] && [ ! -x "$bin" ]; then
  echo "bench-hostile: building $bin" >&2
  cargo build --release >&2 || exit 2
fi
[ -x "$bin" ] || { echo "bench-hostile: no binary $bin" >&2; exit 2; }
bin=$(readlink -f "$bin")
for tool in python3 zstd /usr/bin/time prlimit timeout; do
  command -v "$tool" >/dev/null || { echo "bench-hostile: needs $tool" >&2; exit 2; }
done
work=${WORK:-$(mktemp -d /tmp/rollover-hostile.XXXXXX)}
mkdir -p "$work"
[ -z "${WORK:-}" ] && trap 'rm -rf "$work"' EXIT

# The inputs: `gen.py CASE N DIR` writes the case's input into DIR and prints its path.
cat > "$work/gen.py" <<'PY'
import base64, json, os, struct, subprocess, sys, zipfile

case, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(out, exist_ok=True)
RECORD = json.dumps({"messages": [{"role": "user", "content": "hi"},
                                  {"role": "assistant", "content": "hello"}]}) + "\n"

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def zz(n):
    return varint((n << 1) ^ (n >> 63))

class T:
    """Thrift compact protocol: fields of one struct, ids increasing."""
    def __init__(self):
        self.out = bytearray(); self.last = 0
    def head(self, fid, t):
        d = fid - self.last
        if 0 < d <= 15:
            self.out.append((d << 4) | t)
        else:
            self.out.append(t); self.out += zz(fid)
        self.last = fid
    def i32(self, fid, v): self.head(fid, 5); self.out += zz(v); return self
    def i64(self, fid, v): self.head(fid, 6); self.out += zz(v); return self
    def bin(self, fid, v): self.head(fid, 8); self.out += varint(len(v)) + v; return self
    def struct(self, fid, t): self.head(fid, 12); self.out += t.end(); return self
    def lst(self, fid, etype, items):
        self.head(fid, 9)
        n = len(items)
        self.out.append((n << 4) | etype if n < 15 else 0xf0 | etype)
        if n >= 15: self.out += varint(n)
        for it in items:
            if etype == 5: self.out += zz(it)
            elif etype == 8: self.out += varint(len(it)) + it
            else: self.out += it.end()
        return self
    def end(self): return bytes(self.out) + b"\x00"

def hybrid_ones(n):
    # RLE run of n ones (bit width 1), with its 4-byte length.
    body = varint(n << 1) + b"\x01"
    return struct.pack("<I", len(body)) + body

def bitpacked(levels):
    groups = (len(levels) + 7) // 8
    body = bytearray(varint((groups << 1) | 1))
    for g in range(groups):
        byte = 0
        for k, v in enumerate(levels[g * 8:g * 8 + 8]):
            byte |= v << k
        body.append(byte)
    return struct.pack("<I", len(body)) + bytes(body)

def plain(values):
    return b"".join(struct.pack("<I", len(v)) + v for v in values)

WORDS = b"the a of to and in is it for on with as this that be are was by or from at an file code test error value function return list string data result user model tool call output".split()

def text(i, n):
    return b" ".join(WORDS[(i * 7 + k * 13) % len(WORDS)] for k in range(n))

def parquet(path, rows, group_rows=1000):
    # A Parquet file as the Hub's ultrachat_200k lays one out (prompt_id, messages[{content,
    # role}]), written by hand (thrift compact protocol, plain pages, no compression): no
    # pyarrow needed. Rows of 1-3 turns, ~2 KB each; row groups of 1,000 rows.
    f = open(path, "wb")
    f.write(b"PAR1")
    groups = []
    for start in range(0, rows, group_rows):
        n = min(group_rows, rows - start)
        ids, contents, roles, reps = [], [], [], []
        for i in range(start, start + n):
            ids.append(b"bench-%010d" % i)
            turns = 1 + i % 3
            for t in range(turns):
                contents.append(b"row %d turn %d: " % (i, t) + text(i + t, 40 + (i * 31 + t) % 60))
                roles.append(b"user")
                contents.append(text(i * 3 + t, 80 + (i * 17 + t) % 120))
                roles.append(b"assistant")
                reps += [0 if t == 0 else 1, 1]
        columns = []
        for name, values, levels in ((["prompt_id"], ids, None),
                                     (["messages", "list", "element", "content"], contents, reps),
                                     (["messages", "list", "element", "role"], roles, reps)):
            data = plain(values) if levels is None else bitpacked(levels) + hybrid_ones(len(values)) + plain(values)
            dph = T().i32(1, len(values)).i32(2, 0).i32(3, 3).i32(4, 3)
            header = T().i32(1, 0).i32(2, len(data)).i32(3, len(data)).struct(5, dph).end()
            offset = f.tell()
            f.write(header); f.write(data)
            size = len(header) + len(data)
            meta = (T().i32(1, 6).lst(2, 5, [0, 3]).lst(3, 8, [p.encode() for p in name]).i32(4, 0)
                    .i64(5, len(values)).i64(6, size).i64(7, size).i64(9, offset))
            columns.append((T().i64(2, offset).struct(3, meta), size))
        total = sum(s for _, s in columns)
        groups.append(T().lst(1, 12, [c for c, _ in columns]).i64(2, total).i64(3, n))
    schema = [T().bin(4, b"bench").i32(5, 2),
              T().i32(1, 6).i32(3, 0).bin(4, b"prompt_id").i32(6, 0),
              T().i32(3, 0).bin(4, b"messages").i32(5, 1).i32(6, 3),
              T().i32(3, 2).bin(4, b"list").i32(5, 1),
              T().i32(3, 0).bin(4, b"element").i32(5, 2),
              T().i32(1, 6).i32(3, 0).bin(4, b"content").i32(6, 0),
              T().i32(1, 6).i32(3, 0).bin(4, b"role").i32(6, 0)]
    footer = T().i32(1, 1).lst(2, 12, schema).i64(3, rows).lst(4, 12, groups).bin(6, b"rollover bench").end()
    f.write(footer); f.write(struct.pack("<I", len(footer))); f.write(b"PAR1")
    f.close()


def path(name):
    return os.path.join(out, name)


def blank_lines(f, count):
    chunk = "\n" * (1 << 20)
    for _ in range(count >> 20):
        f.write(chunk)
    f.write("\n" * (count & ((1 << 20) - 1)))


def chat_calls(listed):
    calls = [{"id": f"call_{i}", "type": "function",
              "function": {"name": f"tool_{i % 7}", "arguments": "{}"}} for i in range(n)]
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": calls}]
    if listed:
        msgs.append({"role": "tool", "tool_call_ids": [f"call_{i}" for i in range(n)],
                     "content": "shared"})
    else:
        msgs += [{"role": "tool", "tool_call_id": f"call_{i}", "content": f"r{i}"}
                 for i in range(n)]
    msgs.append({"role": "assistant", "content": "done"})
    return json.dumps({"messages": msgs}) + "\n"


if case == "blank-lines":
    # N blank lines before one record.
    p = path("blank.jsonl")
    with open(p, "w") as f:
        blank_lines(f, n)
        f.write(RECORD)
elif case == "blank-lines-zst":
    p = path("blank.jsonl.zst")
    with open(p, "wb") as f:
        z = subprocess.Popen(["zstd", "-q", "-c"], stdin=subprocess.PIPE, stdout=f, text=True)
        blank_lines(z.stdin, n)
        z.stdin.write(RECORD)
        z.stdin.close()
        z.wait()
elif case == "pretty-array":
    # A JSON document: an array of N records, pretty-printed (each row ~12 lines).
    p = path("rows.json")
    rows = [{"messages": [{"role": "user", "content": f"row {i}"},
                          {"role": "assistant", "content": "ok"}]} for i in range(n)]
    with open(p, "w") as f:
        json.dump(rows, f, indent=2)
elif case == "compact-array":
    # `[{},{},...]`: N empty objects on one line, the brackets on their own (a first line that
    # is not a whole value makes the file one JSON document, split into its elements).
    p = path("empty.json")
    with open(p, "w") as f:
        f.write("[\n" + ",".join(["{}"] * n) + "\n]\n")
elif case == "parallel-calls":
    # One chat record: an assistant message with N parallel calls, N tool messages.
    p = path("calls.jsonl")
    with open(p, "w") as f:
        f.write(chat_calls(listed=False))
elif case == "call-ids-list":
    # The same N calls answered by one tool message with a `tool_call_ids` list.
    p = path("ids.jsonl")
    with open(p, "w") as f:
        f.write(chat_calls(listed=True))
elif case == "chatgpt-zip":
    # A ChatGPT export zip: N conversations, each showing 10 of the N*10 images in the zip.
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC"
                           "hwGA60e6kgAAAABJRU5ErkJggg==")
    p = path("export.zip")
    with zipfile.ZipFile(p, "w") as z:
        convs = []
        for i in range(n):
            pointers = [{"content_type": "image_asset_pointer",
                         "asset_pointer": f"file-service://file-{i:08d}-{k}",
                         "width": 1, "height": 1} for k in range(10)]
            user = {"author": {"role": "user"}, "recipient": "all", "create_time": 1.7e9,
                    "content": {"content_type": "multimodal_text", "parts": ["look"] + pointers}}
            reply = {"author": {"role": "assistant"}, "recipient": "all", "create_time": 1.7e9,
                     "content": {"content_type": "text", "parts": ["pixels"]}}
            mapping = {
                "root": {"id": "root", "parent": None, "children": ["u"], "message": None},
                "u": {"id": "u", "parent": "root", "children": ["a"], "message": user},
                "a": {"id": "a", "parent": "u", "children": [], "message": reply},
            }
            convs.append(json.dumps({"id": f"conv-{i}", "title": f"c{i}", "create_time": 1.7e9,
                                     "current_node": "a", "mapping": mapping}))
        z.writestr("conversations.json", "[\n" + ",\n".join(convs) + "\n]\n",
                   compress_type=zipfile.ZIP_DEFLATED)
        for i in range(n):
            for k in range(10):
                z.writestr(f"file-{i:08d}-{k}-image.png", png)
elif case == "claude-code":
    # A Claude Code session of N lines: tool_use and tool_result in turn, one chain.
    p = path("session.jsonl")
    sid = "11111111-2222-4333-8444-555555555555"

    def line(kind, uuid, parent, message):
        return json.dumps({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": sid,
                           "cwd": "/home/me/proj", "version": "2.1.38", "isSidechain": False,
                           "userType": "external", "timestamp": "2026-02-10T10:00:00.000Z",
                           "message": message}) + "\n"

    with open(p, "w") as f:
        f.write(line("user", "u", None, {"role": "user", "content": "go"}))
        parent = "u"
        for i in range(n // 2):
            use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                   "input": {"command": "ls"}}
            f.write(line("assistant", f"a{i}", parent,
                         {"id": f"msg_{i}", "type": "message", "role": "assistant",
                          "model": "claude-opus-4-6", "content": [use]}))
            result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "ok"}
            f.write(line("user", f"r{i}", f"a{i}", {"role": "user", "content": [result]}))
            parent = f"r{i}"
elif case == "batch-blank":
    # Batch API: a requests file, and a results file of N blank lines before its result.
    p = path("batch")
    os.makedirs(p, exist_ok=True)
    with open(os.path.join(p, "requests.jsonl"), "w") as f:
        f.write(json.dumps({"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions",
                            "body": {"model": "gpt-4o-mini",
                                     "messages": [{"role": "user", "content": "hi"}]}}) + "\n")
    with open(os.path.join(p, "results.jsonl"), "w") as f:
        blank_lines(f, n)
        body = {"id": "chatcmpl-1", "created": 1727784100, "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "hello"}}]}
        f.write(json.dumps({"id": "batch_req_1", "custom_id": "req-1",
                            "response": {"status_code": 200, "body": body},
                            "error": None}) + "\n")
elif case == "sharegpt-calls":
    # A ShareGPT row: one function_call turn of N parallel calls, N observations.
    p = path("sharegpt.jsonl")
    calls = json.dumps([{"name": "f", "arguments": {"i": i}} for i in range(n)])
    turns = [{"from": "human", "value": "go"}, {"from": "function_call", "value": calls}]
    turns += [{"from": "observation", "value": f"r{i}"} for i in range(n)]
    turns.append({"from": "gpt", "value": "done"})
    with open(p, "w") as f:
        f.write(json.dumps({"conversations": turns}) + "\n")
elif case == "anthropic-sse":
    # A streamed Anthropic reply: N tool_use blocks, then a delta for each.
    p = path("stream.jsonl")
    ev = lambda d: {"event": d["type"], "data": d}
    events = [ev({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                  "role": "assistant", "model": "claude-sonnet-4-0", "content": []}})]
    events += [ev({"type": "content_block_start", "index": i, "content_block": {
        "type": "tool_use", "id": f"toolu_{i}", "name": "f", "input": {}}}) for i in range(n)]
    events += [ev({"type": "content_block_delta", "index": i, "delta": {
        "type": "input_json_delta", "partial_json": "{}"}}) for i in range(n)]
    events.append(ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}))
    record = {"request": {"uri": "https://api.anthropic.com/v1/messages", "body": {
        "model": "claude-sonnet-4-0", "max_tokens": 1024, "stream": True,
        "messages": [{"role": "user", "content": "go"}]}},
        "response": {"status": 200, "sse_events": events}}
    with open(p, "w") as f:
        f.write(json.dumps(record) + "\n")
elif case == "block-types":
    # An Anthropic request whose reply holds N server-tool results of N types (a note each).
    p = path("types.jsonl")
    blocks = [{"type": f"t{i}_tool_result", "tool_use_id": f"srv_{i}", "content": "r"}
              for i in range(n)]
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": blocks + [{"type": "text", "text": "done"}]}]
    with open(p, "w") as f:
        f.write(json.dumps({"model": "claude-opus-4-6", "max_tokens": 10,
                            "messages": messages}) + "\n")
elif case == "parquet":
    # A Parquet dataset of N rows (~2 KB each: 4N of the base is ~1 GB).
    p = path("train.parquet")
    parquet(p, n)
elif case == "request-chains":
    # N logged Anthropic requests, none resending another's history: N conversations.
    p = path("requests.jsonl")
    with open(p, "w") as f:
        for i in range(n):
            f.write(json.dumps({"model": "claude-opus-4-6", "max_tokens": 10, "messages": [
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": "a"},
                {"role": "user", "content": "more"}]}) + "\n")
elif case == "otlp-traces":
    # N traces of two inference spans (the second resending the first's history) and a
    # root span written last, all in ONE OTLP export document, as a collector dump would be.
    p = path("traces.json")
    with open(p, "w") as f:
        f.write('{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"bench"},"spans":[')
        for i in range(n):
            trace = "%032x" % (i + 1)
            q = [{"role": "user", "parts": [{"type": "text", "content": f"question {i}"}]}]
            a = [{"role": "assistant", "parts": [{"type": "text", "content": "answer " * 20}], "finish_reason": "stop"}]
            h = q + a + [{"role": "user", "parts": [{"type": "text", "content": "more"}]}]
            def span(sid, parent, start, attrs):
                return json.dumps({"traceId": trace, "spanId": sid, "parentSpanId": parent,
                                   "name": "chat", "startTimeUnixNano": str(start),
                                   "attributes": [{"key": k, "value": {"stringValue": json.dumps(v)}}
                                                  for k, v in attrs]})
            spans = [span("0000000000000002", "0000000000000001", 2, [("gen_ai.input.messages", q), ("gen_ai.output.messages", a)]),
                     span("0000000000000003", "0000000000000001", 3, [("gen_ai.input.messages", h), ("gen_ai.output.messages", a)]),
                     span("0000000000000001", "", 1, [])]
            f.write(("," if i else "") + ",".join(spans))
        f.write("]}]}]}\n")
elif case in ("chain-oldest", "chain-newest"):
    # N stored Responses objects, each continuing the one before by previous_response_id.
    p = path("chain.jsonl")
    order = range(n) if case == "chain-oldest" else range(n - 1, -1, -1)
    with open(p, "w") as f:
        for i in order:
            e = {"object": "response", "id": f"resp_{i}", "status": "completed", "model": "gpt-5",
                 "input": [{"role": "user", "content": f"step {i}"}],
                 "output": [{"type": "message", "role": "assistant",
                             "content": [{"type": "output_text", "text": f"done {i}"}]}]}
            if i > 0:
                e["previous_response_id"] = f"resp_{i - 1}"
            f.write(json.dumps(e) + "\n")
elif case == "chatty-session":
    # A Claude Code session of N short lines (~280 bytes), user and assistant in turn.
    p = path("chatty.jsonl")
    sid = "11111111-2222-4333-8444-555555555555"
    with open(p, "w") as f:
        parent = None
        for i in range(n):
            uuid = f"{i:08d}-aaaa-4bbb-8ccc-dddddddddddd"
            if i % 2 == 0:
                message = {"role": "user", "content": f"go on {i}"}
            else:
                message = {"id": f"msg_{i}", "type": "message", "role": "assistant",
                           "model": "claude-opus-4-6", "content": [{"type": "text", "text": f"done {i}"}]}
            f.write(json.dumps({"parentUuid": parent, "isSidechain": False, "cwd": "/home/me/proj",
                                "sessionId": sid, "version": "2.1.38",
                                "type": "user" if i % 2 == 0 else "assistant", "message": message,
                                "uuid": uuid, "timestamp": "2026-02-10T10:00:00.000Z"}) + "\n")
            parent = uuid
elif case == "loose-export":
    # A ChatGPT conversations.json of N conversations on one line, as the export writes it.
    p = path("conversations.json")
    with open(p, "w") as f:
        f.write("[")
        for i in range(n):
            user = {"author": {"role": "user"}, "create_time": 1.7e9,
                    "content": {"content_type": "text", "parts": [f"question {i}"]}}
            reply = {"author": {"role": "assistant"}, "create_time": 1.7e9,
                     "content": {"content_type": "text", "parts": ["answer"]}}
            mapping = {"root": {"id": "root", "parent": None, "children": ["u"], "message": None},
                       "u": {"id": "u", "parent": "root", "children": ["a"], "message": user},
                       "a": {"id": "a", "parent": "u", "children": [], "message": reply}}
            f.write(("," if i else "") + json.dumps({"id": f"conv-{i}", "title": f"c{i}",
                    "create_time": 1.7e9, "current_node": "a", "mapping": mapping}))
        f.write("]\n")
elif case == "zip-whitespace":
    # An export zip whose conversations.json is one object holding N bytes of white space.
    p = path("export.zip")
    with zipfile.ZipFile(p, "w") as z:
        info = zipfile.ZipInfo("conversations.json")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            f.write(b'[{"id": "w", "mapping": {')
            block = b" " * (1 << 20)
            for _ in range(n >> 20):
                f.write(block)
            f.write(b" " * (n & ((1 << 20) - 1)))
            f.write(b"}}]")
else:
    sys.exit(f"no case {case}")
print(p)
PY

# Per case: the base N, the largest N calibration may reach, and the command.
base_of() {
  case $1 in
    blank-lines|blank-lines-zst|batch-blank) echo "262144 134217728 convert" ;;
    pretty-array) echo "2048 1048576 audit" ;;
    compact-array) echo "16384 33554432 audit" ;;
    parallel-calls|call-ids-list|sharegpt-calls) echo "32768 1048576 convert" ;;
    anthropic-sse|block-types) echo "16384 1048576 convert" ;;
    chatgpt-zip) echo "64 65536 audit" ;;
    claude-code) echo "32768 4194304 convert" ;;
    request-chains) echo "1024 262144 audit" ;;
    otlp-traces) echo "2048 4194304 audit" ;;
    chain-oldest|chain-newest) echo "2048 1048576 audit" ;;
    chatty-session) echo "32768 8388608 audit" ;;
    loose-export) echo "4096 1048576 audit" ;;
    zip-whitespace) echo "16777216 4294967296 audit" ;;
    parquet) echo "131072 524288 audit" ;;
  esac
}

# once INPUT OUT COMMAND: one run; prints "seconds rss_kb wall_seconds status" (status: ok,
# timeout, or exit-CODE with the run's last line of stderr on ours).
once() {
  local input=$1 out=$2 cmd=$3 tf=$2.time status secs wall user sys rss
  rm -rf "$out"
  /usr/bin/time -o "$tf" -f "%e %U %S %M" timeout -k 5 "$timeout_s" \
    prlimit --as="$(numfmt --from=iec "$mem_cap")" \
    "$bin" "$cmd" "$input" --out "$out" --quiet >/dev/null 2>"$out.stderr"
  status=$?
  # time prints "Command exited with non-zero status" first when it did.
  read -r wall user sys rss < <(tail -n 1 "$tf")
  case $clock in
    wall) secs=$wall ;;
    user) secs=$user ;;
    *) secs=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }') ;;
  esac
  case $status in
    0|1) status=ok ;;
    124|137) status=timeout ;;
    *) if grep -q "memory allocation of" "$out.stderr"; then
         status="over $mem_cap"
       else
         echo "bench-hostile: $input: exit $status: $(tail -n 1 "$out.stderr")" >&2
         status=exit-$status
       fi ;;
  esac
  rm -rf "$out" "$tf" "$out.stderr"
  echo "$secs $rss $wall $status"
}

gen() { python3 "$work/gen.py" "$1" "$2" "$work/$1-$2"; }
mb() { awk -v k="$1" 'BEGIN { if (k > 0) printf "%dM", k / 1024; else printf "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a < 0.01) a = 0.01; printf "%.2f", b / a }'; }
over() { awk -v r="$1" -v l="$2" 'BEGIN { exit !(r > l) }'; }

echo "rollover: $bin"
echo "clock: $clock seconds, best of $runs (up to $((runs + extra)) for a ratio in doubt); N doubled until a run takes ${min_seconds} s;"
echo "a run may take ${timeout_s} s and ${mem_cap} of address space; ok: the ratios of time and of memory <= $limit"
echo
printf '%-16s %-7s %10s %7s %7s %7s %7s %7s %7s %6s %6s %6s %6s  %s\n' \
  case run N s@N s@2N s@4N rss@N rss@2N rss@4N 2N/N 4N/2N m2N/N m4N/2N verdict
failed=0
started=$SECONDS
for c in "${cases[@]}"; do
  read -r n max cmd < <(base_of "$c")
  # Calibrate: the smallest N from the base, doubling, whose faster of two runs takes
  # min_seconds (or fails).
  while :; do
    input=$(gen "$c" "$n") || exit 2
    read -r secs rss wall status < <(once "$input" "$work/out" "$cmd")
    if [ "$status" = ok ] && over "$secs" "$min_seconds"; then
      read -r again rss wall status < <(once "$input" "$work/out" "$cmd")
      over "$secs" "$again" && secs=$again
    fi
    rm -rf "$work/$c-$n"
    [ "$status" != ok ] && break
    over "$secs" "$min_seconds" && break
    [ $((n * 2)) -gt "$max" ] && break
    n=$((n * 2))
  done
  # Then N, 2N and 4N in rounds (a burst of load elsewhere slows all three alike), the
  # fastest run of each kept; a run over 4 s is not repeated (the noise is small against
  # it), a size that failed is not run again, nor are the sizes above it.
  sizes=("$n" $((n * 2)) $((n * 4)))
  best=(- - -) rss_of=(0 0 0) wall_of=(0 0 0) state=(ok ok ok) inputs=()
  for k in 0 1 2; do inputs[k]=$(gen "$c" "${sizes[k]}") || exit 2; done
  for ((round = 0; round < runs + extra; round++)); do
    if [ "$round" -gt 0 ]; then
      # Ratios all over 3 fail whatever the noise: no more rounds. One over the limit
      # otherwise may be noise: up to EXTRA more rounds to see whether it stays.
      doubt=0 clear=1
      for k in 1 2; do
        [ "${best[k]}" = - ] && continue
        q=$(ratio "${best[k - 1]}" "${best[k]}")
        over "$q" 3 || clear=0
        over "$q" "$limit" && doubt=1
      done
      [ "$clear" = 1 ] && [ "$doubt" = 1 ] && break
      [ "$round" -ge "$runs" ] && [ "$doubt" = 0 ] && break
    fi
    for k in 0 1 2; do
      [ "${state[k]}" != ok ] && continue
      [ "$round" -gt 0 ] && over "${best[k]}" 4 && continue
      if [ "$k" = 2 ] && [ "$round" = 0 ]; then
        # 4N is not run when 2N grew so much that it would outlast TIMEOUT.
        guess=$(awk -v a="${wall_of[0]}" -v b="${wall_of[1]}" \
          'BEGIN { if (a < 0.01) a = 0.01; printf "%d", b * b / a }')
        if [ "$guess" -gt "$timeout_s" ]; then state[2]="skipped, ~${guess} s"; continue; fi
      fi
      read -r secs rss wall status < <(once "${inputs[k]}" "$work/out" "$cmd")
      if [ "$status" != ok ]; then
        state[k]=$status
        for ((j = k + 1; j < 3; j++)); do state[j]=-; done
        continue
      fi
      if [ "${best[k]}" = - ] || over "${best[k]}" "$secs"; then
        best[k]=$secs wall_of[k]=$wall
      fi
      [ "$rss" -gt "${rss_of[k]}" ] && rss_of[k]=$rss
    done
  done
  for k in 0 1 2; do rm -rf "$work/$c-${sizes[k]}"; done
  q1=- q2=- m1=- m2=- verdict=ok
  for k in 0 1 2; do
    if [ "${state[k]}" != ok ]; then
      best[k]=- rss_of[k]=0
      [ "$verdict" = ok ] && verdict="FAIL (${state[k]} at $(echo N 2N 4N | cut -d' ' -f$((k + 1))))"
    fi
  done
  [ "${state[1]}" = ok ] && q1=$(ratio "${best[0]}" "${best[1]}")
  [ "${state[2]}" = ok ] && q2=$(ratio "${best[1]}" "${best[2]}")
  # Memory per doubling, as time: peak RSS (kB), the largest of the runs at each size.
  [ "${state[1]}" = ok ] && m1=$(ratio "${rss_of[0]}" "${rss_of[1]}")
  [ "${state[2]}" = ok ] && m2=$(ratio "${rss_of[1]}" "${rss_of[2]}")
  if [ "$verdict" = ok ] && { over "$q1" "$limit" || over "$q2" "$limit"; }; then
    verdict=FAIL
  fi
  if [ "$verdict" = ok ] && { over "$m1" "$limit" || over "$m2" "$limit"; }; then
    verdict="FAIL (memory)"
  fi
  [ "$verdict" != ok ] && failed=1
  printf '%-16s %-7s %10s %7s %7s %7s %7s %7s %7s %6s %6s %6s %6s  %s\n' \
    "$c" "$cmd" "$n" "${best[0]}" "${best[1]}" "${best[2]}" \
    "$(mb "${rss_of[0]}")" "$(mb "${rss_of[1]}")" "$(mb "${rss_of[2]}")" "$q1" "$q2" "$m1" "$m2" \
    "$verdict"
done
echo
echo "$((SECONDS - started)) s"
exit $failed
