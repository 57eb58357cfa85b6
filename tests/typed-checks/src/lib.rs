//! rollover's outputs read through maintained typed models of other projects, for the
//! integration tests (`tests/cluster.rs`, `tests/responses.rs`): each function deserializes
//! into one model and says what did not fit.
//!
//! A crate of its own so that the deserializers of these large types are instantiated and
//! compiled here, at opt-level 0 and beside the library, rather than in the test binary after
//! it: they were two thirds of the test binary's build.

use serde_json::Value;

pub use k8s_openapi::api::batch::v1::Job;
pub use k8s_openapi::api::core::v1::PodSpec;

/// Every YAML document of `text` as a Kubernetes `batch/v1` `Job`, each with the paths of the
/// fields the type does not have (a client would drop them silently); the first document that
/// is no Job, as an error.
pub fn jobs(text: &str) -> Result<Vec<(Job, Vec<String>)>, String> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| {
            let mut unknown = Vec::new();
            let job: Job = serde_ignored::deserialize(document, |path| {
                unknown.push(path.to_string());
            })
            .map_err(|e| e.to_string())?;
            Ok((job, unknown))
        })
        .collect()
}

/// Whether `body` deserializes into async-openai's `CreateResponse`, the Responses API's
/// create-request; serde's error if not.
pub fn create_response(body: Value) -> Result<(), String> {
    serde_json::from_value::<async_openai::types::responses::CreateResponse>(body)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Whether `tools` deserializes into a list of async-openai's `Tool`; serde's error if not.
pub fn tools(tools: Value) -> Result<(), String> {
    serde_json::from_value::<Vec<async_openai::types::responses::Tool>>(tools)
        .map(drop)
        .map_err(|e| e.to_string())
}
