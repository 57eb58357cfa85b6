#!/usr/bin/env python3
"""Deterministic generator of large transcript archives, for benchmarks.

    python3 samples/generate.py --records 100000 --out /tmp/big.jsonl.zst
    python3 samples/generate.py --kind agent --records 3000 --out /tmp/agent.jsonl.zst

Same arguments, same bytes: the random stream is seeded (--seed) and nothing reads the clock.
The records mix the shapes rollover reads (Chat Completions with tools, reasoning, refusals,
images; Batch API lines; evals `input`; legacy function calls; turn lists) with realistic text
sizes. Output compression follows the name: `.zst` (needs the `zstd` command), `.gz`, or plain.
"""
import argparse
import gzip
import json
import random
import shutil
import subprocess
import sys

WORDS = ("the a of to and in is it for on with as this that be are was by or from at an file "
         "code test error value function return list string data result user model tool call "
         "output input message system assistant archive migration rollout session").split()


def text(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def chat(rng, i, max_turns=6, max_output=300, object_args=True):
    msgs = [{"role": "system", "content": "You are assistant #%d. %s" % (i % 97, text(rng, 10, 60))}]
    turns = rng.randint(1, max_turns)
    call = 0
    for _ in range(turns):
        if rng.random() < 0.15:
            msgs.append({"role": "user", "content": [
                {"type": "text", "text": text(rng, 5, 40)},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "detail": "auto"}}]})
        else:
            msgs.append({"role": "user", "content": text(rng, 5, 80)})
        for _ in range(rng.randint(0, 3)):
            call += 1
            cid = "call_%d_%d" % (i, call)
            args = {"query": text(rng, 1, 6), "n": rng.randint(1, 9)}
            msgs.append({"role": "assistant", "content": text(rng, 3, 20) if rng.random() < 0.5 else None,
                         "tool_calls": [{"id": cid, "type": "function", "function": {
                             "name": rng.choice(["search", "shell", "read_file"]),
                             "arguments": args if rng.random() < 0.1 and object_args else json.dumps(args)}}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "content": text(rng, 10, max_output)})
        reply = {"role": "assistant", "content": text(rng, 10, 150)}
        if rng.random() < 0.1:
            reply["reasoning_content"] = text(rng, 10, 60)
        msgs.append(reply)
    return {"id": "gen-%d" % i, "created": 1700000000 + i, "model": "gpt-4o", "messages": msgs}


def batch(rng, i):
    return {"custom_id": "req-%d" % i, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [
                {"role": "system", "content": text(rng, 5, 30)}, {"role": "user", "content": text(rng, 5, 60)}]},
            "response": {"status_code": 200, "body": {"created": 1700000000 + i, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text(rng, 5, 80)}, "finish_reason": "stop"}]}}}


def evals(rng, i):
    if rng.random() < 0.2:
        return {"input": text(rng, 5, 40), "ideal": "x"}
    return {"input": [{"role": "system", "content": text(rng, 5, 30)},
                      {"role": "system", "name": "example_user", "content": text(rng, 3, 10)},
                      {"role": "system", "name": "example_assistant", "content": text(rng, 1, 5)},
                      {"role": "user", "content": text(rng, 3, 20)}], "ideal": "y"}


def legacy(rng, i):
    return {"messages": [
        {"role": "user", "content": text(rng, 5, 40)},
        {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": json.dumps({"q": text(rng, 1, 4)})}},
        {"role": "function", "name": "lookup", "content": text(rng, 10, 200)},
        {"role": "assistant", "content": text(rng, 5, 60)}]}


def turns(rng, i):
    return {"id": "turns_%d" % i, "question": [[{"role": "user", "content": text(rng, 5, 30)}] for _ in range(rng.randint(1, 4))]}


def code(rng, lines):
    return "\n".join("    " * rng.randint(0, 3) + text(rng, 2, 12) for _ in range(lines))


def agent(rng, i):
    """An agent trajectory of about 80 KB: a long system prompt, one task, then many steps of
    commentary, tool calls and large tool outputs (file contents, command output)."""
    msgs = [{"role": "system", "content": "You are a coding agent #%d.\n%s" % (i % 89, code(rng, 40))},
            {"role": "user", "content": text(rng, 20, 120)}]
    for step in range(rng.randint(18, 30)):
        cid = "call_%d_%d" % (i, step)
        name = rng.choice(["shell", "read_file", "apply_patch", "search"])
        args = {"command": text(rng, 2, 10)} if name == "shell" else {"path": "src/%s.rs" % rng.choice(WORDS)}
        msgs.append({"role": "assistant", "content": text(rng, 5, 60) if rng.random() < 0.6 else None,
                     "tool_calls": [{"id": cid, "type": "function",
                                     "function": {"name": name, "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": code(rng, rng.randint(30, 90))})
    msgs.append({"role": "assistant", "content": text(rng, 40, 200)})
    return {"id": "agent-%d" % i, "created": 1700000000 + i, "model": "gpt-5", "messages": msgs}


def small(rng, i):
    """A small Chat Completions record of about 2 KB: one or two turns, short tool outputs, and
    arguments always a JSON string, as the API sends them (the gproxy peer refuses an object)."""
    return chat(rng, i, max_turns=2, max_output=60, object_args=False)


SHAPES = [(chat, 60), (batch, 15), (evals, 10), (legacy, 10), (turns, 5)]
# small: only Chat Completions `messages` records, the shapes every Chat -> Responses
# converter reads (the gproxy peer converts each one), so both sides convert the same records.
KINDS = {"mixed": SHAPES, "agent": [(agent, 1)], "small": [(small, 3), (legacy, 1)]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", choices=sorted(KINDS), default="mixed",
                    help="mixed: small records of every shape, 1-10 KB (default); agent: agent trajectories of "
                    "about 80 KB; small: Chat Completions records of about 3 KB")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    shapes = [s for s, w in KINDS[args.kind] for _ in range(w)]
    plain = args.out
    if args.out.endswith(".zst"):
        if not shutil.which("zstd"):
            sys.exit("generate.py: the zstd command is needed for .zst output (apt-get install zstd)")
        plain = args.out[:-4]
    opener = (lambda p: gzip.GzipFile(p, "wb", mtime=0)) if plain.endswith(".gz") else (lambda p: open(p, "wb"))
    with opener(plain) as f:
        for i in range(args.records):
            record = rng.choice(shapes)(rng, i)
            f.write((json.dumps(record, separators=(",", ":")) + "\n").encode())
    if plain != args.out:
        subprocess.run(["zstd", "-q", "-f", "--rm", "-3", plain, "-o", args.out], check=True)


if __name__ == "__main__":
    main()
