//! An independent validator (the `jsonschema` crate) reads the published
//! schemas: every valid `decode:*` vector's input conforms, and every
//! vector's declared `schema_verdict` holds, which covers the unknown-field,
//! digest and timestamp vectors the schema must reject.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn kit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../author-kit")
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validators() -> BTreeMap<String, jsonschema::Validator> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(kit_dir().join("schema")).unwrap() {
        let path = entry.unwrap().path();
        let schema = read(&path);
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema",
            "{}",
            path.display()
        );
        assert_eq!(schema["x-checkfu-revision"], "checkfu.sandbox/v1");
        assert!(schema["$id"].as_str().unwrap().contains("/sandbox/v1/"));
        let validator = jsonschema::draft202012::new(&schema)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.insert(stem, validator);
    }
    out
}

fn vectors() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    for sub in ["valid", "invalid"] {
        for entry in std::fs::read_dir(kit_dir().join("vectors").join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let v = read(&path);
            out.push((path, v));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_vector_file_conforms_to_the_vector_schema() {
    let all = validators();
    let vector_schema = &all["vector.schema"];
    for (path, v) in vectors() {
        let errors: Vec<String> = vector_schema
            .iter_errors(&v)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    }
}

#[test]
fn schema_verdicts_hold_under_an_independent_validator() {
    let all = validators();
    let mut failures = Vec::new();
    let mut rejected = Vec::new();
    for (path, v) in vectors() {
        let check = v["check"].as_str().unwrap();
        let (type_name, document) = if let Some(t) = check.strip_prefix("decode:") {
            (t, &v["input"])
        } else if let Some(t) = check.strip_prefix("validate:") {
            (t, &v["input"]["request"])
        } else {
            continue;
        };
        let validator = all
            .get(type_name)
            .unwrap_or_else(|| panic!("{}: no schema for {type_name}", path.display()));
        let verdict = v["schema_verdict"].as_str().unwrap_or_else(|| {
            panic!(
                "{}: decode and validate vectors declare schema_verdict",
                path.display()
            )
        });
        let valid_vector = v["expect"]["outcome"] == "accepted";
        let is_decode = check.starts_with("decode:");
        if valid_vector && verdict != "accepts" {
            failures.push(format!(
                "{}: an accepted document must be schema-valid",
                path.display()
            ));
        }
        let accepted = validator.is_valid(document);
        match (verdict, accepted) {
            ("accepts", true) | ("rejects", false) => {}
            _ => {
                let errors: Vec<String> = validator
                    .iter_errors(document)
                    .map(|e| e.to_string())
                    .take(3)
                    .collect();
                failures.push(format!(
                    "{}: declared {verdict}, schema accepted={accepted} {errors:?}",
                    path.display()
                ));
            }
        }
        if is_decode && !accepted {
            rejected.push(v["name"].as_str().unwrap().to_owned());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The families the schema must catch on its own.
    for prefix in [
        "unknown-field-",
        "digest-",
        "timestamp-",
        "exit-",
        "base64-",
    ] {
        assert!(
            rejected.iter().any(|n| n.starts_with(prefix)),
            "no {prefix}* vector rejected by the schema"
        );
    }
}

#[test]
fn schemas_close_objects() {
    // deny_unknown_fields must surface as additionalProperties (or
    // unevaluatedProperties) false on every object schema.
    fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                let is_object = map.get("type") == Some(&Value::from("object"));
                let has_props = map.contains_key("properties");
                let closed = map.get("additionalProperties") == Some(&Value::Bool(false))
                    || map.get("unevaluatedProperties") == Some(&Value::Bool(false));
                if is_object && has_props && !closed {
                    out.push(at.to_owned());
                }
                for (k, child) in map {
                    walk(child, &format!("{at}/{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    for entry in std::fs::read_dir(kit_dir().join("schema")).unwrap() {
        let path = entry.unwrap().path();
        if path.ends_with("vector.schema.json") {
            continue;
        }
        let mut open = Vec::new();
        walk(&read(&path), "", &mut open);
        assert!(
            open.is_empty(),
            "{}: open objects at {open:?}",
            path.display()
        );
    }
}
