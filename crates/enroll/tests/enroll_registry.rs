//! The enrolled-providers registry file.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

use checkfu_sandbox_contract::EgressCertification;
use checkfu_sandbox_enroll::registry::{self, Entry, Registry, RegistryError, Transport};
use checkfu_sandbox_runtime::Ceiling;

fn entry(id: &str) -> Entry {
    Entry {
        id: id.into(),
        transport: Transport::Command(vec!["/opt/acme/provider".into(), "--stdio".into()]),
        evidence: "/opt/acme/evidence.dsse.json".into(),
        key: "/opt/acme/key.pub.pem".into(),
        ceiling: Ceiling {
            egress_certification: Some(EgressCertification::AdvisoryFilter),
            ..Ceiling::default()
        },
    }
}

#[test]
fn a_registry_round_trips_through_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/providers.toml");
    assert_eq!(Registry::load(&path).unwrap(), Registry::default());
    let mut r = Registry::default();
    r.add(entry("acme")).unwrap();
    let mut sock = entry("beta");
    sock.transport = Transport::Socket("/run/beta.sock".into());
    sock.ceiling = Ceiling::default();
    r.add(sock).unwrap();
    r.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("[[provider]]"), "{text}");
    assert!(
        text.contains("egress_certification = \"advisory_filter\""),
        "{text}"
    );
    assert_eq!(Registry::load(&path).unwrap(), r);
}

#[test]
fn a_duplicate_id_is_refused_and_remove_takes_it_out() {
    let mut r = Registry::default();
    r.add(entry("acme")).unwrap();
    assert_eq!(
        r.add(entry("acme")).unwrap_err(),
        RegistryError::AlreadyEnrolled { id: "acme".into() }
    );
    assert_eq!(r.remove("acme").unwrap().id, "acme");
    assert!(r.remove("acme").is_none());
}

#[test]
fn an_entry_with_both_or_neither_transport_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("providers.toml");
    std::fs::write(
        &path,
        "[[provider]]\nid = \"x\"\ncommand = [\"a\"]\nsocket = \"/s\"\nevidence = \"e\"\nkey = \"k\"\n",
    )
    .unwrap();
    let err = Registry::load(&path).unwrap_err().to_string();
    assert!(err.contains("exactly one of command and socket"), "{err}");
}

#[test]
fn built_in_names_and_odd_ids_are_refused() {
    assert_eq!(
        registry::check_id("memory"),
        Err(RegistryError::BuiltinId {
            id: "memory".into()
        })
    );
    assert_eq!(
        registry::check_id("a b"),
        Err(RegistryError::MalformedId { id: "a b".into() })
    );
    assert!(registry::check_id("acme-1.2_x").is_ok());
}
