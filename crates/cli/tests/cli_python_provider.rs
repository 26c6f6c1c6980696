//! The Python provider in `examples/python-provider`, written from the
//! author kit alone, under the suite through `--provider-cmd`: the five
//! cases its tokens back pass, the other four are recorded skips naming the
//! missing tokens, and nothing labelled with its scope is left.
//!
//! Gate: the provider runs containers through the Docker CLI, so without a
//! daemon the test prints a `SKIP` line, except under `CI=true`, where it
//! fails.

// The test reads its own temporary state directory from outside.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const PASSES: [&str; 5] = [
    "stage-seal-execute",
    "stage-git-project",
    "none-egress",
    "zdr-release",
    "orphan-reclaim",
];

fn containers_of(scope: &str) -> Vec<String> {
    let o = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=checkfu.python-provider.scope={scope}"),
        ])
        .output()
        .expect("docker CLI");
    assert!(o.status.success(), "docker ps: {}", describe(&o));
    stdout(&o).lines().map(str::to_owned).collect()
}

/// The `--provider-cmd` line of the example provider for `env`: its fixture,
/// its scope, and `state` as the provider's state directory.
fn provider_line(env: &DockerEnv, state: &Path) -> String {
    let provider = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/python-provider/provider.py")
        .canonicalize()
        .expect("examples/python-provider/provider.py");
    format!(
        "python3 {} --root-image {} --state-dir {} --scope {}",
        provider.display(),
        env.fixture,
        state.display(),
        env.scope
    )
}

#[test]
fn python_provider_passes_its_five_cases_and_leaves_nothing() {
    let Some(env) = docker("python_provider") else {
        return;
    };
    let state = tempfile::tempdir().expect("state dir");
    let line = provider_line(&env, state.path());
    let o = output(checkfu().args(["sandbox", "test", "--provider-cmd", &line, "--json", "-"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("evidence JSON");
    assert_eq!(evidence["summary"]["failed"], 0, "{}", describe(&o));
    assert_eq!(evidence["summary"]["passed"], 5, "{}", describe(&o));
    assert_eq!(evidence["summary"]["skipped"], 4, "{}", describe(&o));
    for case in evidence["cases"].as_array().expect("cases") {
        let id = case["id"].as_str().expect("case id");
        if PASSES.contains(&id) {
            assert_eq!(case["outcome"], "passed", "{id}: {case}");
        } else {
            assert_eq!(case["outcome"], "skipped", "{id}: {case}");
            let missing = case["missing_tokens"].as_array().expect("missing tokens");
            assert!(!missing.is_empty(), "{id} skipped without naming a token");
        }
    }
    assert_eq!(
        evidence["provider_command"]["argv"][0], "python3",
        "the evidence names the provider command"
    );
    assert_eq!(
        containers_of(&env.scope),
        Vec::<String>::new(),
        "containers left"
    );
    let instances = state.path().join(&env.scope).join("instances");
    let left: Vec<_> = std::fs::read_dir(&instances)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "instance directories left: {left:?}");
    env.finish();
}

/// Names that are not UTF-8 travel as `{"bytes_base64": ...}` (decision
/// 021): a host file staged under one (writeFile), a workload file made
/// under another (listDir, then a read), both copied out under their exact
/// bytes.
#[test]
fn python_provider_stages_lists_and_reads_names_that_are_not_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;
    let Some(env) = docker("python_provider_bytes") else {
        return;
    };
    let state = tempfile::tempdir().expect("state dir");
    let line = provider_line(&env, state.path());
    let tmp = tempfile::tempdir().expect("scratch dir");
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join(OsStr::from_bytes(b"in-\xfe")), b"staged").unwrap();
    let out = tmp.path().join("out");
    let o = output(
        checkfu()
            .args(["sandbox", "run", "--provider-cmd", &line, "--image"])
            .arg(&env.fixture)
            .arg("--mount")
            .arg(format!("{}:/data:ro", data.display()))
            .arg("--outputs")
            .arg(&out)
            .args([
                "--",
                "sh",
                "-c",
                "cp /data/in-* /mnt/session/outputs/ && \
                 printf made > \"/mnt/session/outputs/bad-$(printf '\\377')\"",
            ]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(
        std::fs::read(out.join(OsStr::from_bytes(b"in-\xfe"))).ok(),
        Some(b"staged".to_vec()),
        "{}",
        describe(&o)
    );
    assert_eq!(
        std::fs::read(out.join(OsStr::from_bytes(b"bad-\xff"))).ok(),
        Some(b"made".to_vec()),
        "{}",
        describe(&o)
    );
    assert_eq!(
        containers_of(&env.scope),
        Vec::<String>::new(),
        "containers left"
    );
    env.finish();
}

/// listDir never reads a body over 16 MiB (decision 018): a 24 GiB sparse
/// file in the output tree is listed by size, named as skipped, and the
/// rest is copied within the run's copy deadline (a provider hashing the
/// holes would still be reading when the deadline abandons the copy).
#[test]
fn python_provider_lists_a_huge_sparse_output_without_reading_it() {
    let Some(env) = docker("python_provider_sparse") else {
        return;
    };
    let state = tempfile::tempdir().expect("state dir");
    let line = provider_line(&env, state.path());
    let tmp = tempfile::tempdir().expect("scratch dir");
    let out = tmp.path().join("out");
    let o = output(
        checkfu()
            .args(["sandbox", "run", "--provider-cmd", &line, "--image"])
            .arg(&env.fixture)
            .args(["--timeout", "5", "--outputs"])
            .arg(&out)
            .args([
                "--",
                "sh",
                "-c",
                "echo ok > /mnt/session/outputs/a.txt; \
                 dd if=/dev/zero of=/mnt/session/outputs/s bs=1 count=0 seek=24G",
            ]),
    );
    assert_eq!(code(&o), 125, "{}", describe(&o));
    let err = stderr(&o);
    assert!(err.contains("/mnt/session/outputs/s"), "{}", describe(&o));
    assert!(err.contains("exited with status 0"), "{}", describe(&o));
    assert!(!err.contains("deadline"), "{}", describe(&o));
    assert_eq!(
        std::fs::read(out.join("a.txt")).ok(),
        Some(b"ok\n".to_vec()),
        "{}",
        describe(&o)
    );
    assert!(!out.join("s").exists(), "the huge file is not copied");
    assert_eq!(
        containers_of(&env.scope),
        Vec::<String>::new(),
        "containers left"
    );
    env.finish();
}

/// The staged tree arrives whole and outputs keep their bits through the
/// wire seam (`common::tree`, the row every provider answers the same):
/// writeFile's `kind: "directory"` with its `mode`, and listDir's `mode`.
#[test]
fn python_provider_stages_the_whole_tree_and_outputs_keep_their_bits() {
    use common::tree::{
        assert_script_ran, assert_tree_and_outputs, mount_arg, staged_tree, workload,
    };
    let Some(env) = docker("python_provider_tree") else {
        return;
    };
    let state = tempfile::tempdir().expect("state dir");
    let line = provider_line(&env, state.path());
    let run = |args: &[&str]| {
        let mut c = checkfu();
        c.args(["sandbox", "run", "--provider-cmd", &line, "--image"])
            .arg(&env.fixture)
            .args(args);
        output(c)
    };
    let tmp = tempfile::tempdir().expect("scratch dir");
    let m = staged_tree(tmp.path());
    let mount = mount_arg(&m);
    assert_script_ran(&run(&["--mount", &mount, "--", "/src/run.sh"]));
    let out = tmp.path().join("out");
    let (script, expected) = workload(&m);
    let o = run(&[
        "--mount",
        &mount,
        "--outputs",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_tree_and_outputs(&o, &expected, &out);
    assert_eq!(
        containers_of(&env.scope),
        Vec::<String>::new(),
        "containers left"
    );
    env.finish();
}
