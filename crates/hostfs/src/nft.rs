//! The allowlist rule set as an nftables script: a pure function from the
//! allowed endpoints to the text `nft -f -` loads, with no Docker and no
//! I/O, so any provider that owns a network namespace can install it.
//!
//! The script replaces one table, [`TABLE_FAMILY`] [`TABLE_NAME`], in
//! whatever namespace it is loaded into, atomically (nft applies a file as
//! one transaction):
//!
//! * `output` (hook output, policy **drop**): loopback is accepted except
//!   Docker's embedded resolver `127.0.0.11`; then one rule per allowed
//!   endpoint, `ip daddr A tcp dport P accept` (or `ip6 daddr`). Nothing
//!   else leaves: no UDP, no ICMP, no other address or port, no IPv6 unless
//!   an IPv6 endpoint is listed, no link-local metadata address unless
//!   listed.
//! * `input` (hook input, policy **drop**): loopback and replies of
//!   connections the namespace opened (`ct state established,related`)
//!   are accepted; no peer can open a connection into the namespace.
//!
//! Allowed endpoints are TCP only: the contract's destination port is a TCP
//! port (docs/decisions, egress).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

/// The nftables family of the table: `inet` covers IPv4 and IPv6.
pub const TABLE_FAMILY: &str = "inet";
/// The table's name in the namespace.
pub const TABLE_NAME: &str = "checkfu_egress";
/// Docker's embedded DNS resolver on user-defined networks: a loopback
/// address the daemon serves from inside the namespace, forwarding to the
/// host's resolvers. Always denied.
pub const DOCKER_EMBEDDED_RESOLVER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 11);

/// One allowed TCP endpoint: an address (a literal or a provider-resolved
/// name) and a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllowedEndpoint {
    /// The destination address; IPv4-mapped IPv6 addresses are treated as
    /// the IPv4 address they map (what the kernel sends).
    pub addr: IpAddr,
    /// The TCP port, 1..=65535 (the contract's bound).
    pub port: u16,
}

impl AllowedEndpoint {
    /// An endpoint with `addr` in canonical form (IPv4-mapped IPv6 becomes
    /// IPv4).
    pub fn new(addr: IpAddr, port: u16) -> AllowedEndpoint {
        AllowedEndpoint {
            addr: addr.to_canonical(),
            port,
        }
    }
}

/// The script that installs the allowlist of `endpoints` (deduplicated and
/// sorted, so equal sets give byte-equal scripts). An empty set denies
/// every destination outside the namespace.
///
/// Loading it twice is idempotent: it declares the table, deletes it and
/// declares it again in one transaction.
pub fn ruleset(endpoints: &[AllowedEndpoint]) -> String {
    let set: BTreeSet<AllowedEndpoint> = endpoints
        .iter()
        .map(|e| AllowedEndpoint::new(e.addr, e.port))
        .collect();
    let t = format!("{TABLE_FAMILY} {TABLE_NAME}");
    let mut s = String::new();
    // `table` then `delete table`: the delete never fails on a fresh
    // namespace, and the final declaration starts from nothing.
    let _ = writeln!(s, "table {t}");
    let _ = writeln!(s, "delete table {t}");
    let _ = writeln!(s, "table {t} {{");
    let _ = writeln!(s, "\tchain output {{");
    let _ = writeln!(
        s,
        "\t\ttype filter hook output priority filter; policy drop;"
    );
    let _ = writeln!(
        s,
        "\t\toifname \"lo\" ip daddr {DOCKER_EMBEDDED_RESOLVER} drop"
    );
    let _ = writeln!(s, "\t\toifname \"lo\" accept");
    for e in &set {
        let (family, addr) = match e.addr {
            IpAddr::V4(a) => ("ip", a.to_string()),
            IpAddr::V6(a) => ("ip6", a.to_string()),
        };
        let _ = writeln!(s, "\t\t{family} daddr {addr} tcp dport {} accept", e.port);
    }
    let _ = writeln!(s, "\t}}");
    let _ = writeln!(s, "\tchain input {{");
    let _ = writeln!(
        s,
        "\t\ttype filter hook input priority filter; policy drop;"
    );
    let _ = writeln!(s, "\t\tiifname \"lo\" accept");
    let _ = writeln!(s, "\t\tct state established,related accept");
    let _ = writeln!(s, "\t}}");
    let _ = writeln!(s, "}}");
    s
}

/// Whether `listing` (the output of `nft list table inet checkfu_egress`)
/// shows the table with both chains at policy drop and one accept rule per
/// endpoint: the read-back check after loading [`ruleset`].
pub fn listing_matches(listing: &str, endpoints: &[AllowedEndpoint]) -> bool {
    let drops = listing.matches("policy drop;").count();
    let accepts = listing
        .lines()
        .filter(|l| l.contains(" tcp dport ") && l.trim_end().ends_with("accept"))
        .count();
    let set: BTreeSet<AllowedEndpoint> = endpoints
        .iter()
        .map(|e| AllowedEndpoint::new(e.addr, e.port))
        .collect();
    listing.contains(&format!("table {TABLE_FAMILY} {TABLE_NAME} {{"))
        && drops == 2
        && accepts == set.len()
        && set.iter().all(|e| {
            let needle = format!("daddr {} tcp dport {} accept", e.addr, e.port);
            listing.contains(&needle)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    fn ep(addr: &str, port: u16) -> AllowedEndpoint {
        AllowedEndpoint::new(addr.parse().unwrap(), port)
    }

    #[test]
    fn empty_allowlist_denies_everything_but_loopback() {
        let s = ruleset(&[]);
        assert_eq!(
            s,
            "table inet checkfu_egress\n\
             delete table inet checkfu_egress\n\
             table inet checkfu_egress {\n\
             \tchain output {\n\
             \t\ttype filter hook output priority filter; policy drop;\n\
             \t\toifname \"lo\" ip daddr 127.0.0.11 drop\n\
             \t\toifname \"lo\" accept\n\
             \t}\n\
             \tchain input {\n\
             \t\ttype filter hook input priority filter; policy drop;\n\
             \t\tiifname \"lo\" accept\n\
             \t\tct state established,related accept\n\
             \t}\n\
             }\n"
        );
    }

    #[test]
    fn each_endpoint_is_one_tcp_accept_for_its_family() {
        let s = ruleset(&[ep("10.0.0.2", 7000), ep("fd00::2", 443)]);
        assert!(
            s.contains("\t\tip daddr 10.0.0.2 tcp dport 7000 accept\n"),
            "{s}"
        );
        assert!(
            s.contains("\t\tip6 daddr fd00::2 tcp dport 443 accept\n"),
            "{s}"
        );
        assert!(!s.contains("udp"), "no UDP is ever accepted: {s}");
        assert_eq!(s.matches(" accept\n").count(), 2 + 2 + 1);
    }

    #[test]
    fn the_embedded_resolver_is_dropped_before_loopback_is_accepted() {
        let s = ruleset(&[ep("127.0.0.11", 53)]);
        let drop = s.find("ip daddr 127.0.0.11 drop").unwrap();
        let lo = s.find("oifname \"lo\" accept").unwrap();
        assert!(drop < lo);
    }

    #[test]
    fn order_and_duplicates_do_not_change_the_script() {
        let a = ruleset(&[ep("10.0.0.3", 1), ep("10.0.0.2", 2), ep("10.0.0.3", 1)]);
        let b = ruleset(&[ep("10.0.0.2", 2), ep("10.0.0.3", 1)]);
        assert_eq!(a, b);
    }

    #[test]
    fn ipv4_mapped_ipv6_is_the_ipv4_address() {
        let mapped =
            AllowedEndpoint::new(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped()), 80);
        assert_eq!(mapped, ep("10.0.0.2", 80));
        assert!(ruleset(&[mapped]).contains("ip daddr 10.0.0.2 tcp dport 80 accept"));
        assert!(!ruleset(&[mapped]).contains("ip6 daddr"));
        let plain = AllowedEndpoint::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 80);
        assert!(ruleset(&[plain]).contains("ip6 daddr ::1 tcp dport 80 accept"));
    }

    #[test]
    fn a_listing_matches_only_the_loaded_endpoints() {
        let eps = [ep("10.0.0.2", 7000)];
        // What `nft list table` prints for the loaded script.
        let listing = "table inet checkfu_egress {\n\
            \tchain output {\n\
            \t\ttype filter hook output priority filter; policy drop;\n\
            \t\toifname \"lo\" ip daddr 127.0.0.11 drop\n\
            \t\toifname \"lo\" accept\n\
            \t\tip daddr 10.0.0.2 tcp dport 7000 accept\n\
            \t}\n\
            \tchain input {\n\
            \t\ttype filter hook input priority filter; policy drop;\n\
            \t\tiifname \"lo\" accept\n\
            \t\tct state established,related accept\n\
            \t}\n\
            }\n";
        assert!(listing_matches(listing, &eps));
        assert!(!listing_matches(listing, &[ep("10.0.0.3", 7000)]));
        assert!(
            !listing_matches(listing, &[]),
            "an extra accept is a mismatch"
        );
        let open = listing.replacen("policy drop", "policy accept", 1);
        assert!(!listing_matches(&open, &eps), "an open chain is a mismatch");
        assert!(!listing_matches("", &eps));
    }
}
