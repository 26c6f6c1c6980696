//! The simulated network: `nc -w S HOST PORT` against named listeners.

mod common;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use common::*;

fn allowlist(dests: &[(&str, u16)]) -> NetworkPolicy {
    NetworkPolicy::Allowlist {
        destinations: dests
            .iter()
            .map(|(h, p)| NetworkDestination {
                host: h.to_string(),
                port: *p,
            })
            .collect(),
    }
}

async fn instance(p: &MemoryProvider, policy: NetworkPolicy) -> String {
    active_with(
        p,
        &request_with("session-1", RetentionMode::EphemeralZdr, policy),
        &[],
    )
    .await
}

async fn nc(p: &MemoryProvider, id: &str, host: &str, port: u16) -> SandboxCommandResult {
    run(p, id, &["nc", "-w", "2", host, &port.to_string()]).await
}

#[tokio::test]
async fn allowlist_reaches_only_declared_destinations() {
    let (p, _) = provider();
    p.add_listener("egress.test", 8443, b"token-allowed\n".to_vec());
    p.add_listener("other.test", 8443, b"token-other\n".to_vec());
    let id = instance(&p, allowlist(&[("egress.test", 8443), ("down.test", 1)])).await;
    let r = nc(&p, &id, "egress.test", 8443).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    assert_eq!(stdout(&r), "token-allowed\n");
    for (host, port) in [
        ("other.test", 8443),
        ("egress.test", 8444),
        ("down.test", 1),
    ] {
        let r = nc(&p, &id, host, port).await;
        assert_eq!(r.exit, ExitCause::ExitCode(1), "{host}:{port}");
        assert_eq!(stdout(&r), "", "{host}:{port}");
    }
    assert_eq!(
        p.dial("egress.test", 8443),
        Some(b"token-allowed\n".to_vec())
    );
    assert!(p.remove_listener("egress.test", 8443));
    assert_eq!(p.dial("egress.test", 8443), None);
    assert_eq!(
        nc(&p, &id, "egress.test", 8443).await.exit,
        ExitCause::ExitCode(1)
    );
}

#[tokio::test]
async fn none_reaches_no_external_listener_but_loopback_works() {
    let (p, _) = provider();
    p.add_listener("egress.test", 8443, b"token\n".to_vec());
    let id = instance(&p, NetworkPolicy::None).await;
    let r = nc(&p, &id, "egress.test", 8443).await;
    assert_eq!(r.exit, ExitCause::ExitCode(1));
    assert!(stdout(&r).is_empty());
    assert!(stderr(&r).contains("unreachable"));
    p.add_instance_listener(&id, 9000, b"local\n".to_vec())
        .unwrap();
    for host in ["127.0.0.1", "localhost"] {
        let r = nc(&p, &id, host, 9000).await;
        assert_eq!(r.exit, ExitCause::ExitCode(0));
        assert_eq!(stdout(&r), "local\n");
    }
    assert_eq!(
        nc(&p, &id, "127.0.0.1", 9001).await.exit,
        ExitCause::ExitCode(1)
    );
    // Another instance's loopback is not this one's.
    let other = instance(&p, NetworkPolicy::None).await;
    assert_eq!(
        nc(&p, &other, "127.0.0.1", 9000).await.exit,
        ExitCause::ExitCode(1)
    );
    assert!(p.remove_instance_listener(&id, 9000));
    assert!(p
        .add_instance_listener("mem-inst-999999", 1, vec![])
        .is_err());
}
