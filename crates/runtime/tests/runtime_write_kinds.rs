//! writeFile's optional members as the runtime sends them: `kind:
//! "directory"` with its `mode`, refusals before the call (content on a
//! directory, bits over `0o777`), and members that say nothing new left
//! out, so the request stays byte-identical to one an older provider
//! decodes (decisions 016 and `039-directories-and-output-modes`).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use support::*;

#[tokio::test]
async fn a_directory_with_content_is_refused_before_the_call_naming_both_values() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    let f = h
        .adapter
        .write_entry(
            &i.instance_id,
            format!("{PROJECT}/d"),
            WriteKind::Directory,
            b"abc".to_vec(),
            None,
        )
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::WRITE_FILE,
        "content_base64",
        "empty content for kind directory",
        "3 bytes",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn directory_bits_over_0777_are_refused_before_the_call() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    for bits in [0o1777, 0o2755, 0o4000, 0o10000] {
        let f = h
            .adapter
            .write_directory(&i.instance_id, format!("{PROJECT}/d"), Some(bits))
            .await
            .unwrap_err();
        assert_invalid(
            only(&f),
            op::WRITE_FILE,
            "mode",
            "permission bits of at most 0o777",
            &format!("0o{bits:o}"),
        );
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn a_directory_is_admitted_like_a_file() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    // Once active, only the output tree is writable, for directories too.
    let f = h
        .adapter
        .write_directory(&i.instance_id, format!("{PROJECT}/d"), Some(0o700))
        .await
        .unwrap_err();
    assert_conflict(
        only(&f),
        op::WRITE_FILE,
        "provisioning",
        ConflictActual::Active,
    );
    // A root itself is never written.
    let f = h
        .adapter
        .write_directory(&i.instance_id, OUT, Some(0o700))
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::WRITE_FILE,
        "path",
        "a file path below its root",
        OUT,
    );
    assert!(h.provider.calls().is_empty());
    h.adapter
        .write_directory(&i.instance_id, format!("{OUT}/d"), Some(0o700))
        .await
        .unwrap();
    assert_eq!(h.provider.count(op::WRITE_FILE), 1);
}

#[tokio::test]
async fn members_that_say_nothing_new_are_not_sent() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    let id = &i.instance_id;
    let a = &h.adapter;
    a.write_file_mode(id, format!("{PROJECT}/f644"), b"x".to_vec(), Some(0o644))
        .await
        .unwrap();
    a.write_file_mode(id, format!("{PROJECT}/f755"), b"x".to_vec(), Some(0o755))
        .await
        .unwrap();
    a.write_directory(id, format!("{PROJECT}/d755"), Some(0o755))
        .await
        .unwrap();
    a.write_directory(id, format!("{PROJECT}/d700"), Some(0o700))
        .await
        .unwrap();
    a.write_directory(id, format!("{PROJECT}/dnone"), None)
        .await
        .unwrap();
    let sent: Vec<serde_json::Value> = h
        .provider
        .write_file_requests()
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let members = |v: &serde_json::Value| {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys.join(",")
    };
    let base = "content_base64,instance_id,path";
    let with_kind = "content_base64,instance_id,kind,path";
    assert_eq!(members(&sent[0]), base, "a 0644 file: {}", sent[0]);
    assert_eq!(sent[1]["mode"], 0o755);
    assert!(sent[1].get("kind").is_none(), "a file sends no kind");
    assert_eq!(
        members(&sent[2]),
        with_kind,
        "a 0755 directory: {}",
        sent[2]
    );
    assert_eq!(sent[2]["kind"], "directory");
    assert_eq!(sent[2]["content_base64"], "");
    assert_eq!(sent[3]["kind"], "directory");
    assert_eq!(sent[3]["mode"], 0o700);
    assert_eq!(members(&sent[4]), with_kind, "{}", sent[4]);
    // What reached the provider passes the kit's own validator.
    for r in h.provider.write_file_requests() {
        assert!(validate::write_file_request(&r).is_empty(), "{r:?}");
    }
}
