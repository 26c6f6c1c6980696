//! One scenario every provider must answer the same (issue: a staged tree
//! arrives whole and outputs keep their bits): a host folder with an empty
//! directory, a 0700 directory holding a 0600 file, and a 0755 script is
//! staged at `/src`; inside, `stat` of every host path shows the host's
//! type and bits, and the workload's `chmod 755` / `600` outputs arrive
//! with those bits in `--outputs DIR` (a file left `0644` arrives `0644`).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use checkfu_test_support::cli::{code, describe, stdout};

/// Where the folder is mounted.
pub const MOUNT: &str = "/src";

/// Builds `dir/m`: `empty/`, `sub/` (both empty), `private/` (0700)
/// holding `key` (0600), `run.sh` (0755, prints `ran`), `data.txt` (0644).
/// Returns the folder.
pub fn staged_tree(dir: &Path) -> PathBuf {
    let m = dir.join("m");
    for d in ["empty", "sub", "private"] {
        std::fs::create_dir_all(m.join(d)).unwrap();
    }
    let file = |rel: &str, bytes: &[u8], mode: u32| {
        let p = m.join(rel);
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    file("run.sh", b"#!/bin/sh\necho ran\n", 0o755);
    file("data.txt", b"data\n", 0o644);
    file("private/key", b"secret\n", 0o600);
    std::fs::set_permissions(m.join("private"), std::fs::Permissions::from_mode(0o700)).unwrap();
    m
}

/// The `--mount` value for `m`.
pub fn mount_arg(m: &Path) -> String {
    format!("{}:{MOUNT}", m.display())
}

/// Every path below `m` (sorted) as the sandbox names it, and the lines
/// `stat -c '%a %F %n'` prints for them, both read from the host.
fn host_listing(m: &Path) -> (Vec<String>, String) {
    let mut rels = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in std::fs::read_dir(m.join(&rel)).unwrap() {
            let child = rel.join(e.unwrap().file_name());
            if m.join(&child).is_dir() {
                stack.push(child.clone());
            }
            rels.push(child);
        }
    }
    rels.sort();
    let mut paths = Vec::new();
    let mut lines = String::new();
    for rel in rels {
        let meta = std::fs::symlink_metadata(m.join(&rel)).unwrap();
        let kind = if meta.is_dir() {
            "directory"
        } else if meta.len() == 0 {
            "regular empty file"
        } else {
            "regular file"
        };
        let path = format!("{MOUNT}/{}", rel.display());
        lines.push_str(&format!(
            "{:o} {kind} {path}\n",
            meta.permissions().mode() & 0o777
        ));
        paths.push(path);
    }
    (paths, lines)
}

/// The outputs the workload makes and the bits each must arrive with.
const OUTPUTS: [(&str, u32); 3] = [("x.sh", 0o755), ("secret", 0o600), ("plain", 0o644)];

/// The workload: `stat` of every host path of `m` below `/src`, then the
/// outputs made and chmodded. Returns its `sh -c` script and what it must
/// print.
pub fn workload(m: &Path) -> (String, String) {
    let (paths, expected) = host_listing(m);
    let out = |name: &str| format!("/mnt/session/outputs/{name}");
    let mut script = format!("stat -c \"%a %F %n\" {}", paths.join(" "));
    let all: Vec<String> = OUTPUTS.iter().map(|(n, _)| out(n)).collect();
    script.push_str(&format!("; touch {}", all.join(" ")));
    for (name, bits) in OUTPUTS {
        script.push_str(&format!("; chmod {bits:o} {}", out(name)));
    }
    (script, expected)
}

/// Asserts the run `o` of [`workload`] printed `expected` and exited 0,
/// and that `out` holds each output with its bits.
pub fn assert_tree_and_outputs(o: &Output, expected: &str, out: &Path) {
    assert_eq!(code(o), 0, "{}", describe(o));
    assert_eq!(stdout(o), expected, "the tree inside: {}", describe(o));
    for (name, bits) in OUTPUTS {
        let meta = std::fs::metadata(out.join(name))
            .unwrap_or_else(|e| panic!("{name} not copied ({e}): {}", describe(o)));
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            bits,
            "{name}: 0o{:o}, expected 0o{bits:o}",
            meta.permissions().mode() & 0o7777
        );
    }
}

/// Asserts the run `o` of `/src/run.sh` exited 0 and printed `ran`.
pub fn assert_script_ran(o: &Output) {
    assert_eq!(code(o), 0, "{}", describe(o));
    assert_eq!(stdout(o), "ran\n", "{}", describe(o));
}
