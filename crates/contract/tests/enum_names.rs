//! Every closed enum's name (`as_str`, derived with strum) is its wire
//! name (serde), for every variant: the names are written once, in the
//! enum's attributes, and this proves the two derives agree.

use checkfu_sandbox_contract::conformance::evidence::Outcome;
use checkfu_sandbox_contract::conformance::token::Token;
use checkfu_sandbox_contract::{
    op, ConflictActual, EnvelopeRule, FailureReason, InstanceState, Operation, OutputStream,
    Requirement, SandboxError, SignalName, WireType,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use strum::{IntoEnumIterator, VariantNames};

/// Asserts, for every variant of `E`, that its name is its wire form and
/// that the wire form decodes back to it; returns how many were checked.
fn names_are_wire_names<E>(name: fn(&E) -> &'static str) -> usize
where
    E: IntoEnumIterator + Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let mut count = 0;
    for variant in E::iter() {
        let wire = serde_json::to_value(&variant).unwrap();
        assert_eq!(wire, json!(name(&variant)), "{variant:?}");
        let back: E = serde_json::from_value(json!(name(&variant))).unwrap();
        assert_eq!(back, variant);
        count += 1;
    }
    count
}

#[test]
fn requirement_names_are_wire_names() {
    assert_eq!(names_are_wire_names(Requirement::as_str), 12);
    assert_eq!(
        Requirement::PhysicallyContainedFileRead.to_string(),
        "physically_contained_file_read"
    );
}

#[test]
fn failure_reason_names_are_wire_names() {
    assert_eq!(names_are_wire_names(FailureReason::as_str), 8);
}

#[test]
fn output_stream_names_are_wire_names() {
    assert_eq!(names_are_wire_names(OutputStream::as_str), 2);
    assert_eq!(OutputStream::Stderr.to_string(), "stderr");
}

#[test]
fn instance_state_names_are_wire_names() {
    assert_eq!(names_are_wire_names(InstanceState::as_str), 2);
}

#[test]
fn conflict_actual_names_are_wire_names() {
    assert_eq!(names_are_wire_names(ConflictActual::as_str), 16);
}

#[test]
fn signal_names_are_wire_names() {
    assert_eq!(names_are_wire_names(SignalName::as_str), 18);
    assert_eq!(SignalName::Sigusr1.as_str(), "SIGUSR1");
    assert_eq!(SignalName::Other.as_str(), "SIGOTHER");
}

#[test]
fn envelope_rule_names_are_wire_names() {
    assert_eq!(names_are_wire_names(EnvelopeRule::as_str), 9);
}

#[test]
fn case_outcome_names_are_wire_names() {
    assert_eq!(names_are_wire_names(Outcome::as_str), 4);
}

#[test]
fn token_names_are_wire_names_and_parse_back() {
    assert_eq!(names_are_wire_names(Token::as_str), 7);
    assert_eq!(Token::ALL.to_vec(), Token::iter().collect::<Vec<_>>());
    for token in Token::iter() {
        assert_eq!(Token::parse(token.as_str()), Some(token));
    }
    assert_eq!(Token::NetworkAllowlist.as_str(), "network-allowlist");
    assert_eq!(Token::parse("network_allowlist"), None);
}

/// One value of every error variant; the count is checked against the
/// derived variant list, so a new variant fails here until it is added.
fn one_of_each_error() -> Vec<SandboxError> {
    vec![
        SandboxError::unavailable(Requirement::Mounts, ""),
        SandboxError::SandboxFileTooLarge {
            path: "/p".into(),
            limit_bytes: 1,
            actual_bytes: 2,
        },
        SandboxError::SandboxInstanceNotFound {
            instance_id: "i".into(),
        },
        SandboxError::conflict(op::EXECUTE, "active", ConflictActual::Provisioning),
        SandboxError::failed(op::EXECUTE, FailureReason::TimedOut, ""),
        SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stdout,
            limit_bytes: 1,
        },
        SandboxError::SandboxSnapshotForbidden {
            instance_id: "i".into(),
            retention: checkfu_sandbox_contract::RetentionMode::EphemeralZdr,
        },
        SandboxError::SandboxSnapshotNotFound {
            snapshot_id: "s".into(),
        },
        SandboxError::SandboxAdapterUnavailable {
            adapters: vec![],
            invalid: vec![],
        },
        SandboxError::SandboxAdapterAmbiguous { candidates: vec![] },
        SandboxError::protocol(Operation::Decode(WireType::Instance), "f", "e", "a"),
    ]
}

#[test]
fn error_tags_are_wire_tags() {
    let errors = one_of_each_error();
    let mut tags: Vec<&str> = errors.iter().map(SandboxError::tag).collect();
    for e in &errors {
        let wire = serde_json::to_value(e).unwrap();
        assert_eq!(wire["_tag"], Value::from(e.tag()), "{e:?}");
    }
    tags.sort_unstable();
    let mut all = SandboxError::VARIANTS.to_vec();
    all.sort_unstable();
    assert_eq!(tags, all, "one value of every variant");
}
