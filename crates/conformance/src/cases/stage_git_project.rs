//! Case `stage-git-project`: an immutable Git blob stages without a sandbox credential.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
    let dir = crate::scratch::ScratchDir::new("git-project")
        .map_err(|e| fail("create a Git repository", e.to_string()))?;
    let content = format!("fn main() {{ /* {} */ }}\n", fresh_token("git")).into_bytes();
    let commit = crate::git::commit_files(
        dir.path(),
        &[
            ("src/main.rs", &content),
            ("README", b"project\n"),
            ("run.sh", b"#!/bin/sh\nexit 0\n"),
        ],
    )
    .map_err(|e| fail("create a Git repository", e.to_string()))?;
    let profile = ctx.profile(RetentionMode::EphemeralZdr, NetworkPolicy::None);
    let req = ctx.request(
        "session-git",
        profile,
        vec![mount("/project", MountAccess::ReadOnly)],
        3600,
    );
    let inst = ctx.provision("provision", req).await?;
    let id = inst.instance_id.as_str();
    let staged = step(
        "stage the commit's tree",
        stage_git(
            &ctx.adapter,
            id,
            dir.path(),
            &commit,
            "",
            "/project",
            &|_| {},
        ),
    )
    .await?;
    let main = staged.iter().find(|f| f.path == "/project/src/main.rs");
    let script = staged.iter().find(|f| f.path == "/project/run.sh");
    ensure(
        main.is_some_and(|f| {
            f.sha256 == sha256_digest(&content) && f.git_mode == Some(GitMode::Regular)
        }) && script.is_some_and(|f| f.git_mode == Some(GitMode::Executable))
            && staged.len() == 3,
        "stage the commit's tree",
        || {
            format!("expected /project/src/main.rs (100644, the blob's digest), /project/README and /project/run.sh (100755), actual {staged:?}")
        },
    )?;
    step("activate", ctx.adapter.activate(id)).await?;
    let r = ctx
        .run_ok(
            "sha256sum the staged blob",
            id,
            cmd(&["sha256sum", "/project/src/main.rs"]),
        )
        .await?;
    let printed = text(r.stdout_base64.as_slice());
    let want = sha256_digest(&content);
    ensure(
        printed.split_whitespace().next() == Some(want.hex()),
        "sha256sum the staged blob",
        || format!("expected {} , actual {printed:?}", want.hex()),
    )?;
    let env = ctx
        .run_ok("no credential in the environment", id, cmd(&["env"]))
        .await?;
    let env_text = text(env.stdout_base64.as_slice()).to_ascii_uppercase();
    for marker in [
        "GIT_",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "CREDENTIAL",
        "CHECKFU_",
        "SSH_AUTH",
    ] {
        ensure(
            !env_text.contains(marker),
            "no credential in the environment",
            || format!("expected no variable mentioning {marker}, actual environment {env_text:?}"),
        )?;
    }
    let r = ctx
        .run(
            "the repository is not in the sandbox",
            id,
            cmd(&["ls", "/project/.git"]),
        )
        .await?;
    ensure(
        r.exit != ExitCause::ExitCode(0),
        "the repository is not in the sandbox",
        || "expected /project/.git to be absent: only blobs are staged".into(),
    )?;
    step("release", ctx.adapter.release(id, None)).await?;
    Ok(())
}
