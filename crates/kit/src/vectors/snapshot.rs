//! The identity checks of snapshot and cloneSnapshot (`snapshot_identity`, `clone_identity`).

use super::*;

pub(super) fn snapshot_identity(v: &mut Vectors) {
    let check = "snapshot_identity";
    let source = instance(InstanceState::Active);
    let input = |returned: &SandboxSnapshot| json!({"source": source, "requested_expires_at": snapshot_expiry(), "returned": returned});
    v.ok_identity(
        "snapshot-identity-echo",
        "A snapshot that agrees with its source and carries the requested expires_at.",
        check,
        input(&snapshot()),
    );
    let base = snapshot();
    let mut case = |field: &str,
                    description: &str,
                    expected: String,
                    actual: String,
                    change: &dyn Fn(&mut SandboxSnapshot)| {
        let mut returned = base.clone();
        change(&mut returned);
        let name = format!("snapshot-identity-{}", field.replace('_', "-"));
        v.bad_identity(
            &name,
            description,
            check,
            input(&returned),
            field,
            Some(expected),
            actual,
        );
    };
    case(
        "provider",
        "Another provider.",
        show(&source.provider),
        show(&"docker"),
        &|s| s.provider = "docker".into(),
    );
    case(
        "placement",
        "Another placement.",
        show(&source.placement),
        show(&Placement::Hosted),
        &|s| s.placement = Placement::Hosted,
    );
    case(
        "source_instance_id",
        "Another source instance.",
        show(&source.instance_id),
        show(&"inst-2"),
        &|s| s.source_instance_id = "inst-2".into(),
    );
    case(
        "workspace_id",
        "Another Workspace.",
        show(&source.workspace_id),
        show(&"ws-2"),
        &|s| s.workspace_id = "ws-2".into(),
    );
    case(
        "session_id",
        "Another Session.",
        show(&source.session_id),
        show(&"sess-2"),
        &|s| s.session_id = "sess-2".into(),
    );
    case(
        "profile_id",
        "Another profile.",
        show(&source.profile.profile_id),
        show(&"prof-2"),
        &|s| s.profile_id = "prof-2".into(),
    );
    case(
        "profile_version",
        "Another profile version.",
        show(&source.profile.profile_version),
        show(&2u32),
        &|s| s.profile_version = 2,
    );
    case(
        "profile_digest",
        "Another profile digest.",
        show(&source.profile.profile_digest),
        show(&digest('6')),
        &|s| s.profile_digest = digest('6'),
    );
    let own = source.expires_at;
    case(
        "expires_at",
        "The instance's hard expiry substituted for the requested retention deadline.",
        show(&snapshot_expiry()),
        show(&own),
        &move |s| s.expires_at = own,
    );
    let mut empty = base.clone();
    empty.snapshot_id = String::new();
    v.bad_identity(
        "snapshot-identity-empty-snapshot-id",
        "A snapshot without an id.",
        check,
        input(&empty),
        "snapshot_id",
        None,
        show(&""),
    );
}

pub(super) fn clone_identity(v: &mut Vectors) {
    let check = "clone_identity";
    let source = snapshot();
    let input = |returned: &SandboxSnapshot| json!({"source": source, "target_session_id": "sess-2", "returned": returned});
    v.ok_identity(
        "clone-identity-valid",
        "A distinct id, the target Session, the source's expiry, created after the source.",
        check,
        input(&clone_of()),
    );
    let at_source = SandboxSnapshot {
        created_at: source.created_at,
        ..clone_of()
    };
    v.ok_identity(
        "clone-identity-created-at-source",
        "created_at equal to the source's is allowed (at or after).",
        check,
        input(&at_source),
    );
    let reused = SandboxSnapshot {
        snapshot_id: source.snapshot_id.clone(),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-reused-id",
        "The clone reuses the source's snapshot id.",
        check,
        input(&reused),
        "snapshot_id",
        None,
        show(&source.snapshot_id),
    );
    let wrong_session = SandboxSnapshot {
        session_id: source.session_id.clone(),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-wrong-session",
        "The clone stays in the source's Session instead of the target.",
        check,
        input(&wrong_session),
        "session_id",
        Some(show(&"sess-2")),
        show(&source.session_id),
    );
    let moved = ts("2026-12-14T07:30:00.000Z");
    let moved_expiry = SandboxSnapshot {
        expires_at: moved,
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-moved-expiry",
        "The clone moves the source's expires_at.",
        check,
        input(&moved_expiry),
        "expires_at",
        Some(show(&source.expires_at)),
        show(&moved),
    );
    let early = ts("2026-11-30T07:44:59.999Z");
    let predates = SandboxSnapshot {
        created_at: early,
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-predates-source",
        "The clone's created_at is before the source's.",
        check,
        input(&predates),
        "created_at",
        None,
        show(&early),
    );
    let at_expiry = SandboxSnapshot {
        created_at: source.expires_at,
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-created-at-expiry",
        "The clone's created_at is not strictly before its expires_at.",
        check,
        input(&at_expiry),
        "created_at",
        None,
        show(&source.expires_at),
    );
    let other_provider = SandboxSnapshot {
        provider: "docker".into(),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-provider",
        "The clone names another provider.",
        check,
        input(&other_provider),
        "provider",
        Some(show(&source.provider)),
        show(&"docker"),
    );
    let other_digest = SandboxSnapshot {
        profile_digest: digest('5'),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-profile-digest",
        "The clone names another profile digest.",
        check,
        input(&other_digest),
        "profile_digest",
        Some(show(&source.profile_digest)),
        show(&digest('5')),
    );
}
