//! The Kubernetes example (issue 15), checked offline: no cluster runs here, so every YAML
//! document of `samples/cluster/k8s-job.yaml` must deserialize into the Kubernetes API's own
//! `batch/v1` `Job` type (k8s-openapi, Kubernetes 1.37), with no field the type does not know
//! (a misspelt field would be dropped silently by a real cluster's client too), and describe
//! an Indexed Job with one completion per shard and a merge Job on the same shared volume.
//! The Slurm example runs for real in `tests/slurm.sh`.

use std::fs;
use std::path::PathBuf;

use rollover_typed_checks::{Job, PodSpec};

fn manifest() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("samples/cluster/k8s-job.yaml");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every document as a `Job`, with the paths of the fields the type would have ignored.
fn jobs(text: &str) -> Vec<(Job, Vec<String>)> {
    rollover_typed_checks::jobs(text)
        .unwrap_or_else(|e| panic!("a document is not a batch/v1 Job: {e}"))
}

fn pod(job: &Job) -> &PodSpec {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod template")
}

/// The one container's command line, as words (`sh -c` scripts split on whitespace).
fn words(job: &Job) -> Vec<String> {
    let containers = &pod(job).containers;
    assert_eq!(containers.len(), 1, "one container");
    let container = &containers[0];
    let command = container.command.iter().flatten();
    let args = container.args.iter().flatten();
    command
        .chain(args)
        .flat_map(|part| part.split_whitespace())
        .map(|word| word.trim_end_matches(';').to_string())
        .collect()
}

/// The word after `flag`.
fn after<'a>(words: &'a [String], flag: &str) -> &'a str {
    let at = words.iter().position(|w| w == flag);
    at.and_then(|i| words.get(i + 1))
        .unwrap_or_else(|| panic!("{flag} in {words:?}"))
}

/// The claim mounted at `path`'s mount point, and that mount point.
fn shared_claim(job: &Job, path: &str) -> (String, String) {
    let pod = pod(job);
    let container = &pod.containers[0];
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| path.starts_with(&m.mount_path))
        .unwrap_or_else(|| panic!("{path} is on no mounted volume"));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("the mount's volume");
    let claim = volume
        .persistent_volume_claim
        .as_ref()
        .expect("the shared volume is a persistent volume claim");
    (claim.claim_name.clone(), mount.mount_path.clone())
}

#[test]
fn the_kubernetes_example_is_an_indexed_job_per_shard_and_a_merge_job_on_one_volume() {
    let documents = jobs(&manifest());
    assert_eq!(documents.len(), 2, "the convert Job and the merge Job");
    for (job, unknown) in &documents {
        let name = job.metadata.name.as_deref().unwrap_or("?");
        assert!(
            unknown.is_empty(),
            "{name}: fields a Job does not have: {unknown:?}"
        );
    }
    let (convert, merge) = (&documents[0].0, &documents[1].0);

    let spec = convert.spec.as_ref().expect("spec");
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    let words = words(convert);
    let at = words
        .iter()
        .position(|w| w == "rollover")
        .expect("runs rollover");
    assert_eq!(words.get(at + 1).map(String::as_str), Some("convert"));
    let shards: i32 = after(&words, "--shards").parse().expect("--shards N");
    assert_eq!(spec.completions, Some(shards), "one completion per shard");
    assert!(spec.parallelism.is_some_and(|p| (1..=shards).contains(&p)));
    assert_eq!(pod(convert).restart_policy.as_deref(), Some("Never"));
    let archive = &words[at + 2];
    let out = after(&words, "--out");

    let merge_words = self::words(merge);
    let at = merge_words
        .windows(3)
        .position(|w| w == ["rollover", "report", "merge"]);
    let at = at.expect("the merge Job runs `rollover report merge`");
    assert_eq!(merge_words[at + 3], out, "it merges the shards' output");
    let merge_spec = merge.spec.as_ref().expect("spec");
    assert_ne!(merge_spec.completion_mode.as_deref(), Some("Indexed"));

    // The archive and the output on one shared volume, mounted in both Jobs.
    let (claim, _) = shared_claim(convert, archive);
    assert_eq!(shared_claim(convert, out).0, claim);
    assert_eq!(
        shared_claim(merge, out).0,
        claim,
        "the merge Job mounts the same volume"
    );
}

/// The check would catch a misspelt field: the Job type knows no `completionsMode`.
#[test]
fn a_field_a_job_does_not_have_is_caught() {
    let broken = manifest().replacen("completionMode: Indexed", "completionsMode: Indexed", 1);
    let documents = jobs(&broken);
    let unknown = &documents[0].1;
    assert!(
        unknown.len() == 1 && unknown[0].ends_with("completionsMode"),
        "{unknown:?}"
    );
    assert!(documents[0]
        .0
        .spec
        .as_ref()
        .is_some_and(|s| s.completion_mode.is_none()));
}
