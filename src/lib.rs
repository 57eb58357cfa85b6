//! rollover: migrate archives of chat-style transcripts into OpenAI Responses items and Codex
//! rollout files.
//!
//! The pipeline, one module per stage (the architecture below):
//! [`source`] (discover, decompress, split) → [`input`] (parse, read shapes) → [`rules`]
//! (classify) → [`convert`] (Responses items) → [`validate`] (invariants) → [`output`] (write)
//! beside [`audit`] (decisions, accounting, summary). [`pipeline`] runs them in parallel;
//! [`commands`] are the CLI's subcommands.
//!
//! # Architecture
//!
//! One crate, a library plus a thin `main.rs` (and `fuzz/`, cargo-fuzz's own workspace, beside
//! it); modules follow the pipeline, and dependencies point one way along it:
//!
//! ```text
//! model ← source, rules ← input ← convert ← pipeline ← commands
//!           audit (uses model, rules) ← convert       validate (uses model, rules only)
//!           output (uses model, rules, validate) ← pipeline
//! ```
//!
//! ```text
//! model/     data only: the Transcript read from a record (its Role, SourceFormat, source notes),
//!            the converted items, rollout lines and Responses items (the wire types, each
//!            declared once in a table, rollout/table.rs, that emits its serde derive and its
//!            fast writer; read back as views: view/template.rs reads the common lines (messages, calls,
//!            outputs, message events, the session meta) as byte templates, view/scan.rs any
//!            line by hand with serde_json's acceptance, the serde reader their reference in the
//!            tests), scan.rs (the strict one-pass JSON scanner those views and the Responses
//!            body check share; a body is checked by templates, validate/responses/template.rs,
//!            or else in its outline, strings as spans), tape.rs (simd-json's tape in a
//!            per-thread scratch, for input records), the typed reasons every
//!            stage names (rule.rs: RuleRef, Builtin and PolicyId from the one table of policies;
//!            quarantine.rs: the quarantine classes; invariant.rs), Location and Located (a cause
//!            with its place, formatted once), RFC 3339 timestamps, JSON string escaping (json.rs),
//!            xxh3 (hash.rs: record identities, the manifest's digests, shard keys)
//! source/    discover files, detect compression (open/: zstd blocks; a zip's lines through the
//!            hook of the reader whose files come zipped, ArchiveLines),
//!            split records (with locations, damage); archive.rs: a zip's members, read within a
//!            cap; shard.rs: which files and byte ranges a shard owns, the engines' index
//! rules/     load, merge and check rule files (the `[policy]` section generated from model's
//!            policy table); classify; the marker registry; record paths
//! input/     one FormatReader per source format (format.rs: the trait, the registry, detection):
//!            chat.rs (with its tape fast path, `read_fast`), claude_code.rs, codex.rs (Codex
//!            rollouts, items kept as read: model's rollout/native.rs, convert's native.rs),
//!            chatgpt/ (the walk, the export's files, export.rs: the export zip's conversations
//!            as lines, its archive_lines), anthropic.rs, responses.rs, chat_stream.rs,
//!            sharegpt.rs, otel/; what they share (no reader imports another): parse.rs
//!            (simd-json, Unicode repair), media.rs (content parts, tool outputs), blocks.rs
//!            (content blocks), chain.rs (the one chain driver of the API logs), sse.rs (SSE
//!            lines and logged events), batch.rs (Batch API results), inside.rs (the only way a reader opens a file a record points to)
//! audit/     decisions (each with its rule id), text accounting, the run summary, the reports
//!            (report.rs: one data model, minijinja templates in templates/, plotters charts)
//! convert/   Transcript -> Responses items. build.rs walks the messages and hands each to the
//!            file that owns its concern: context.rs (slots, developer and contextual grouping),
//!            user.rs (turns, lookalike fragments, parts), assistant.rs (reasoning, phase given,
//!            empty messages), tools.rs (the call ledger: ids, pairing, missing and orphan
//!            outputs), parts.rs (non-text parts by policy); then phase.rs, ids.rs, render.rs (the
//!            `Render` trait: Codex rollout, or responses.rs for Responses bodies)
//! validate/  the invariants, on the written bytes, read through model's rollout views (lines.rs,
//!            meta.rs, items.rs, message.rs), with its own timestamp, UUID and JSON-shape checks;
//!            generation.rs names a rollout's generation and checks a paginated one's ordinals
//! output/    Codex home: private atomic writes and run folders (home.rs; a shard's state in
//!            rollover/shards/KKKK-of-NNNN), the lock, the manifest (a file's rollouts held
//!            compact: rollouts.rs), what a shard saw of the
//!            other shards' Batch API results files (results_seen.rs),
//!            the guard that never clobbers a changed session, the Responses body files
//!            (bodies.rs), quarantine entries (location, class and reason read from one Located
//!            cause); sink.rs: the `Output` trait the pipeline writes through (Codex home or
//!            Responses files, chosen once per run)
//! pipeline/  reader/ (one thread, bounded batches: mod.rs; the one loop of a file's events,
//!            its caller's hooks deciding what is taken, admitted and sent: walk.rs; a file's
//!            records identified and routed to works: grouping.rs; several files decompressed at once ahead of it, each
//!            into a bounded channel: ahead.rs; a shard's ranges: ranges.rs; one kind of work: a
//!            file's records in one format) -> record.rs (`process_work`, the one function from
//!            records to one outcome per record: workers, fuzz targets and tests call it) -> the
//!            writers (a pool of --jobs threads: a batch's rollouts written while the workers
//!            convert the next) -> collect.rs (its own thread, fed in order: counters and report lines in
//!            input order); refusal.rs: why a record is quarantined, as a value (each stage's error,
//!            every violation); claims.rs: the requests a shard's Batch API results have in other
//!            shards' files; returns.rs: the collector gives each work's outcomes back to the
//!            worker that made them, which frees them (no cross-thread frees); mod.rs only
//!            orchestrates (prepare → execute → finish), each concern in its file (plan.rs,
//!            batch_api.rs, shard.rs, threads.rs, handoff.rs, placement.rs, home.rs); file.rs:
//!            a file read in memory (fuzz targets, `explain`, `review`) through the reader's
//!            one split → identify → route → finish loop (reader/walk.rs)
//! commands/  one file per subcommand (convert and audit, validate, rules, explain, report,
//!            merge: `report merge`), none importing another: what two share is in the
//!            terminal output (ui.rs, ui/conversion.rs) or in mod.rs (the rule flags, `Exit`
//!            and `RunError`: the one place exit codes are decided); convert/review.rs
//!            writes the pages of `--review`
//! cli.rs     clap types only
//! ```
//!
//! **The one path of a record**, whatever its format:
//!
//! ```text
//! source::records (split, locate)      one RawRecord per line or JSON element, or a Damage
//!   → pipeline::reader::walk_file      one loop per file, the reader's and a file's read in memory
//!     through FileRecords              identity, the file's format (detected at its first record
//!                                      or --from), and the work: Records { file, format, records }
//!                                      (one record, or the whole file for claude-code and logs)
//!   → pipeline::record::process_work   too large / truncated / parse (or the reader's read_fast)
//!                                      → FormatReader::read → Transcripts → finish: convert,
//!                                      render, validate, account → one Outcome per record
//!   → writers (place) → collect        counters, report lines, quarantine, manifest, in order
//! ```
//!
//! **Adding a source format** takes one new module and one registration line: write
//! `src/input/<name>.rs` (declared with `mod <name>;` in `input/mod.rs`; a folder
//! `input/<name>/` when its envelopes or tests deserve files of their own) with a type implementing `FormatReader` (`format`, `granularity`,
//! `describe`, `detect`, `read`; `read_fast` optional) and its name
//! (`impl SourceFormat { pub const NAME: SourceFormat = SourceFormat::named("name"); }`, with
//! `.with_global_ids()` when its conversation ids are unique beyond a file), and add
//! the reader to `input::format::readers()` in detection order. The reader emits each
//! conversation through `input::builder::TranscriptBuilder` (messages, calls, outputs, reasoning,
//! notes, the record's facts); Chat Completions messages inside its source go through
//! `input::messages::read_message_list`, so a message reads the same in every format. `--from`,
//! detection, the pipeline and the fuzz harness reach every format through that list.
//!
//! **Lints hold the style** (`[lints]` in `Cargo.toml`, `cargo clippy` in `.ci/run`): no unsafe
//! code (`forbid`), no `unwrap`/`expect` in the library (bad input is an outcome, never a panic;
//! tests may, `clippy.toml`), and no wildcard arm in a `match` over an enum (a new variant is
//! handled wherever it matters; only a foreign `#[non_exhaustive]` enum gets an allowed wildcard,
//! said where). `unreachable_pub` warns: an item only the crate uses is `pub(crate)`, so what is
//! `pub` is what `main.rs`, the tests and the fuzz targets call.
//!
//! **The shape is measured** (`tests/measures.rs`): no production file over 800 lines (a test
//! module excluded), `pipeline/mod.rs` under 400, the output format chosen at most three times
//! in `pipeline/`, no reader importing another, no command importing another, the README under
//! 600 lines. A failure names the file to split or the import to move.
//!
//! Data moves forward as `SourceFile → RawRecord → Transcript → Conversation → bytes`, with
//! `Decision`, `Violation`, `QuarantineEntry` and `Summary` beside them. No stage prints.
//! `tests/architecture.rs` fails when a module uses one that is not an allowed edge above, and
//! `tests/digest.rs` when a refactor changes a byte of the output of `samples/` or the corpora
//! (re-record with `ROLLOVER_BLESS=1` only for an intended change, and say why in the commit).
//!
//!
//! # Testing
//!
//! `bash .ci/run` installs what the tests need and runs `cargo test --release`: unit tests beside
//! the code, and one integration test binary, `tests/tests.rs` (after xsv's), whose modules are
//! the files below (one binary links the library once; fifteen took most of a CI run). One area:
//! `cargo test --release --test tests scheduled::`; one test: `... --test tests NAME`. The
//! release profile links with fat LTO in one codegen unit, so after a change `cargo test
//! --release` rebuilds in ~8 minutes on 2 cores; while iterating, `CARGO_PROFILE_RELEASE_LTO=false
//! CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo test --release` rebuilds in ~3 minutes (the first
//! time, ~7: every dependency once more) and tests the same code. Measure speed with the real
//! profile. The modules: `tests/digest.rs` (the output of `samples/`, the corpora and the Parquet fixtures, byte for byte, against
//! recorded digests), `tests/architecture.rs` (the allowed module edges; every file of `tests/`
//! declared in the binary), `tests/sources.rs` and `tests/api_sources.rs` (ChatGPT exports, Claude
//! Code sessions, API logs and datasets, item by item), `tests/scheduled.rs`
//! (kill -9 at eight chosen points of a run, before and after files are recorded, then the
//! rerun; incremental re-runs, never clobbering, the lock, write failures, SIGINT, modes,
//! `--json`: the kill and the SIGINT come from a test hook, `ROLLOVER_FAILPOINT=die-after:N` or
//! `sigint-after:N`, once N rollouts are written), `tests/inputs.rs` (stdin, FIFOs, the walk,
//! messages by shape, hostile archives: a SIGTERM during the pre-pass comes from
//! `ROLLOVER_FAILPOINT=sigterm-at:plan:N`, which also says on stderr of any file planned after
//! it, so the test proves the loop stops at once without timing it), `tests/report.rs` (the reports, headless Chromium, `explain`, `report
//! diff`, sampling), `tests/responses.rs` (both wires, golden bodies, the typed create-request),
//! `tests/convert.rs` (the
//! binary on fixtures written from the spec, every shape and repair, determinism, damaged input,
//! the public corpora), `tests/cli.rs` (dry run, rule-file overrides, `rules check`, `rules policies`, usage errors),
//! `tests/promises.rs` (the command line's promises, each through the binary: broken
//! pipes, the `--json` error object, sampling, `--cwd`, man pages and completions, `report diff
//! --json`, contradictory flags, the reports' counts and `files.csv`, `rules check`, the
//! supported Codex releases, `--model`),
//! `tests/validate.rs` (one broken rollout per invariant),
//! `tests/parquet.rs` (Parquet datasets written from the corpora, exact counts, hostile files),
//! `tests/properties.rs` (proptest: random transcripts of all eleven source formats and every
//! chat input shape must convert to rollouts that validate, or be quarantined with a reason,
//! every record accounted for, the reports in input order, identically for `--jobs` 1, 2 and 3
//! over archives that span several batches and files read ahead; `PROPTEST_CASES=N` for more
//! cases), `tests/sharding.rs` (1, 3 and 7 shards, each a process,
//! over an archive with files much larger than the rest, and 2, 3 and 5 over Batch API requests
//! and results in different shards beside a file of every source format: their union and merged
//! report equal an unsharded run, also after a results file changed; missing, killed and
//! mismatched shards), `tests/cluster.rs` (the Kubernetes example against the `batch/v1` Job
//! type) and `tests/conformance.rs` (the real Codex, below). The two typed models those read
//! through (async-openai's Responses create-request, k8s-openapi's `Job`) are deserialized in a
//! small crate of their own, `tests/typed-checks`, built unoptimised beside the library: compiled
//! into the test binary they were two thirds of its build.
//! After them, `.ci/run` runs `bash tests/slurm.sh`: a real one-node Slurm cluster (slurmctld,
//! slurmd, munged) started on the machine, a 4-task job array of `samples/cluster/slurm-array.sh`,
//! the merge compared with an unsharded run; it fails, never skips, if the daemons cannot start.
//!
//! **Fuzzing** (`fuzz/`, cargo-fuzz's layout, its own workspace): one target per source format,
//! named as `--from` names it (`chat`, `claude-code`, `chatgpt`, `anthropic`, `responses`,
//! `chat-stream`, `sharegpt`, `gemini-cli`, `otel`, `parquet`). Each takes arbitrary bytes as one input file in its format, forced,
//! through the pipeline's own per-file function (`pipeline::process_bytes`: split → group for the
//! format's reader → read → convert → render → validate → account), to Codex rollouts with Unicode
//! repair on and off and to Responses bodies, and must never panic. `cargo install cargo-fuzz`
//! once, then from the crate root
//!
//! ```text
//! T=claude-code
//! mkdir -p fuzz/corpus/$T
//! ROLLOVER_FUZZ_STRICT=1 cargo +nightly fuzz run $T fuzz/corpus/$T fuzz/seeds/$T -- \
//!   -dict=fuzz/dicts/$T.dict -max_total_time=600
//! ```
//!
//! (with only stable Rust, prefix `RUSTC_BOOTSTRAP=1` and drop `+nightly`). Crashes land in
//! `fuzz/artifacts/$T/`. `ROLLOVER_FUZZ_STRICT=1` also turns invariant violations, records a reader
//! gave no account of and non-deterministic conversions (each input is converted twice) into
//! crashes (`2` adds the accounting). See `fuzz/README.md` for the seeds, the dictionaries and the
//! last runs.
//!
//! # Where the README's promises are kept
//!
//! The README says what a user may rely on; each module's docs say how it holds. Writes that are
//! atomic, private and confined, and what a killed run leaves: `output::home`, `output::dir`.
//! Never clobbering a session changed or held open: `output::guard`, `output::holders`.
//! Incremental runs, carried findings and `manifest.prev`: `output::manifest`. One run at a time
//! and `--wait`: `output::lock`. Session identity and versions: `model::identity`,
//! `model::version`. Shards and split files: `source::shard`; Batch API results across shards:
//! `pipeline::claims`, `output::results_seen`. The threads of `--jobs`, their priorities and the
//! read-ahead: `pipeline`. What each source format maps, keeps and drops: its reader's module,
//! `input::<name>`. The reports and review pages: `audit::report`. Memory and speed figures:
//! `samples/BENCHMARKS.md`.
//!

pub mod audit;
pub mod cli;
pub mod commands;
pub mod convert;
pub mod input;
pub mod model;
pub mod output;
pub mod pipeline;
pub mod rules;
pub mod source;
pub mod validate;
