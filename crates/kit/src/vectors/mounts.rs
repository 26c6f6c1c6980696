//! The mount plan of provision (`validate:SandboxProvisionRequest`), refused as `SandboxCapabilityUnavailable{mounts}`.

use super::*;

pub(super) fn validate_mounts(v: &mut Vectors) {
    let ty = "SandboxProvisionRequest";
    let m = |paths: &[&str]| -> Value {
        Value::Array(
            paths
                .iter()
                .map(|p| json!({"path": p, "access": "read_only"}))
                .collect(),
        )
    };
    let plan = |mounts: Value, max: u8| json!({"request": set(j(&provision_request()), "/mounts", mounts), "max_mounts": max});
    let sixty_four: Vec<String> = (0..64).map(|i| format!("/data/m{i}")).collect();
    let refs: Vec<&str> = sixty_four.iter().map(String::as_str).collect();
    v.ok_validate(
        "validate-mounts-at-bound",
        "Exactly 64 mounts with max_mounts 64.",
        ty,
        plan(m(&refs), 64),
    );
    v.ok_validate(
        "validate-mounts-nested-and-near-reserved",
        "A nested mount and paths that only share a prefix with reserved roots.",
        ty,
        plan(
            m(&[
                "/data",
                "/data/sub",
                "/home/checkfu2",
                "/tmpfiles",
                "/mnt/session/out",
            ]),
            64,
        ),
    );
    v.ok_validate(
        "validate-mounts-none",
        "No mounts on a provider with max_mounts 0.",
        ty,
        plan(m(&[]), 0),
    );
    let sixty_five: Vec<String> = (0..65).map(|i| format!("/data/m{i}")).collect();
    let refs: Vec<&str> = sixty_five.iter().map(String::as_str).collect();
    v.bad_mounts(
        "validate-mounts-over-bound",
        "65 mounts: one over the contract's 64 even when the envelope claims more.",
        m(&refs),
        64,
        "mounts",
        "rejects",
    );
    v.bad_mounts(
        "validate-mounts-over-envelope",
        "Three mounts on a provider with max_mounts 2.",
        m(&["/a", "/b", "/c"]),
        2,
        "mounts",
        "accepts",
    );
    v.bad_mounts(
        "validate-mounts-any-on-zero",
        "One mount on a provider with max_mounts 0.",
        m(&["/a"]),
        0,
        "mounts",
        "accepts",
    );
    for root in RESERVED_ROOTS {
        let slug = root
            .trim_start_matches('/')
            .replace(['/', '.'], "-")
            .replace("--", "-");
        v.bad_mounts(
            &format!("validate-mounts-reserved-{slug}"),
            &format!("A mount at the reserved root {root}."),
            m(&["/data", root]),
            64,
            "mounts[1].path",
            "accepts",
        );
    }
    let under = [
        ("tmp-cache", "/tmp/cache"),
        ("proc-self", "/proc/self"),
        ("outputs-sub", "/mnt/session/outputs/x"),
        ("control-sub", "/workspace/.checkfu/state"),
    ];
    for (slug, path) in under {
        v.bad_mounts(
            &format!("validate-mounts-under-reserved-{slug}"),
            &format!("{path} lies under a reserved root."),
            m(&[path]),
            64,
            "mounts[0].path",
            "accepts",
        );
    }
    let above = [
        ("root", "/"),
        ("mnt", "/mnt"),
        ("mnt-session", "/mnt/session"),
        ("workspace", "/workspace"),
        ("home", "/home"),
    ];
    for (slug, path) in above {
        v.bad_mounts(
            &format!("validate-mounts-above-reserved-{slug}"),
            &format!("{path} contains a reserved root."),
            m(&[path]),
            64,
            "mounts[0].path",
            "accepts",
        );
    }
    v.bad_mounts("validate-mounts-duplicate", "The same path declared twice, with different access.", json!([{"path": "/data", "access": "read_only"}, {"path": "/data", "access": "read_write"}]), 64, "mounts[1].path", "accepts");
    let shapes = [
        ("relative", "data"),
        ("trailing-slash", "/data/"),
        ("dot-dot", "/data/../etc"),
        ("dot", "/data/./x"),
        ("empty-component", "/data//x"),
        ("nul", "/data\0x"),
    ];
    for (slug, path) in shapes {
        v.bad_mounts(
            &format!("validate-mounts-path-{slug}"),
            &format!("A mount path that is not normalized ({slug})."),
            m(&[path]),
            64,
            "mounts[0].path",
            "accepts",
        );
    }
}
