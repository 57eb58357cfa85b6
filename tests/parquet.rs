//! Parquet chat datasets (issue 61), through the binary. The files of `tests/fixtures/parquet/`
//! are written by this module from public JSONL data of the shared corpora, laid out in the
//! schemas the Hub's datasets publish (lmsys-chat-1m, WildChat, UltraChat, a ShareGPT-style
//! dataset; `tests/fixtures/README.md` says where each comes from), with the parquet crate's
//! own writer ([`crate::common::parquet`]): `fixtures_are_what_the_generator_writes` proves
//! it, and `ROLLOVER_BLESS=1` writes them again. Each file converts with exact counts of
//! messages, calls and outputs; a damaged or hostile file is a damage naming the file and the
//! row group, never a crash; the row group beside it still converts.

use std::path::PathBuf;

use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use serde_json::{json, Value};

use crate::common::parquet::{write, Layout};
use crate::common::{Home, Rollout, Workdir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpus(path: &str) -> PathBuf {
    root().join("../shared/corpora").join(path)
}

fn fixtures_dir() -> PathBuf {
    root().join("tests/fixtures/parquet")
}

fn jsonl(path: &str) -> Vec<Value> {
    std::fs::read_to_string(corpus(path))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A stable 32-hex-digit id for `value` (the datasets' ids are hashes of the same width).
fn hex_id(value: &Value) -> String {
    let digest = twox_hash::XxHash3_128::oneshot(value.to_string().as_bytes());
    format!("{digest:032x}")
}

/// The OpenAI moderation result lmsys-chat-1m and WildChat keep per message (a subset of its
/// categories; the full set is the same shape, longer).
fn moderation(i: usize) -> Value {
    let categories = ["harassment", "hate", "self-harm", "sexual", "violence"];
    json!({
        "categories": categories.iter().map(|c| (c.to_string(), json!(false))).collect::<serde_json::Map<_, _>>(),
        "category_scores": categories.iter().enumerate()
            .map(|(k, c)| (c.to_string(), json!(((i * 7 + k) % 10) as f64 / 10_000.0)))
            .collect::<serde_json::Map<_, _>>(),
        "flagged": false,
    })
}

const MODERATION: &str = "
  optional group openai_moderation (LIST) {
    repeated group list {
      optional group element {
        optional group categories {
          optional boolean harassment; optional boolean hate; optional boolean self-harm;
          optional boolean sexual; optional boolean violence;
        }
        optional group category_scores {
          optional double harassment; optional double hate; optional double self-harm;
          optional double sexual; optional double violence;
        }
        optional boolean flagged;
      }
    }
  }";

/// lmsys-chat-1m's schema (its dataset card's `dataset_info`).
fn lmsys_schema() -> String {
    format!(
        "message lmsys {{
  optional binary conversation_id (UTF8);
  optional binary model (UTF8);
  optional group conversation (LIST) {{
    repeated group list {{
      optional group element {{ optional binary content (UTF8); optional binary role (UTF8); }}
    }}
  }}
  optional int64 turn;
  optional binary language (UTF8);
  {MODERATION}
  optional boolean redacted;
}}"
    )
}

/// lmsys-chat-1m rows: openai/evals' Polish rhymes samples (few-shot chats), each with its
/// ideal answer as the model's reply.
fn lmsys_rows() -> Vec<Value> {
    let models = ["vicuna-13b", "koala-13b", "alpaca-13b"];
    jsonl("openai-evals/polish_rhymes_generation/samples.jsonl")
        .into_iter()
        .take(12)
        .enumerate()
        .map(|(i, sample)| {
            let mut conversation: Vec<Value> = sample["input"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| json!({"content": m["content"], "role": m["role"]}))
                .collect();
            conversation.push(json!({"content": sample["ideal"], "role": "assistant"}));
            let turn = conversation.iter().filter(|m| m["role"] == "user").count();
            let moderation: Vec<Value> = (0..conversation.len()).map(moderation).collect();
            json!({
                // The row's number too: two samples of the source are the same.
                "conversation_id": hex_id(&json!([i, sample])),
                "model": models[i % 3],
                "conversation": conversation,
                "turn": turn,
                "language": "Polish",
                "openai_moderation": moderation,
                "redacted": false,
            })
        })
        .collect()
}

/// WildChat's schema (WildChat-1M's dataset card; the moderation lists as lmsys-chat-1m's).
fn wildchat_schema() -> String {
    format!(
        "message wildchat {{
  optional binary conversation_hash (UTF8);
  optional binary model (UTF8);
  optional int64 timestamp (TIMESTAMP(MICROS,true));
  optional group conversation (LIST) {{
    repeated group list {{
      optional group element {{
        optional binary content (UTF8);
        optional binary country (UTF8);
        optional binary hashed_ip (UTF8);
        optional group header {{
          optional binary accept-language (UTF8);
          optional binary user-agent (UTF8);
        }}
        optional binary language (UTF8);
        optional boolean redacted;
        optional binary role (UTF8);
        optional binary state (UTF8);
        optional int64 timestamp (TIMESTAMP(MICROS,true));
        optional boolean toxic;
        optional int64 turn_identifier;
      }}
    }}
  }}
  optional int64 turn;
  optional binary language (UTF8);
  {MODERATION}
  optional boolean toxic;
  optional boolean redacted;
  optional binary state (UTF8);
  optional binary country (UTF8);
  optional binary hashed_ip (UTF8);
  optional group header {{
    optional binary accept-language (UTF8);
    optional binary user-agent (UTF8);
  }}
}}"
    )
}

/// WildChat rows: openai/evals' music-theory few-shot samples (a system prompt, then chord
/// questions and answers), with the per-message fields WildChat keeps.
fn wildchat_rows() -> Vec<Value> {
    jsonl("openai-evals/music-theory/triads-few-shot.jsonl")
        .into_iter()
        .enumerate()
        .map(|(i, sample)| {
            let header = json!({"accept-language": "en-US,en;q=0.9", "user-agent": "Mozilla/5.0"});
            let start = 1_681_000_000 + 3_600 * i as i64;
            let at = |k: usize| {
                let seconds = start + 30 * k as i64;
                humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds as u64),
                )
                .to_string()
            };
            let messages = sample["sample"].as_array().unwrap();
            let conversation: Vec<Value> = messages
                .iter()
                .enumerate()
                .map(|(k, m)| {
                    let user = m["role"] == "user";
                    json!({
                        "content": m["content"], "role": m["role"],
                        "country": if user { json!("France") } else { Value::Null },
                        "hashed_ip": if user { json!(hex_id(&json!([i, "ip"]))) } else { Value::Null },
                        "header": if user { header.clone() } else { Value::Null },
                        "language": "English", "redacted": false,
                        "state": if user { json!("Île-de-France") } else { Value::Null },
                        "timestamp": if user { json!(at(k)) } else { Value::Null },
                        "toxic": false,
                        "turn_identifier": 100_000 + i * 10 + k / 2,
                    })
                })
                .collect();
            let turn = conversation.iter().filter(|m| m["role"] == "user").count();
            json!({
                "conversation_hash": hex_id(&json!([i, sample])),
                "model": "gpt-4-0314",
                "timestamp": at(messages.len()),
                "conversation": conversation,
                "turn": turn,
                "language": "English",
                "openai_moderation": (0..messages.len()).map(moderation).collect::<Vec<_>>(),
                "toxic": false, "redacted": false, "state": "Île-de-France", "country": "France",
                "hashed_ip": hex_id(&json!([i, "ip"])), "header": header,
            })
        })
        .collect()
}

/// UltraChat 200k's schema (its dataset card).
const ULTRACHAT: &str = "message ultrachat {
  optional binary prompt (UTF8);
  optional binary prompt_id (UTF8);
  optional group messages (LIST) {
    repeated group list {
      optional group element { optional binary content (UTF8); optional binary role (UTF8); }
    }
  }
}";

/// UltraChat rows: openai/evals' sarcasm few-shot samples (user and assistant in turn).
fn ultrachat_rows() -> Vec<Value> {
    jsonl("openai-evals/sarcasm/few_shot.jsonl")
        .into_iter()
        .map(|sample| {
            let messages: Vec<Value> = sample["sample"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| json!({"content": m["content"], "role": m["role"]}))
                .collect();
            let prompt = messages[0]["content"].clone();
            json!({"prompt": prompt, "prompt_id": hex_id(&prompt), "messages": messages})
        })
        .collect()
}

/// A ShareGPT-style dataset's schema, as LLaMA-Factory's demos are published on the Hub.
const SHAREGPT: &str = "message sharegpt {
  optional group conversations (LIST) {
    repeated group list {
      optional group element { optional binary from (UTF8); optional binary value (UTF8); }
    }
  }
  optional binary tools (UTF8);
}";

/// ShareGPT rows: the first 40 rows of LLaMA-Factory's glaive tool-call demo, as they are.
fn sharegpt_rows() -> Vec<Value> {
    let text = std::fs::read_to_string(corpus(
        "sources/sharegpt/llamafactory-glaive_toolcall_en_demo.json",
    ))
    .unwrap();
    let rows: Vec<Value> = serde_json::from_str(&text).unwrap();
    rows.into_iter().take(40).collect()
}

/// One fixture: its file name, the rows written, and the bytes.
struct Fixture {
    name: &'static str,
    rows: Vec<Value>,
    bytes: Vec<u8>,
}

/// The four fixtures, as written from the corpora (the HF layouts' usual codecs: snappy by
/// default, zstd and gzip too).
fn fixtures() -> Vec<Fixture> {
    let layout = |group_rows, compression| Layout {
        group_rows,
        compression,
        dictionary: true,
    };
    let make = |name, schema: &str, rows: Vec<Value>, layout| Fixture {
        name,
        bytes: write(schema, &rows, layout),
        rows,
    };
    vec![
        make(
            "lmsys-chat-1m.parquet",
            &lmsys_schema(),
            lmsys_rows(),
            layout(5, Compression::SNAPPY),
        ),
        make(
            "wildchat.parquet",
            &wildchat_schema(),
            wildchat_rows(),
            layout(4, Compression::ZSTD(ZstdLevel::try_new(3).unwrap())),
        ),
        make(
            "ultrachat.parquet",
            ULTRACHAT,
            ultrachat_rows(),
            layout(2, Compression::GZIP(GzipLevel::try_new(6).unwrap())),
        ),
        make(
            "sharegpt-glaive.parquet",
            SHAREGPT,
            sharegpt_rows(),
            layout(16, Compression::SNAPPY),
        ),
    ]
}

#[test]
fn fixtures_are_what_the_generator_writes() {
    let bless = std::env::var_os("ROLLOVER_BLESS").is_some();
    for fixture in fixtures() {
        let path = fixtures_dir().join(fixture.name);
        if bless {
            std::fs::create_dir_all(fixtures_dir()).unwrap();
            std::fs::write(&path, &fixture.bytes).unwrap();
            continue;
        }
        let kept = std::fs::read(&path).unwrap_or_default();
        assert!(
            kept == fixture.bytes,
            "{} is not what the generator writes now: run `ROLLOVER_BLESS=1 cargo test --release --test tests parquet::fixtures` and say why in the commit",
            path.display()
        );
    }
}

fn count(summary: &Value, key: &str) -> u64 {
    summary[key].as_u64().unwrap_or(0)
}

/// The response items of every rollout of `home`, by type.
fn items_by_type(home: &Home) -> std::collections::BTreeMap<String, u64> {
    let mut by_type = std::collections::BTreeMap::new();
    for rollout in home.all_rollouts() {
        for item in rollout.items() {
            let kind = match (item["type"].as_str(), item["role"].as_str()) {
                (Some("message"), Some(role)) => format!("message:{role}"),
                (Some(kind), _) => kind.to_string(),
                (None, _) => "?".to_string(),
            };
            *by_type.entry(kind).or_default() += 1;
        }
    }
    by_type
}

/// What the source rows hold, counted from the rows themselves: messages by role (the first
/// system message is the base instructions, the others developer messages), calls and
/// outputs.
fn expected_items(fixture: &Fixture) -> std::collections::BTreeMap<String, u64> {
    let mut by_type = std::collections::BTreeMap::new();
    let mut add = |kind: &str| *by_type.entry(kind.to_string()).or_insert(0) += 1;
    for row in &fixture.rows {
        let (list, role_key) = ["conversation", "messages", "conversations"]
            .iter()
            .find_map(|k| row[*k].as_array().map(|l| (l, *k)))
            .unwrap();
        let mut leading = true;
        for message in list {
            let role = if role_key == "conversations" {
                message["from"].as_str().unwrap()
            } else {
                message["role"].as_str().unwrap()
            };
            match role {
                "system" if leading => leading = false,
                "system" => add("message:developer"),
                "user" | "human" => {
                    leading = false;
                    add("message:user")
                }
                "assistant" | "gpt" => add("message:assistant"),
                "function_call" => add("function_call"),
                "observation" => add("function_call_output"),
                other => panic!("role {other}"),
            }
        }
    }
    by_type
}

#[test]
fn every_fixture_converts_with_exact_counts_of_messages_calls_and_outputs() {
    let dir = Workdir::new("parquet-fixtures");
    for fixture in fixtures() {
        dir.create(fixture.name, &fixture.bytes);
        let home_name = format!("home-{}", fixture.name);
        let home = dir.convert(fixture.name, &home_name, &[], 0);
        let summary = home.summary();
        let rows = fixture.rows.len() as u64;
        assert_eq!(count(&summary, "records"), rows, "{}", fixture.name);
        assert_eq!(count(&summary, "converted"), rows, "{}", fixture.name);
        assert_eq!(summary["formats"]["parquet"], 1, "{summary:#}");
        assert_eq!(summary["violations"], json!({}), "{}", fixture.name);
        assert_eq!(
            items_by_type(&home),
            expected_items(&fixture),
            "{}",
            fixture.name
        );
        let validate = dir.run(&["validate", &format!("{home_name}/sessions")]);
        validate.expect_code(0);
    }
}

/// The totals of the fixtures, pinned (the test above derives them from the source rows).
#[test]
fn the_fixtures_convert_to_these_totals() {
    let dir = Workdir::new("parquet-totals");
    let totals = [
        (
            "lmsys-chat-1m.parquet",
            json!({"message:user": 48, "message:assistant": 48}),
            12,
        ),
        (
            "wildchat.parquet",
            json!({"message:user": 15, "message:assistant": 15}),
            15,
        ),
        (
            "ultrachat.parquet",
            json!({"message:user": 5, "message:assistant": 5}),
            0,
        ),
        (
            "sharegpt-glaive.parquet",
            json!({"message:user": 104, "message:assistant": 104, "function_call": 29,
                   "function_call_output": 29}),
            0,
        ),
    ];
    for (name, items, base_instructions) in totals {
        let input = fixtures_dir().join(name);
        let home_name = format!("home-{name}");
        let home = dir.convert(input.to_str().unwrap(), &home_name, &[], 0);
        assert_eq!(json!(items_by_type(&home)), items, "{name}");
        let with_base = home
            .all_rollouts()
            .iter()
            .filter(|r| r.meta()["base_instructions"].is_object())
            .count();
        assert_eq!(with_base, base_instructions, "{name}");
        // No reasoning in these datasets, and none made up.
        assert!(!items_by_type(&home).contains_key("reasoning"), "{name}");
    }
}

/// A row written as `name` with `schema`, in one row group a row.
fn one_file(dir: &Workdir, name: &str, schema: &str, rows: &[Value]) {
    let layout = Layout {
        group_rows: 1,
        ..Layout::default()
    };
    dir.create(name, write(schema, rows, layout));
}

#[test]
fn reasoning_in_a_message_becomes_a_reasoning_item_before_its_message() {
    let dir = Workdir::new("parquet-reasoning");
    let schema = "message r {
      optional group messages (LIST) { repeated group list { optional group element {
        optional binary role (UTF8); optional binary content (UTF8);
        optional binary reasoning_content (UTF8); } } }
    }";
    one_file(
        &dir,
        "r.parquet",
        schema,
        &[json!({"messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Two and two make four."},
        ]})],
    );
    let home = dir.convert("r.parquet", "home", &[], 0);
    let items = home.single_rollout().items();
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["message", "reasoning", "message"]);
    assert_eq!(
        items[1]["content"],
        json!([{"type": "reasoning_text", "text": "Two and two make four."}])
    );
}

#[test]
fn a_conversation_id_names_its_session_whatever_the_file_or_the_text() {
    let dir = Workdir::new("parquet-identity");
    let schema = "message m {
      optional binary conversation_id (UTF8);
      optional group conversation (LIST) { repeated group list { optional group element {
        optional binary content (UTF8); optional binary role (UTF8); } } }
    }";
    let row = |id: Option<&str>, text: &str| json!({"conversation_id": id, "conversation": [{"role": "user", "content": text}]});
    let session = |rows: &[Value], name: &str| -> String {
        let file = format!("{name}.parquet");
        one_file(&dir, &file, schema, rows);
        let home = dir.convert(&file, &format!("home-{name}"), &[], 0);
        home.conversations()[0]["id"].as_str().unwrap().to_string()
    };
    // The same id, in another file, with its text edited: the same session.
    let a = session(&[row(Some("33f01939a744455c869cb234afca47f1"), "hi")], "a");
    let b = session(&[row(Some("33f01939a744455c869cb234afca47f1"), "hi!")], "b");
    assert_eq!(a, b);
    // No id: the row's bytes name it, so an edit is another session.
    let c = session(&[row(None, "hi")], "c");
    let d = session(&[row(None, "hi!")], "d");
    assert_ne!(c, d);
    assert_ne!(a, c);
    assert_eq!(c, session(&[row(None, "hi")], "c-again"), "deterministic");
}

#[test]
fn two_message_columns_need_messages_at_and_then_convert() {
    // A preference dataset (UltraFeedback binarized's layout): `chosen` and `rejected` are
    // both message lists.
    let dir = Workdir::new("parquet-messages-at");
    let list = "optional group {} (LIST) { repeated group list { optional group element {
        optional binary content (UTF8); optional binary role (UTF8); } } }";
    let schema = format!(
        "message pref {{ optional binary prompt (UTF8); {} {} optional double score_chosen; }}",
        list.replace("{}", "chosen"),
        list.replace("{}", "rejected")
    );
    let row = json!({
        "prompt": "Name a prime.",
        "chosen": [{"role": "user", "content": "Name a prime."}, {"role": "assistant", "content": "7"}],
        "rejected": [{"role": "user", "content": "Name a prime."}, {"role": "assistant", "content": "9"}],
        "score_chosen": 9.5,
    });
    // Rows 1 and 3 hold one list (found by shape); row 2, between them, holds two.
    let mut first = row.clone();
    first["rejected"] = Value::Null;
    let mut last = first.clone();
    last["chosen"][1]["content"] = json!("11");
    one_file(&dir, "pref.parquet", &schema, &[first, row, last]);
    let home = dir.convert("pref.parquet", "home", &[], 1);
    assert_eq!(home.conversations().len(), 2);
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(quarantine[0]["class"], "ambiguous_messages");
    // The quarantined row is named by its file and its row number.
    assert_eq!(quarantine[0]["source"], "pref.parquet");
    assert_eq!(quarantine[0]["line"], 2);
    assert!(
        quarantine[0]["reason"]
            .as_str()
            .unwrap()
            .contains("`chosen` and `rejected`"),
        "{quarantine:?}"
    );
    let home = dir.convert(
        "pref.parquet",
        "home-chosen",
        &["--messages-at", "chosen"],
        0,
    );
    let answers: Vec<Value> = home
        .rollouts()
        .iter()
        .map(|path| Rollout::read(path).items()[1]["content"][0]["text"].clone())
        .collect();
    let mut answers: Vec<&str> = answers.iter().map(|a| a.as_str().unwrap()).collect();
    answers.sort_unstable();
    assert_eq!(answers, ["11", "7", "7"]);
    let conversation = &home.conversations()[1];
    assert_eq!(conversation["format"], "parquet");
    assert_eq!(conversation["line"], 2);
}

#[test]
fn the_same_rows_as_json_lines_read_alike_with_from_parquet() {
    let dir = Workdir::new("parquet-from");
    let fixture = fixtures()
        .into_iter()
        .find(|f| f.name == "wildchat.parquet")
        .unwrap();
    dir.create("w.parquet", &fixture.bytes);
    dir.create_jsonl("w.jsonl", &fixture.rows);
    let parquet = dir.convert("w.parquet", "home-p", &[], 0);
    let lines = dir.convert("w.jsonl", "home-j", &["--from", "parquet"], 0);
    let bodies = |home: &Home| -> Vec<Vec<Value>> {
        home.all_rollouts().iter().map(|r| r.items()).collect()
    };
    assert_eq!(bodies(&parquet), bodies(&lines));
    assert_eq!(lines.conversations()[0]["format"], "parquet");
    // A Parquet file read as Chat Completions records: its rows are JSON objects like any.
    let chat = dir.convert("w.parquet", "home-c", &["--from", "chat"], 0);
    assert_eq!(count(&chat.summary(), "converted"), 15);
    // Chat, the default, goes unnamed in the audit.
    assert_eq!(chat.conversations()[0]["format"], Value::Null);
}

#[test]
fn explain_shows_one_row() {
    let dir = Workdir::new("parquet-explain");
    let input = fixtures_dir().join("sharegpt-glaive.parquet");
    let input = input.to_str().unwrap();
    // Row 1 calls a tool (its function_call and observation); row 2 does not.
    let run = dir.run(&["explain", &format!("{input}:1"), "--json"]);
    run.expect_code(0);
    let explained: Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(explained["format"], "parquet");
    let text = dir.run(&["explain", &format!("{input}:1")]);
    text.expect_code(0);
    let out = text.stdout();
    assert!(
        out.contains("sharegpt-glaive.parquet:1 (byte 4) (parquet)"),
        "{out}"
    );
    assert!(out.contains("function_call"), "{out}");
    assert!(out.contains("function_call_output"), "{out}");
    let missing = dir.run(&["explain", &format!("{input}:41")]);
    assert_ne!(missing.code(), Some(0));
    assert!(missing.stderr().contains("no record starts on line 41"));
}

/// The damages a run reported, as `file: message`.
fn damages(home: &Home) -> Vec<String> {
    home.summary()["damaged_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{}: {}",
                d["file"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// Every record is in exactly one place, and what was written validates.
fn accounted(dir: &Workdir, home: &Home, name: &str) {
    let summary = home.summary();
    assert_eq!(
        count(&summary, "records"),
        count(&summary, "converted") + count(&summary, "quarantined"),
        "{summary:#}"
    );
    assert_eq!(summary["violations"], json!({}));
    if home.root.join("sessions").exists() {
        dir.run(&["validate", &format!("{name}/sessions")])
            .expect_code(0);
    }
}

fn metadata(bytes: &[u8]) -> parquet::file::metadata::ParquetMetaData {
    parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::copy_from_slice(bytes))
        .unwrap()
}

/// Where the column `path` of row group `group` starts, and its length.
fn column_chunk(bytes: &[u8], group: usize, path: &str) -> (usize, usize) {
    let metadata = metadata(bytes);
    let column = metadata
        .row_group(group)
        .columns()
        .iter()
        .find(|c| c.column_path().string() == path)
        .unwrap();
    let (start, len) = column.byte_range();
    (start as usize, len as usize)
}

#[test]
fn files_cut_short_or_damaged_anywhere_are_damages_or_quarantines_never_a_crash() {
    let dir = Workdir::new("parquet-damaged");
    let whole = std::fs::read(fixtures_dir().join("lmsys-chat-1m.parquet")).unwrap();
    let footer_len =
        u32::from_le_bytes(whole[whole.len() - 8..whole.len() - 4].try_into().unwrap());
    let mut cut = 0;
    for end in (997..whole.len()).step_by(997) {
        dir.create(&format!("in/cut-{end:06}.parquet"), &whole[..end]);
        cut += 1;
    }
    // The footer declares more than the file holds.
    let mut long = whole.clone();
    let at = long.len() - 8;
    long[at..at + 4].copy_from_slice(&(footer_len + 1_000_000).to_le_bytes());
    dir.create("in/footer-too-long.parquet", &long);
    // An encrypted footer, and a file that is only the magic.
    let mut encrypted = whole.clone();
    let at = encrypted.len() - 4;
    encrypted[at..].copy_from_slice(b"PARE");
    dir.create("in/encrypted.parquet", &encrypted);
    dir.create("in/magic.parquet", b"PAR1");
    // Every 211th byte flipped, one file each: whatever it breaks, the run goes on.
    for at in (4..whole.len() - 8).step_by(211) {
        let mut flipped = whole.clone();
        flipped[at] ^= 0xA5;
        dir.create(&format!("in/flip-{at:06}.parquet"), &flipped);
    }
    let run = dir.run(&["convert", "in", "--out", "home", "-q"]);
    assert!(matches!(run.code(), Some(0 | 1)), "{run}");
    let home = Home {
        root: dir.path("home"),
        run,
    };
    accounted(&dir, &home, "home");
    let damages = damages(&home);
    let named = |file: &str| damages.iter().filter(|d| d.starts_with(file)).count();
    for end in (997..whole.len()).step_by(997) {
        assert_eq!(
            named(&format!("in/cut-{end:06}.parquet")),
            1,
            "{damages:#?}"
        );
    }
    assert!(damages.contains(&format!(
        "in/footer-too-long.parquet: not a readable Parquet file: its footer declares {} bytes, more than the file holds",
        footer_len + 1_000_000
    )));
    assert!(damages.contains(
        &"in/encrypted.parquet: not a readable Parquet file: its footer is encrypted (PARE)"
            .to_string()
    ));
    assert!(damages.contains(
        &"in/magic.parquet: not a readable Parquet file: 4 bytes, fewer than its magic and footer take"
            .to_string()
    ));
    assert!(damages.len() >= cut + 3, "{}", damages.len());
}

#[test]
fn a_row_group_larger_than_max_record_bytes_is_damaged_and_the_others_convert() {
    let dir = Workdir::new("parquet-large-group");
    let rows: Vec<Value> = (0..3)
        .map(|i| {
            let text = if i == 1 {
                "x".repeat(50_000)
            } else {
                format!("row {i}")
            };
            json!({"messages": [{"role": "user", "content": text}]})
        })
        .collect();
    one_file(&dir, "big.parquet", ULTRACHAT, &rows);
    let home = dir.convert("big.parquet", "home", &["--max-record-bytes", "20000"], 1);
    assert_eq!(count(&home.summary(), "converted"), 2);
    let damages = damages(&home);
    assert_eq!(damages.len(), 1, "{damages:?}");
    assert!(
        damages[0].starts_with("big.parquet: row group 2 of 3 (row 2): it declares"),
        "{damages:?}"
    );
    assert!(damages[0]
        .ends_with("more than --max-record-bytes (20000); raise the limit to read it: not read"));
    // Its location is its row, at its row group's first byte.
    let damage = &home.summary()["damaged_files"][0];
    assert_eq!(damage["line"], 2);
    let (start, _) = column_chunk(&dir.read("big.parquet"), 1, "prompt");
    assert_eq!(damage["byte_offset"], start as u64);
    accounted(&dir, &home, "home");
    // With the limit raised, all three.
    let home = dir.convert("big.parquet", "home-raised", &[], 0);
    assert_eq!(count(&home.summary(), "converted"), 3);
}

#[test]
fn a_dictionary_that_expands_past_the_limit_is_weighed_before_its_rows_are_built() {
    // 20,000 copies of one 1 KiB string: a dictionary page of 1 KiB and run-length indices,
    // a few KiB on disk, ~21 MB once built.
    let dir = Workdir::new("parquet-dictionary");
    let long = "y".repeat(1024);
    let bomb: Vec<Value> = (0..20_000)
        .map(|_| json!({"role": "user", "content": long}))
        .collect();
    let rows = [
        json!({"messages": [{"role": "user", "content": "first"}]}),
        json!({"messages": bomb}),
        json!({"messages": [{"role": "user", "content": "last"}]}),
    ];
    one_file(&dir, "bomb.parquet", ULTRACHAT, &rows);
    assert!(dir.read("bomb.parquet").len() < 64 << 10);
    let home = dir.convert("bomb.parquet", "home", &["--max-record-bytes", "4MiB"], 1);
    assert_eq!(count(&home.summary(), "converted"), 2);
    let damages = damages(&home);
    assert_eq!(damages.len(), 1, "{damages:?}");
    assert!(
        damages[0].starts_with("bomb.parquet: row group 2 of 3 (row 2): its row 1 decodes to ~"),
        "{damages:?}"
    );
    accounted(&dir, &home, "home");
}

#[test]
fn a_schema_nested_past_the_limit_is_refused_before_the_crate_builds_it() {
    let dir = Workdir::new("parquet-deep");
    let depth = 40;
    let schema = format!(
        "message deep {{ {} optional binary leaf (UTF8); {} }}",
        (0..depth)
            .map(|i| format!("optional group g{i} {{"))
            .collect::<String>(),
        "}".repeat(depth)
    );
    let mut row = json!({"leaf": "x"});
    for i in (0..depth).rev() {
        row = json!({ format!("g{i}"): row });
    }
    one_file(&dir, "deep.parquet", &schema, &[row]);
    let home = dir.convert("deep.parquet", "home", &[], 1);
    let damages = damages(&home);
    assert_eq!(damages.len(), 1);
    assert!(
        damages[0].contains("the footer's schema cannot be read: a schema nested too deep"),
        "{damages:?}"
    );
}

#[test]
fn a_corrupt_page_damages_its_row_group_and_the_next_one_is_read() {
    let dir = Workdir::new("parquet-corrupt");
    let whole = std::fs::read(fixtures_dir().join("lmsys-chat-1m.parquet")).unwrap();
    let column = "conversation.list.element.content";
    // Row group 2's page header made unreadable (0xFF is no Thrift field).
    let (start, _) = column_chunk(&whole, 1, column);
    let mut header = whole.clone();
    header[start] = 0xFF;
    dir.create("in/header.parquet", &header);
    // Row group 2's first page emptied: snappy gives no bytes where its header declares some.
    let mut data = whole.clone();
    let header = rollover::source::parquet::thrift::page_header(&whole[start..]).unwrap();
    let page = start + header.header_len;
    data[page..page + 8].fill(0);
    dir.create("in/data.parquet", &data);
    let home = dir.convert("in", "home", &[], 1);
    // Rows 1-5 and 11-12 of each file.
    assert_eq!(count(&home.summary(), "converted"), 14);
    let damages = damages(&home);
    assert_eq!(damages.len(), 2, "{damages:#?}");
    assert!(
        damages[0].starts_with(&format!(
            "in/data.parquet: row group 2 of 3 (rows 6-10): column `{column}`"
        )) || damages[0].starts_with(
            "in/data.parquet: row group 2 of 3 (rows 6-10): its pages cannot be decoded"
        ),
        "{damages:#?}"
    );
    assert_eq!(
        damages[1],
        format!(
            "in/header.parquet: row group 2 of 3 (rows 6-10): column `{column}`: the page header at byte {start}: an unknown Thrift type at byte 1 of the Thrift structure: not read"
        )
    );
    let lines: Vec<u64> = home
        .conversations()
        .iter()
        .filter(|c| c["source"] == "in/header.parquet")
        .map(|c| c["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [1, 2, 3, 4, 5, 11, 12]);
    accounted(&dir, &home, "home");
}

/// The review pages show Parquet rows as conversations, named by file and row, with the
/// format and the rows' text.
#[test]
fn review_pages_show_parquet_rows() {
    let wd = Workdir::new("review_parquet");
    let input = fixtures_dir().join("wildchat.parquet");
    let run = wd.run(&[
        "audit",
        input.to_str().expect("UTF-8"),
        "--out",
        "home",
        "--review",
        "3",
    ]);
    run.expect_code(0);
    let review = wd.path("home/rollover/runs/0001/review");
    let index = std::fs::read_to_string(review.join("index.html")).expect("review index");
    assert!(index.contains("wildchat.parquet:"), "{index}");
    let page = std::fs::read_to_string(review.join("0001.html")).expect("a review page");
    assert!(page.contains("wildchat.parquet:"), "{page}");
    assert!(
        page.contains("<code>parquet</code>"),
        "the format is named: {page}"
    );
}
