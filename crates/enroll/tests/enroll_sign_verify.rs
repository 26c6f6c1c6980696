//! Keys, DSSE, signed evidence and its verification against the provider
//! given (spec "From adapter to qualified provider").

// A test crate: its items are not a public API.
#![allow(missing_docs)]

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;

use checkfu_sandbox_contract::conformance::evidence::{
    CaseRecord, Evidence, Outcome, Summary, SUITE_REVISION,
};
use checkfu_sandbox_contract::conformance::token::{missing, Token, CASES};
use checkfu_sandbox_contract::*;
use checkfu_sandbox_enroll::dsse::{pae, Envelope};
use checkfu_sandbox_enroll::keys;
use checkfu_sandbox_enroll::statement::{Predicate, Statement, PREDICATE_TYPE};
use checkfu_sandbox_enroll::subject::{self, Code};
use checkfu_sandbox_enroll::verify::{verify, Reason};
use checkfu_sandbox_enroll::EnrollError;

/// Contained reads, four mounts, network none, ZDR: claims filesystem,
/// process, network-none, zdr and cleanup.
fn envelope() -> SandboxProviderCapabilities {
    let e = EnforcementLevel::ProviderEnforced;
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container],
        platforms: vec![Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        }],
        image_mode: ImageMode::Profile,
        package_managers: vec![],
        network_modes: vec![NetworkMode::None],
        retention_modes: vec![RetentionMode::EphemeralZdr],
        snapshots: false,
        snapshot_clone: false,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: false,
        physically_contained_file_read: true,
        active_mount_write: false,
        egress_certification: EgressCertification::Unsupported,
        enforcement: Enforcement {
            filesystem: e,
            process: e,
            network: e,
            memory: e,
            cpu: e,
            pids: e,
            disk: e,
            duration: e,
            privilege: e,
        },
        max_mounts: 4,
        provider_revision: "acme-1".into(),
        materialization_revision: "acme-mat-1".into(),
    }
}

/// Evidence where every case whose tokens are in `declared` passed and
/// the rest were skipped.
fn evidence(declared: &[Token]) -> Evidence {
    let declared: BTreeSet<Token> = declared.iter().copied().collect();
    let mut summary = Summary::default();
    let cases = CASES
        .iter()
        .map(|c| {
            let missing_tokens = missing(c.requires, &declared);
            let outcome = if missing_tokens.is_empty() {
                summary.passed += 1;
                Outcome::Passed
            } else {
                summary.skipped += 1;
                Outcome::Skipped
            };
            CaseRecord {
                id: c.id.into(),
                requires: c.requires.to_vec(),
                outcome,
                missing_tokens,
                duration_ms: 12,
                failure: None,
            }
        })
        .collect();
    Evidence {
        suite_revision: SUITE_REVISION.into(),
        wire_revision: "checkfu.sandbox/v1".into(),
        target: "acme".into(),
        provider: "acme".into(),
        provider_revision: "acme-1".into(),
        materialization_revision: "acme-mat-1".into(),
        envelope_sha256: format!("sha256:{}", subject::envelope_sha256(&envelope())),
        provider_command: None,
        envelope: envelope(),
        declared_tokens: declared.into_iter().collect(),
        injected_faults: vec![],
        started_at: "2026-01-01T00:00:00Z".into(),
        cases,
        summary,
    }
}

const HONEST: [Token; 5] = [
    Token::Filesystem,
    Token::Process,
    Token::NetworkNone,
    Token::Zdr,
    Token::Cleanup,
];

const BINARY: &str = "aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11";

struct Fixture {
    _dir: tempfile::TempDir,
    signing: ed25519_dalek::SigningKey,
    public: ed25519_dalek::VerifyingKey,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let files = keys::generate(dir.path()).unwrap();
    Fixture {
        signing: keys::read_signing_key(&files.private).unwrap(),
        public: keys::read_verifying_key(&files.public).unwrap(),
        _dir: dir,
    }
}

fn signed(f: &Fixture, code: &Code, evidence: Evidence) -> Vec<u8> {
    let statement = Statement::new(
        subject::subjects(code, &evidence.envelope),
        Predicate::new(evidence, "0.1.0", "2026-01-01T00:01:00Z".into()),
    );
    serde_json::to_vec(&statement.sign(&f.signing)).unwrap()
}

#[test]
fn pae_matches_the_dsse_specification_example() {
    assert_eq!(
        pae("http://example.com/HelloWorld", b"hello world"),
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
    );
}

#[test]
fn keygen_writes_a_0600_private_key_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let files = keys::generate(dir.path()).unwrap();
    let mode = std::fs::metadata(&files.private)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let private = std::fs::read_to_string(&files.private).unwrap();
    assert!(
        private.starts_with("-----BEGIN PRIVATE KEY-----"),
        "{private}"
    );
    let public = std::fs::read_to_string(&files.public).unwrap();
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
    assert!(matches!(
        keys::generate(dir.path()),
        Err(EnrollError::Exists { .. })
    ));
    assert_eq!(std::fs::read_to_string(&files.private).unwrap(), private);
}

#[test]
fn honest_signed_evidence_verifies() {
    let f = fixture();
    let code = Code::Executable(BINARY.into());
    let bytes = signed(&f, &code, evidence(&HONEST));
    let statement = verify(&bytes, &f.public, &code, &envelope()).unwrap();
    assert_eq!(statement.predicate_type, PREDICATE_TYPE);
    assert_eq!(
        statement.predicate.skipped_by_token[&Token::Snapshot],
        vec!["checkpoint-clone", "durable-round-trip", "pause-pinning"]
    );
}

#[test]
fn a_changed_byte_fails_the_signature() {
    let f = fixture();
    let code = Code::Executable(BINARY.into());
    let bytes = signed(&f, &code, evidence(&HONEST));
    let mut dsse: Envelope = serde_json::from_slice(&bytes).unwrap();
    let mut payload = dsse.payload_bytes().unwrap();
    // One byte of the payload: the first digit of a case's duration.
    let needle = b"\"duration_ms\":12";
    let at = payload
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    payload[at + needle.len() - 2] = b'9';
    dsse.payload = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &payload);
    let tampered = serde_json::to_vec(&dsse).unwrap();
    let reasons = verify(&tampered, &f.public, &code, &envelope()).unwrap_err();
    assert!(
        matches!(reasons.as_slice(), [Reason::Signature { .. }]),
        "{reasons:?}"
    );
}

#[test]
fn another_key_fails_the_signature() {
    let f = fixture();
    let other = fixture();
    let code = Code::Executable(BINARY.into());
    let bytes = signed(&f, &code, evidence(&HONEST));
    let reasons = verify(&bytes, &other.public, &code, &envelope()).unwrap_err();
    assert!(matches!(reasons.as_slice(), [Reason::Signature { .. }]));
}

#[test]
fn evidence_for_another_binary_fails_naming_the_subject() {
    let f = fixture();
    let bytes = signed(&f, &Code::Executable(BINARY.into()), evidence(&HONEST));
    let other = "bb".repeat(32);
    let reasons = verify(
        &bytes,
        &f.public,
        &Code::Executable(other.clone()),
        &envelope(),
    )
    .unwrap_err();
    assert_eq!(
        reasons,
        vec![Reason::Subject {
            name: subject::EXECUTABLE.into(),
            expected: other,
            actual: BINARY.into(),
        }]
    );
}

#[test]
fn evidence_for_another_envelope_fails_naming_the_subject() {
    let f = fixture();
    let code = Code::Executable(BINARY.into());
    let bytes = signed(&f, &code, evidence(&HONEST));
    let mut live = envelope();
    live.max_mounts = 8;
    let reasons = verify(&bytes, &f.public, &code, &live).unwrap_err();
    assert!(
        matches!(reasons.as_slice(), [Reason::Subject { name, .. }] if name == subject::ENVELOPE),
        "{reasons:?}"
    );
}

#[test]
fn a_skip_for_a_claimed_token_fails_naming_token_and_case() {
    let f = fixture();
    let code = Code::Executable(BINARY.into());
    // network-none is claimed by the envelope but not declared: skipped.
    let declared = [
        Token::Filesystem,
        Token::Process,
        Token::Zdr,
        Token::Cleanup,
    ];
    let bytes = signed(&f, &code, evidence(&declared));
    let reasons = verify(&bytes, &f.public, &code, &envelope()).unwrap_err();
    assert_eq!(
        reasons,
        vec![Reason::ClaimNotPassed {
            token: Token::NetworkNone,
            case: "none-egress".into(),
            outcome: "skipped".into(),
        }]
    );
    assert_eq!(
        reasons[0].to_string(),
        "claimed token network-none: case none-egress must pass, outcome skipped"
    );
}

#[test]
fn another_suite_revision_fails() {
    let f = fixture();
    let code = Code::Executable(BINARY.into());
    let mut e = evidence(&HONEST);
    e.suite_revision = "checkfu.sandbox.conformance/v0".into();
    let bytes = signed(&f, &code, e);
    let reasons = verify(&bytes, &f.public, &code, &envelope()).unwrap_err();
    assert_eq!(
        reasons,
        vec![Reason::SuiteRevision {
            actual: "checkfu.sandbox.conformance/v0".into()
        }]
    );
}

#[test]
fn socket_evidence_has_no_code_subject_and_does_not_verify_for_a_command() {
    let f = fixture();
    let bytes = signed(&f, &Code::Socket, evidence(&HONEST));
    assert!(verify(&bytes, &f.public, &Code::Socket, &envelope()).is_ok());
    let reasons = verify(
        &bytes,
        &f.public,
        &Code::Executable(BINARY.into()),
        &envelope(),
    )
    .unwrap_err();
    assert_eq!(
        reasons,
        vec![Reason::Subject {
            name: subject::EXECUTABLE.into(),
            expected: BINARY.into(),
            actual: "absent".into(),
        }]
    );
}
