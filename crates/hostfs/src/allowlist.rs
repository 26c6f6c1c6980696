//! The resolution of an allowlist's destinations into the endpoints its
//! rules allow ([`crate::nft`]) and the names the instance sees pinned,
//! done once per activation by both host-side providers.

use std::collections::BTreeMap;
use std::net::IpAddr;

use checkfu_sandbox_contract::NetworkDestination;

use crate::nft::AllowedEndpoint;

/// The provider-resolved allowlist of one activation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EgressPlan {
    /// Allowed TCP endpoints, sorted and deduplicated.
    pub endpoints: Vec<AllowedEndpoint>,
    /// Name pins: (address in canonical form, name), in destination order,
    /// each once.
    pub hosts: Vec<(IpAddr, String)>,
}

/// Resolves `destinations`: IP literals (bracketed IPv6 too) as they are,
/// names through `static_hosts` first, then the host's resolver, once.
/// Blocking (the host's resolver may ask the network).
///
/// # Errors
///
/// A line naming the destination that does not resolve to any address.
pub fn plan(
    destinations: &[NetworkDestination],
    static_hosts: &BTreeMap<String, Vec<IpAddr>>,
) -> Result<EgressPlan, String> {
    let mut plan = EgressPlan::default();
    for d in destinations {
        let host = d.host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            plan.endpoints.push(AllowedEndpoint::new(ip, d.port));
            continue;
        }
        let addrs: Vec<IpAddr> = match static_hosts.get(host) {
            Some(list) => list.clone(),
            None => std::net::ToSocketAddrs::to_socket_addrs(&(host, d.port))
                .map_err(|e| format!("resolving destination {}:{}: {e}", d.host, d.port))?
                .map(|sa| sa.ip())
                .collect(),
        };
        if addrs.is_empty() {
            return Err(format!(
                "destination {}:{} resolves to no address",
                d.host, d.port
            ));
        }
        for ip in addrs {
            let ep = AllowedEndpoint::new(ip, d.port);
            plan.endpoints.push(ep);
            let pin = (ep.addr, host.to_owned());
            if !plan.hosts.contains(&pin) {
                plan.hosts.push(pin);
            }
        }
    }
    plan.endpoints.sort();
    plan.endpoints.dedup();
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(host: &str, port: u16) -> NetworkDestination {
        NetworkDestination {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn literals_and_static_names_make_endpoints_and_pins() {
        let statics = BTreeMap::from([(
            "allowed.test".to_owned(),
            vec![
                "10.0.0.2".parse().unwrap(),
                "::ffff:10.0.0.3".parse().unwrap(),
                "10.0.0.2".parse().unwrap(),
            ],
        )]);
        let p = plan(
            &[
                dest("allowed.test", 7000),
                dest("10.0.0.9", 80),
                dest("[fd00::9]", 81),
                dest("10.0.0.9", 80),
            ],
            &statics,
        )
        .unwrap();
        let eps: Vec<String> = p
            .endpoints
            .iter()
            .map(|e| format!("{} {}", e.addr, e.port))
            .collect();
        assert_eq!(
            eps,
            [
                "10.0.0.2 7000",
                "10.0.0.3 7000",
                "10.0.0.9 80",
                "fd00::9 81"
            ]
        );
        let pins: Vec<String> = p.hosts.iter().map(|(ip, n)| format!("{n}={ip}")).collect();
        assert_eq!(pins, ["allowed.test=10.0.0.2", "allowed.test=10.0.0.3"]);
    }

    #[test]
    fn a_name_with_no_address_is_refused_by_name() {
        let statics = BTreeMap::from([("empty.test".to_owned(), vec![])]);
        let e = plan(&[dest("empty.test", 1)], &statics).unwrap_err();
        assert!(e.contains("empty.test:1"), "{e}");
    }

    #[test]
    fn names_are_resolved_by_the_host_and_pinned() {
        // `localhost` resolves through the host's own files, no query leaves.
        let p = plan(&[dest("localhost", 7000)], &BTreeMap::new()).unwrap();
        assert!(!p.endpoints.is_empty());
        assert!(p.endpoints.iter().all(|e| e.port == 7000));
        for (ip, name) in &p.hosts {
            assert_eq!(name, "localhost");
            assert!(p.endpoints.iter().any(|e| e.addr == *ip));
        }
    }
}
