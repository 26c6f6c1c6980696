//! `checkfu sandbox capabilities` on memory and Docker.

mod common;

use common::*;

fn json_of(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(o)))
}

fn backed(doc: &serde_json::Value) -> Vec<(String, bool)> {
    doc["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["token"].as_str().unwrap().to_owned(),
                t["backed"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn memory_envelope_backs_every_token() {
    let o = output(checkfu().args(["sandbox", "capabilities", "--json"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let doc = json_of(&o);
    assert_eq!(doc["provider"], "memory");
    assert_eq!(doc["capabilities"]["physically_contained_file_read"], true);
    let tokens = backed(&doc);
    assert_eq!(tokens.len(), 7);
    assert!(tokens.iter().all(|(_, b)| *b), "{tokens:?}");

    let o = output(checkfu().args(["sandbox", "capabilities"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let text = stdout(&o);
    for needle in [
        "provider  memory",
        "enforcement.filesystem",
        "max_mounts",
        "network-allowlist  backed",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
}

#[test]
fn docker_envelope_backs_six_tokens() {
    let Some(env) = docker("docker_capabilities") else {
        return;
    };
    let o =
        output(
            env.checkfu()
                .args(["sandbox", "capabilities", "--provider", "docker", "--json"]),
        );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let doc = json_of(&o);
    assert_eq!(doc["provider"], "docker");
    let tokens = backed(&doc);
    let unbacked: Vec<&str> = tokens
        .iter()
        .filter(|(_, b)| !b)
        .map(|(t, _)| t.as_str())
        .collect();
    assert_eq!(unbacked, vec!["network-allowlist"], "{tokens:?}");
    let o = output(
        env.checkfu()
            .args(["sandbox", "capabilities", "--provider", "docker"]),
    );
    assert!(
        stdout(&o).contains("network-allowlist  not backed: needs"),
        "{}",
        describe(&o)
    );
    env.finish();
}
