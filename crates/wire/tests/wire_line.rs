//! The line decoder never panics and stays bounded; every protocol
//! message shape has a JSON Schema.

use checkfu_sandbox_wire::line::{read_line, LineError};
use checkfu_sandbox_wire::protocol::{decode_line, Incoming};
use proptest::prelude::*;

fn read_all(input: &[u8], limit: usize) -> (Vec<Vec<u8>>, Option<LineError>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut reader = tokio::io::BufReader::with_capacity(7, input);
        let mut lines = Vec::new();
        let mut buf = Vec::new();
        loop {
            match read_line(&mut reader, limit, &mut buf).await {
                Ok(true) => {
                    assert!(
                        buf.len() <= limit,
                        "a line of {} bytes over {limit}",
                        buf.len()
                    );
                    assert!(
                        buf.capacity() <= limit + 64,
                        "buffer grew to {}",
                        buf.capacity()
                    );
                    lines.push(buf.clone());
                }
                Ok(false) => return (lines, None),
                Err(e) => return (lines, Some(e)),
            }
        }
    })
}

proptest! {
    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_line(&bytes);
    }

    #[test]
    fn decoding_json_shaped_text_never_panics(
        id in proptest::option::of(any::<i64>()),
        method in proptest::option::of("[a-z/$]{0,12}"),
        extra in "[a-z]{0,6}",
    ) {
        let mut v = serde_json::json!({"jsonrpc": "2.0"});
        if let Some(id) = id { v["id"] = id.into(); }
        if let Some(m) = method { v["method"] = m.into(); }
        if !extra.is_empty() { v[extra] = serde_json::Value::Null; }
        let _ = decode_line(v.to_string().as_bytes());
    }

    #[test]
    fn the_line_reader_never_exceeds_its_bound(
        bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..2048),
        limit in 1usize..300,
    ) {
        let (lines, error) = read_all(&bytes, limit);
        let joined: usize = lines.iter().map(|l| l.len() + 1).sum();
        prop_assert!(joined <= bytes.len());
        match error {
            None => prop_assert!(bytes.is_empty() || bytes.ends_with(b"\n")),
            Some(LineError::TooLong { limit: l }) => prop_assert_eq!(l, limit),
            Some(LineError::Truncated { bytes: n }) => prop_assert!(n <= limit),
            Some(LineError::Io(e)) => prop_assert!(false, "io error {}", e),
        }
    }
}

#[test]
fn requests_notifications_and_responses_are_told_apart() {
    let r = decode_line(br#"{"jsonrpc":"2.0","id":4,"method":"sandbox/destroy","params":{}}"#);
    assert!(matches!(r, Ok(Incoming::Request { id: 4, .. })));
    let n = decode_line(br#"{"jsonrpc":"2.0","method":"$/cancel","params":{"id":4}}"#);
    assert!(matches!(n, Ok(Incoming::Notification { .. })));
    let ok = decode_line(br#"{"jsonrpc":"2.0","id":4,"result":null}"#);
    assert!(matches!(
        ok,
        Ok(Incoming::Response {
            id: 4,
            outcome: Ok(serde_json::Value::Null)
        })
    ));
    assert!(
        decode_line(br#"{"jsonrpc":"2.0","id":4,"result":1,"error":{"code":1,"message":""}}"#)
            .is_err()
    );
    assert!(decode_line(br#"{"jsonrpc":"1.0","id":4,"result":null}"#).is_err());
    assert!(decode_line(br#"{"jsonrpc":"2.0","id":"4","result":null}"#).is_err());
    assert!(decode_line(br#"{"jsonrpc":"2.0","id":4,"result":null,"extra":1}"#).is_err());
}

#[test]
fn every_message_shape_has_a_schema() {
    let schemas = checkfu_sandbox_wire::message_schemas();
    for name in [
        "Message",
        "InitializeParams",
        "InitializeResult",
        "OutputFrame",
        "StdinFrame",
        "CreditFrame",
        "AckFrame",
        "EofFrame",
        "ExitFrame",
        "DescribeResult",
    ] {
        let s = schemas
            .get(name)
            .unwrap_or_else(|| panic!("no schema for {name}"));
        assert_eq!(
            s["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
    }
}

#[test]
fn every_method_names_types_the_kit_or_the_protocol_publishes_and_protocol_md_lists_it() {
    use checkfu_sandbox_kit::boundary_type_names;
    use checkfu_sandbox_wire::protocol::METHODS;
    let protocol_md = include_str!("../../../author-kit/PROTOCOL.md");
    let kit = boundary_type_names();
    let own = checkfu_sandbox_wire::message_schemas();
    let mut seen = std::collections::BTreeSet::new();
    for m in METHODS {
        assert!(seen.insert(m.method), "{} listed twice", m.method);
        assert!(
            protocol_md.contains(&format!("`{}", m.method)),
            "PROTOCOL.md omits {}",
            m.method
        );
        for ty in [m.params, m.result] {
            let known = ty == "null" || ty == "—" || kit.contains(&ty) || own.contains_key(ty);
            assert!(known, "{}: no schema named {ty}", m.method);
        }
    }
    assert_eq!(METHODS.len(), 43);
}
