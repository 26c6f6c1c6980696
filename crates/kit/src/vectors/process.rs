//! The identity checks of openProcess evidence (`open_process_identity`).

use super::*;

pub(super) fn process_identity(v: &mut Vectors) {
    let check = "open_process_identity";
    let inst = instance(InstanceState::Active);
    let input = |instance: &SandboxInstance,
                 envelope: &SandboxProviderCapabilities,
                 evidence: &SandboxProcessEvidence| {
        json!({"instance": instance, "request": process_request(), "envelope": envelope, "evidence": evidence})
    };
    v.ok_identity(
        "open-process-identity-echo",
        "Evidence that agrees with the instance, the request and the envelope.",
        check,
        input(&inst, &caps_full(), &evidence()),
    );
    let mut case = |name: &str,
                    description: &str,
                    field: &str,
                    expected: String,
                    actual: String,
                    change: &dyn Fn(&mut SandboxProcessEvidence)| {
        let mut e = evidence();
        change(&mut e);
        v.bad_identity(
            name,
            description,
            check,
            input(&inst, &caps_full(), &e),
            field,
            Some(expected),
            actual,
        );
    };
    case(
        "open-process-identity-provider",
        "Evidence from another provider.",
        "provider",
        show(&inst.provider),
        show(&"docker"),
        &|e| e.provider = "docker".into(),
    );
    case(
        "open-process-identity-instance-id",
        "Evidence about another instance.",
        "instance_id",
        show(&inst.instance_id),
        show(&"inst-2"),
        &|e| e.instance_id = "inst-2".into(),
    );
    case(
        "open-process-identity-session-id",
        "Evidence about another Session.",
        "session_id",
        show(&inst.session_id),
        show(&"sess-2"),
        &|e| e.session_id = "sess-2".into(),
    );
    case(
        "open-process-identity-placement",
        "Evidence placement disagreeing with the instance.",
        "placement",
        show(&inst.placement),
        show(&Placement::Hosted),
        &|e| e.placement = Placement::Hosted,
    );
    case(
        "open-process-identity-tier",
        "Evidence tier disagreeing with the instance's target.",
        "tier",
        show(&inst.target),
        show(&Tier::Microvm),
        &|e| e.tier = Tier::Microvm,
    );
    case(
        "open-process-identity-network-mode",
        "Evidence network mode disagreeing with the profile's policy.",
        "network_mode",
        show(&NetworkMode::Allowlist),
        show(&NetworkMode::None),
        &|e| e.network_mode = NetworkMode::None,
    );
    case(
        "open-process-identity-started-at",
        "Evidence of a process that started at the instance's hard expiry (decision 003: it must start strictly before).",
        "started_at",
        format!("strictly before the instance's expires_at {}", show(&inst.expires_at)),
        show(&inst.expires_at),
        &|e| e.started_at = instance(InstanceState::Active).expires_at,
    );
    case(
        "open-process-identity-executable",
        "Evidence naming another executable than the request's.",
        "executable",
        show(&"/usr/local/bin/agent"),
        show(&"/bin/sh"),
        &|e| e.executable = "/bin/sh".into(),
    );

    // Against the envelope: the instance and evidence agree, the envelope does not.
    let hosted = SandboxInstance {
        placement: Placement::Hosted,
        ..inst.clone()
    };
    let hosted_evidence = SandboxProcessEvidence {
        placement: Placement::Hosted,
        ..evidence()
    };
    v.bad_identity(
        "open-process-identity-placement-envelope",
        "Evidence placement outside the envelope's placement.",
        check,
        input(&hosted, &caps_full(), &hosted_evidence),
        "placement",
        None,
        show(&Placement::Hosted),
    );
    let microvm = SandboxInstance {
        target: Tier::Microvm,
        ..inst.clone()
    };
    let microvm_evidence = SandboxProcessEvidence {
        tier: Tier::Microvm,
        ..evidence()
    };
    let container_only = SandboxProviderCapabilities {
        tiers: vec![Tier::Container],
        ..caps_full()
    };
    v.bad_identity(
        "open-process-identity-tier-envelope",
        "Evidence tier outside the envelope's tiers.",
        check,
        input(&microvm, &container_only, &microvm_evidence),
        "tier",
        None,
        show(&Tier::Microvm),
    );
    let allowlist_only = SandboxProviderCapabilities {
        network_modes: vec![NetworkMode::None],
        ..caps_full()
    };
    v.bad_identity(
        "open-process-identity-network-mode-envelope",
        "Evidence network mode outside the envelope's network modes.",
        check,
        input(&inst, &allowlist_only, &evidence()),
        "network_mode",
        None,
        show(&NetworkMode::Allowlist),
    );
}
