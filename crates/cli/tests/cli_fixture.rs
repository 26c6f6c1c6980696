//! `checkfu sandbox fixture` on the local Docker daemon (gated).

mod common;

use common::*;

#[test]
fn fixture_prints_an_image_id_docker_and_checkfu_both_read() {
    let Some(env) = docker("docker_fixture") else {
        return;
    };
    let o = output(env.checkfu().args(["sandbox", "fixture"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let last = stdout(&o).lines().last().unwrap_or_default().to_owned();
    let hex = last.strip_prefix("sha256:").expect("sha256:<hex>");
    assert!(
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{last}"
    );
    assert_eq!(last, env.fixture_id, "a second call reuses the image");
    // The Docker CLI reads the printed reference as the local image.
    let o = std::process::Command::new("docker")
        .args(["run", "--rm", "--pull", "never", &last, "true"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("docker CLI");
    assert!(o.status.success(), "docker run {last}: {}", describe(&o));
    // checkfu accepts the printed form and the pinned form alike.
    for image in [last.as_str(), env.fixture.as_str()] {
        let mut run = env.checkfu();
        run.args([
            "sandbox",
            "run",
            "--provider",
            "docker",
            "--image",
            image,
            "--",
            "sh",
            "-c",
            "exit 7",
        ]);
        let o = output(&mut run);
        assert_eq!(code(&o), 7, "--image {image}: {}", describe(&o));
    }
    env.finish();
}
