//! `checkfu sandbox fixture` on the local Docker daemon (gated).

mod common;

use common::*;

#[test]
fn fixture_prints_a_pinned_reference_last() {
    let Some(env) = docker("docker_fixture") else {
        return;
    };
    let o = output(env.checkfu().args(["sandbox", "fixture"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let last = stdout(&o).lines().last().unwrap_or_default().to_owned();
    let (name, digest) = last.split_once("@sha256:").expect("name@sha256:hex");
    assert_eq!(name, "checkfu-fixture");
    assert!(
        digest.len() == 64
            && digest
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{last}"
    );
    assert_eq!(last, env.fixture, "a second call reuses the image");
    env.finish();
}
