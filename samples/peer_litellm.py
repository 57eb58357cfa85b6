#!/usr/bin/env python3
"""The LiteLLM peer for samples/bench.sh: Chat Completions records to Responses API input
items with LiteLLM's own converter, on one thread, for the same archive rollover reads.

    python3 samples/peer_litellm.py FILE.jsonl.zst [--out FILE]

It installs nothing: bench.sh runs it from a venv with `litellm` (and `zstandard`, else it
pipes through `zstd -dc`). For each line it finds the chat messages where rollover does for
the generator's shapes (`messages`, or a Batch API line's `body.messages` with the reply in
`response.body.choices[0].message`), converts them with
`LiteLLMResponsesTransformationHandler.convert_chat_completion_messages_to_responses_api`
(litellm/completion_extras/litellm_responses_transformation/transformation.py: the function
LiteLLM uses to send a chat request to the Responses API), serialises the items with
json.dumps and writes one line per record (to --out, or nowhere). It prints one line:
records, MB (decompressed), seconds, MB/s, records/s; the time excludes importing LiteLLM.
"""

import argparse
import json
import subprocess
import sys
import time


def lines(path):
    try:
        import zstandard

        with open(path, "rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            import io

            yield from io.BufferedReader(reader, 1 << 20)
    except ImportError:
        proc = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE)
        yield from proc.stdout
        proc.wait()


def messages_of(record):
    if not isinstance(record, dict):
        return None
    messages = record.get("messages")
    if isinstance(messages, list):
        return messages
    body = record.get("body")
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        messages = list(body["messages"])
        try:
            reply = record["response"]["body"]["choices"][0]["message"]
            messages.append(reply)
        except (KeyError, IndexError, TypeError):
            pass
        return messages
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("archive")
    parser.add_argument("--out")
    args = parser.parse_args()
    from litellm.completion_extras.litellm_responses_transformation.transformation import (
        LiteLLMResponsesTransformationHandler,
    )

    handler = LiteLLMResponsesTransformationHandler()
    out = open(args.out, "w") if args.out else None
    records = converted = failed = 0
    size = 0
    start = time.perf_counter()
    for line in lines(args.archive):
        size += len(line)
        if not line.strip():
            continue
        records += 1
        try:
            messages = messages_of(json.loads(line))
            if messages is None:
                continue
            items, instructions = handler.convert_chat_completion_messages_to_responses_api(
                messages
            )
            text = json.dumps({"instructions": instructions, "input": items}, default=str)
            converted += 1
            if out:
                out.write(text)
                out.write("\n")
        except Exception:  # a record LiteLLM refuses counts, as a rollover quarantine does
            failed += 1
    seconds = time.perf_counter() - start
    if out:
        out.close()
    print(
        f"litellm peer threads=1: {records} records ({converted} converted, {failed} refused) "
        f"{size / 1e6:.1f} MB in {seconds:.3f}s = {size / 1e6 / seconds:.1f} MB/s "
        f"{records / seconds:.0f} records/s"
    )


if __name__ == "__main__":
    sys.exit(main())
