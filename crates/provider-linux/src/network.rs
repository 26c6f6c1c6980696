//! Allowlist egress for instances of the linux provider (decision
//! `linux-allowlist-egress` in `docs/decisions/`).
//!
//! An instance whose profile asks for `allowlist` gets, after its init
//! started and before it is handed out:
//!
//! * one end of a veth pair, named `eth0` inside its network namespace,
//!   with an address of the scope's subnet and a default route through
//!   the scope's **bridge**; the host end (`cflv` + 11 hex digits of the
//!   scope and instance id) is a port of that bridge;
//! * the nftables table of [`checkfu_sandbox_hostfs::nft`] in its network
//!   namespace, loaded from the host (`nsenter --target PID --net nft -f
//!   -`) and read back: TCP to the listed endpoints only;
//! * `/etc/hosts` in its writable layer, pinning every listed name to the
//!   addresses the provider resolved (written before the init starts).
//!
//! The workload cannot change any of it: every command runs with empty
//! capability sets and `no_new_privs` (no `CAP_NET_ADMIN`, no
//! `CAP_NET_RAW`).
//!
//! The bridge (`cflb` + 11 hex digits of the scope, with an address `.1`
//! of a `/24` chosen in `100.64.0.0/10` that no host address overlaps) is
//! the only host-global object. Every link the provider creates carries
//! the alias `checkfu-linux:<scope>[:<instance>]`, and nothing without it
//! is ever removed. Instance addresses are leases (files
//! `net/leases/<host octet>` in the state directory holding the instance
//! id). All changes to the bridge and the leases happen under an
//! exclusive `flock` of `net/lock`. The bridge is removed when the last
//! lease of the scope is returned (destroy, release, rollback) and by
//! cleanup; a veth pair dies with its instance's network namespace, and
//! cleanup removes any host end whose instance has no directory.
//!
//! The bridge's gateway address belongs to the host: destinations on the
//! host (listeners bound on the gateway address) are reachable; routed
//! destinations beyond the host are not (the provider installs no NAT and
//! changes no forwarding setting), so an allowlist to an address off the
//! host is enforced but unreachable.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use checkfu_sandbox_contained as contained;
use checkfu_sandbox_contract::NetworkDestination;
use checkfu_sandbox_hostfs::nft::{self, AllowedEndpoint};
use sha2::{Digest as _, Sha256};

/// The prefix of the alias of every link the provider creates.
pub const LINK_ALIAS_PREFIX: &str = "checkfu-linux:";
/// The prefix of a scope's bridge name (then 11 hex digits).
pub const BRIDGE_PREFIX: &str = "cflb";
/// The prefix of an instance's host-end veth name (then 11 hex digits).
pub const VETH_PREFIX: &str = "cflv";
/// The interface name of the instance end inside its network namespace.
pub const INSTANCE_IFNAME: &str = "eth0";
/// The prefix length of a scope's subnet.
pub const SUBNET_PREFIX_LEN: u8 = 24;

/// Whether this host lets the provider enforce an allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressSupport {
    /// The tools are present and a rule set checks: `allowlist` is
    /// offered, graded `enforced`.
    Enforced {
        /// The `ip` binary (iproute2).
        ip: PathBuf,
        /// The `nsenter` binary.
        nsenter: PathBuf,
        /// The `nft` binary.
        nft: PathBuf,
    },
    /// `allowlist` is not offered; the reason names what is missing.
    Unavailable(String),
}

/// Directories searched for the tools after `PATH`.
const SBIN_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    // A host tool in the host's PATH, never a workload tree.
    #[allow(clippy::disallowed_methods)]
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl EgressSupport {
    /// Probes this host once: finds `ip`, `nsenter` and `nft`, then has
    /// `nsenter` enter this process's own network namespace and `nft --check` the empty allowlist there (which needs
    /// `CAP_NET_ADMIN` and nf_tables with the `inet` family). Nothing is
    /// changed on the host.
    pub fn probe() -> EgressSupport {
        let mut tools = Vec::new();
        for name in ["ip", "nsenter", "nft"] {
            match find_tool(name) {
                Some(p) => tools.push(p),
                None => {
                    return EgressSupport::Unavailable(format!(
                        "{name} is not installed on the host"
                    ))
                }
            }
        }
        let (ip, nsenter, nft_bin) = (tools[0].clone(), tools[1].clone(), tools[2].clone());
        let script = nft::ruleset(&[]);
        let netns = format!("--net=/proc/{}/ns/net", std::process::id());
        match run(
            &nsenter,
            &[&netns, "--", path_str(&nft_bin), "--check", "-f", "-"],
            Some(script.as_bytes()),
        ) {
            Ok(_) => EgressSupport::Enforced {
                ip,
                nsenter,
                nft: nft_bin,
            },
            Err(e) => EgressSupport::Unavailable(format!(
                "checking an nftables rule set through nsenter: {e}"
            )),
        }
    }

    /// [`EgressSupport::probe`], run once per process (the host's tools and
    /// privilege do not change under a running provider).
    pub fn probe_cached() -> EgressSupport {
        static PROBED: std::sync::OnceLock<EgressSupport> = std::sync::OnceLock::new();
        PROBED.get_or_init(EgressSupport::probe).clone()
    }

    /// Whether `allowlist` is offered.
    pub fn is_enforced(&self) -> bool {
        matches!(self, EgressSupport::Enforced { .. })
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap_or("")
}

/// Runs `program args`, feeding `stdin`; its stdout, or a line naming the
/// command, its status and its stderr.
fn run(program: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<String, String> {
    let what = format!("{} {}", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)
            .map_err(|e| format!("{what}: writing stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{what}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn hex11(input: &str) -> String {
    let d = Sha256::digest(input.as_bytes());
    checkfu_sandbox_hostfs::rootfs::hex(&d)[..11].to_owned()
}

/// The bridge of `scope` (15 characters, the kernel's limit).
pub fn bridge_name(scope: &str) -> String {
    format!("{BRIDGE_PREFIX}{}", hex11(&format!("bridge/{scope}")))
}

/// The host end of `instance_id`'s veth pair (15 characters).
pub fn veth_name(scope: &str, instance_id: &str) -> String {
    format!(
        "{VETH_PREFIX}{}",
        hex11(&format!("veth/{scope}/{instance_id}"))
    )
}

/// The alias of `scope`'s bridge.
pub fn bridge_alias(scope: &str) -> String {
    format!("{LINK_ALIAS_PREFIX}{scope}")
}

/// The alias of `instance_id`'s host-end veth.
pub fn veth_alias(scope: &str, instance_id: &str) -> String {
    format!("{LINK_ALIAS_PREFIX}{scope}:{instance_id}")
}

/// The `n`th candidate `/24` of `scope` in `100.64.0.0/10` (its network
/// address).
fn candidate_subnet(scope: &str, n: u32) -> Ipv4Addr {
    let d = Sha256::digest(format!("subnet/{scope}/{n}").as_bytes());
    Ipv4Addr::new(100, 64 + (d[0] & 63), d[1], 0)
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

/// Whether the prefixes `a/alen` and `b/blen` share an address.
fn overlaps(a: Ipv4Addr, alen: u8, b: Ipv4Addr, blen: u8) -> bool {
    let m = mask(alen.min(blen));
    u32::from(a) & m == u32::from(b) & m
}

/// The provider-resolved allowlist of one activation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EgressPlan {
    /// Allowed TCP endpoints, sorted and deduplicated.
    pub endpoints: Vec<AllowedEndpoint>,
    /// `/etc/hosts` pins: (address, name), in destination order.
    pub hosts: Vec<(IpAddr, String)>,
}

/// Resolves `destinations`: IP literals (bracketed IPv6 too) as they are,
/// names through the host's resolver, once.
///
/// # Errors
/// A line naming the destination that does not resolve.
pub fn plan(destinations: &[NetworkDestination]) -> Result<EgressPlan, String> {
    let mut plan = EgressPlan::default();
    for d in destinations {
        let host = d.host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            plan.endpoints.push(AllowedEndpoint::new(ip, d.port));
            continue;
        }
        let addrs: Vec<IpAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, d.port))
            .map_err(|e| format!("resolving destination {}:{}: {e}", d.host, d.port))?
            .map(|sa| sa.ip().to_canonical())
            .collect();
        if addrs.is_empty() {
            return Err(format!(
                "destination {}:{} resolves to no address",
                d.host, d.port
            ));
        }
        for ip in addrs {
            plan.endpoints.push(AllowedEndpoint::new(ip, d.port));
            let pin = (ip, host.to_owned());
            if !plan.hosts.contains(&pin) {
                plan.hosts.push(pin);
            }
        }
    }
    plan.endpoints.sort();
    plan.endpoints.dedup();
    Ok(plan)
}

/// The `/etc/hosts` of an allowlist instance.
pub fn hosts_file(plan: &EgressPlan) -> String {
    let mut s = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost\n");
    for (ip, name) in &plan.hosts {
        s.push_str(&format!("{ip}\t{name}\n"));
    }
    s
}

/// Writes [`hosts_file`] as `etc/hosts` (root, 0644) beneath `layer`, the
/// instance's writable root layer, through `contained`.
///
/// # Errors
/// A line naming the step.
pub fn write_hosts(layer: &Path, plan: &EgressPlan) -> Result<(), String> {
    let root = contained::open_root(layer).map_err(|e| format!("opening the layer: {e}"))?;
    contained::create_dirs_beneath(root.as_fd(), Path::new("etc"), None)
        .map_err(|e| format!("creating /etc: {e}"))?;
    contained::replace_beneath_mode(
        root.as_fd(),
        Path::new("etc/hosts"),
        hosts_file(plan).as_bytes(),
        None,
        0o644,
    )
    .map_err(|e| format!("writing /etc/hosts: {e}"))
}

/// The host side of one scope's plumbing: tools, names and the state
/// directory's `net/` (lock and leases).
#[derive(Debug, Clone)]
pub struct Plumbing {
    ip: PathBuf,
    nsenter: PathBuf,
    nft: PathBuf,
    scope: String,
    net_dir: PathBuf,
    instances_dir: PathBuf,
}

/// An exclusive `flock` on `net/lock`, released on drop.
struct NetLock(#[allow(dead_code)] std::fs::File);

impl Plumbing {
    /// The plumbing of `scope` with its lock and leases under
    /// `state_dir/net`; `None` when `support` is not
    /// [`EgressSupport::Enforced`]. `instances_dir` holds one directory per
    /// live instance (a lease whose instance has none is stale).
    pub fn new(
        support: &EgressSupport,
        scope: &str,
        state_dir: &Path,
        instances_dir: &Path,
    ) -> Option<Plumbing> {
        match support {
            EgressSupport::Enforced { ip, nsenter, nft } => Some(Plumbing {
                ip: ip.clone(),
                nsenter: nsenter.clone(),
                nft: nft.clone(),
                scope: scope.to_owned(),
                net_dir: state_dir.join("net"),
                instances_dir: instances_dir.to_path_buf(),
            }),
            EgressSupport::Unavailable(_) => None,
        }
    }

    // The provider's own `net/` of the state directory, never bound into
    // an instance.
    #[allow(clippy::disallowed_methods)]
    fn lock(&self) -> Result<NetLock, String> {
        let leases = self.net_dir.join("leases");
        std::fs::create_dir_all(&leases).map_err(|e| format!("creating {leases:?}: {e}"))?;
        let path = self.net_dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("opening {path:?}: {e}"))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| format!("locking {path:?}: {e}"))?;
        Ok(NetLock(file))
    }

    fn ip(&self, args: &[&str]) -> Result<String, String> {
        run(&self.ip, args, None)
    }

    /// Deletes link `name`; one that is already gone (its namespace went
    /// with its peer) is not an error.
    fn del_link(&self, name: &str) -> Result<(), String> {
        match self.ip(&["link", "del", name]) {
            Ok(_) => Ok(()),
            Err(_) if !self.links()?.iter().any(|(n, _, _)| n == name) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every link on the host: (name, alias, master).
    fn links(&self) -> Result<Vec<(String, String, String)>, String> {
        let out = self.ip(&["-j", "link", "show"])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("parsing `ip -j link show`: {e}"))?;
        let field = |l: &serde_json::Value, k: &str| {
            l.get(k)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .map(|l| (field(l, "ifname"), field(l, "ifalias"), field(l, "master")))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every IPv4 address on the host with its prefix length and link.
    fn host_addrs(&self) -> Result<Vec<(Ipv4Addr, u8, String)>, String> {
        let out = self.ip(&["-4", "-o", "addr", "show"])?;
        let mut addrs = Vec::new();
        for line in out.lines() {
            let mut words = line.split_whitespace();
            let dev = words.nth(1).unwrap_or("").to_owned();
            let mut words = words.skip_while(|w| *w != "inet");
            if let Some(cidr) = words.nth(1) {
                if let Some((a, l)) = cidr.split_once('/') {
                    if let (Ok(a), Ok(l)) = (a.parse(), l.parse()) {
                        addrs.push((a, l, dev));
                    }
                }
            }
        }
        Ok(addrs)
    }

    /// The gateway address of the scope's bridge, if it exists.
    fn existing_gateway(&self) -> Result<Option<Ipv4Addr>, String> {
        let name = bridge_name(&self.scope);
        Ok(self
            .host_addrs()?
            .into_iter()
            .find(|(_, _, dev)| *dev == name)
            .map(|(a, _, _)| a))
    }

    /// Creates the scope's bridge unless it exists (under the lock);
    /// returns its gateway address.
    fn ensure_bridge_locked(&self) -> Result<Ipv4Addr, String> {
        let name = bridge_name(&self.scope);
        let links = self.links()?;
        if let Some((_, alias, _)) = links.iter().find(|(n, _, _)| *n == name) {
            if *alias != bridge_alias(&self.scope) {
                return Err(format!(
                    "link {name} exists without the alias {}: not the provider's",
                    bridge_alias(&self.scope)
                ));
            }
            if let Some(gw) = self.existing_gateway()? {
                return Ok(gw);
            }
            // A bridge left without its address (a crash between the
            // steps): start again.
            self.ip(&["link", "del", &name])?;
        }
        let taken = self.host_addrs()?;
        let subnet = (0..64)
            .map(|n| candidate_subnet(&self.scope, n))
            .find(|s| {
                !taken
                    .iter()
                    .any(|(a, l, _)| overlaps(*a, *l, *s, SUBNET_PREFIX_LEN))
            })
            .ok_or("no free /24 in 100.64.0.0/10 for the scope's bridge")?;
        let gw = Ipv4Addr::from(u32::from(subnet) | 1);
        let cidr = format!("{gw}/{SUBNET_PREFIX_LEN}");
        let made = self
            .ip(&["link", "add", &name, "type", "bridge"])
            .and_then(|_| {
                self.ip(&[
                    "link",
                    "set",
                    "dev",
                    &name,
                    "alias",
                    &bridge_alias(&self.scope),
                ])
            })
            .and_then(|_| self.ip(&["addr", "add", &cidr, "dev", &name]))
            .and_then(|_| self.ip(&["link", "set", "dev", &name, "up"]));
        if let Err(e) = made {
            let _ = self.ip(&["link", "del", &name]);
            return Err(format!("creating the bridge {name}: {e}"));
        }
        Ok(gw)
    }

    /// Creates the scope's bridge unless it exists and returns its gateway
    /// address: where listeners an allowlist instance may reach are bound.
    ///
    /// # Errors
    /// A line naming the failing step.
    pub fn ensure_bridge(&self) -> Result<Ipv4Addr, String> {
        let _lock = self.lock()?;
        self.ensure_bridge_locked()
    }

    fn lease_path(&self, host: u8) -> PathBuf {
        self.net_dir.join("leases").join(host.to_string())
    }

    /// Takes a free host octet (2..=254) for `instance_id`, reusing leases
    /// whose instance has no directory. Under the lock.
    // The provider's own `net/leases/`, never bound into an instance.
    #[allow(clippy::disallowed_methods)]
    fn take_lease(&self, instance_id: &str) -> Result<u8, String> {
        for host in 2..=254u8 {
            let path = self.lease_path(host);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(instance_id.as_bytes())
                        .map_err(|e| format!("writing the lease {path:?}: {e}"))?;
                    return Ok(host);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if self.lease_is_stale(&path) {
                        std::fs::write(&path, instance_id)
                            .map_err(|e| format!("writing the lease {path:?}: {e}"))?;
                        return Ok(host);
                    }
                }
                Err(e) => return Err(format!("creating the lease {path:?}: {e}")),
            }
        }
        Err("every address of the scope's subnet is leased (253 allowlist instances)".into())
    }

    /// Whether `id` is an instance id with a directory in the state
    /// directory.
    fn instance_exists(&self, id: &str) -> bool {
        // The provider's own `instances/`, never bound into an instance.
        #[allow(clippy::disallowed_methods)]
        let exists = self.instances_dir.join(id).is_dir();
        crate::store::is_id("i", id) && exists
    }

    fn lease_holder(path: &Path) -> Option<String> {
        // The provider's own state directory.
        #[allow(clippy::disallowed_methods)]
        std::fs::read_to_string(path).ok()
    }

    fn lease_is_stale(&self, path: &Path) -> bool {
        match Self::lease_holder(path) {
            Some(id) => !self.instance_exists(&id),
            None => true,
        }
    }

    /// Every lease file with its holder.
    fn leases(&self) -> Vec<(PathBuf, Option<String>)> {
        // The provider's own state directory.
        #[allow(clippy::disallowed_methods)]
        let listed = std::fs::read_dir(self.net_dir.join("leases"));
        listed
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| (e.path(), Self::lease_holder(&e.path())))
            .collect()
    }

    /// Connects the network namespace of `pid` (the init of
    /// `instance_id`) to the scope's bridge and loads and reads back the
    /// rule set of `plan` there. On failure the host end and the lease
    /// are removed again (the caller kills the init).
    ///
    /// # Errors
    /// A line naming the failing step.
    pub fn attach(&self, instance_id: &str, pid: i32, plan: &EgressPlan) -> Result<(), String> {
        let res = self.attach_inner(instance_id, pid, plan);
        if res.is_err() {
            let _ = self.detach(instance_id);
        }
        res
    }

    fn attach_inner(&self, instance_id: &str, pid: i32, plan: &EgressPlan) -> Result<(), String> {
        let veth = veth_name(&self.scope, instance_id);
        let bridge = bridge_name(&self.scope);
        let pid_s = pid.to_string();
        let addr = {
            let _lock = self.lock()?;
            let gw = self.ensure_bridge_locked()?;
            let host = self.take_lease(instance_id)?;
            self.ip(&[
                "link",
                "add",
                &veth,
                "type",
                "veth",
                "peer",
                "name",
                INSTANCE_IFNAME,
                "netns",
                &pid_s,
            ])?;
            self.ip(&[
                "link",
                "set",
                "dev",
                &veth,
                "alias",
                &veth_alias(&self.scope, instance_id),
                "master",
                &bridge,
                "up",
            ])?;
            (
                Ipv4Addr::from((u32::from(gw) & !0xff) | u32::from(host)),
                gw,
            )
        };
        let (addr, gw) = addr;
        let target = format!("--target={pid}");
        let inside = format!(
            "addr add {addr}/{SUBNET_PREFIX_LEN} dev {INSTANCE_IFNAME}\n\
             link set dev {INSTANCE_IFNAME} up\n\
             route add default via {gw}\n"
        );
        run(
            &self.nsenter,
            &[&target, "--net", "--", path_str(&self.ip), "-batch", "-"],
            Some(inside.as_bytes()),
        )?;
        let script = nft::ruleset(&plan.endpoints);
        run(
            &self.nsenter,
            &[&target, "--net", "--", path_str(&self.nft), "-f", "-"],
            Some(script.as_bytes()),
        )?;
        let listing = self.list_rules(pid)?;
        if nft::listing_matches(&listing, &plan.endpoints) {
            Ok(())
        } else {
            Err(format!(
                "the rule set read back from the namespace of pid {pid} differs from the one loaded: {listing}"
            ))
        }
    }

    /// The allowlist table in the network namespace of `pid`, as `nft list
    /// table` prints it.
    ///
    /// # Errors
    /// A line naming the failing step.
    pub fn list_rules(&self, pid: i32) -> Result<String, String> {
        run(
            &self.nsenter,
            &[
                &format!("--target={pid}"),
                "--net",
                "--",
                path_str(&self.nft),
                "list",
                "table",
                nft::TABLE_FAMILY,
                nft::TABLE_NAME,
            ],
            None,
        )
    }

    /// Removes `instance_id`'s host end (when its namespace still holds
    /// it) and lease, and the bridge when no lease is left. Idempotent.
    ///
    /// # Errors
    /// A line naming what could not be removed.
    pub fn detach(&self, instance_id: &str) -> Result<(), String> {
        let _lock = self.lock()?;
        let veth = veth_name(&self.scope, instance_id);
        let links = self.links()?;
        if links
            .iter()
            .any(|(n, a, _)| *n == veth && *a == veth_alias(&self.scope, instance_id))
        {
            self.del_link(&veth)?;
        }
        for (path, holder) in self.leases() {
            if holder.as_deref() == Some(instance_id) {
                std::fs::remove_file(&path).map_err(|e| format!("removing {path:?}: {e}"))?;
            }
        }
        self.remove_bridge_if_unused_locked()
    }

    fn remove_bridge_if_unused_locked(&self) -> Result<(), String> {
        let in_use = self
            .leases()
            .iter()
            .any(|(path, _)| !self.lease_is_stale(path));
        if in_use {
            return Ok(());
        }
        let bridge = bridge_name(&self.scope);
        let links = self.links()?;
        let ours = links
            .iter()
            .any(|(n, a, _)| *n == bridge && *a == bridge_alias(&self.scope));
        if ours {
            self.del_link(&bridge)?;
        }
        Ok(())
    }

    /// Cleanup: removes every host-end veth of the scope whose instance
    /// has no directory, every stale lease, and the bridge when nothing
    /// uses it. Returns one line per object that could not be removed.
    pub fn sweep(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let _lock = match self.lock() {
            Ok(l) => l,
            Err(e) => return vec![e],
        };
        let prefix = format!("{LINK_ALIAS_PREFIX}{}:", self.scope);
        match self.links() {
            Ok(links) => {
                for (name, alias, _) in links {
                    let Some(id) = alias.strip_prefix(&prefix) else {
                        continue;
                    };
                    let live = self.instance_exists(id);
                    if !live {
                        if let Err(e) = self.del_link(&name) {
                            problems.push(format!("link {name}: {e}"));
                        }
                    }
                }
            }
            Err(e) => problems.push(e),
        }
        for (path, _) in self.leases() {
            if self.lease_is_stale(&path) {
                if let Err(e) = std::fs::remove_file(&path) {
                    problems.push(format!("lease {path:?}: {e}"));
                }
            }
        }
        if let Err(e) = self.remove_bridge_if_unused_locked() {
            problems.push(e);
        }
        problems
    }

    /// The links of this scope left on the host (bridge and host ends),
    /// by name: for leak checks.
    ///
    /// # Errors
    /// A line when the links cannot be listed.
    pub fn scope_links(&self) -> Result<Vec<String>, String> {
        let own = bridge_alias(&self.scope);
        let prefix = format!("{own}:");
        Ok(self
            .links()?
            .into_iter()
            .filter(|(_, a, _)| *a == own || a.starts_with(&prefix))
            .map(|(n, _, _)| n)
            .collect())
    }
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
    fn names_fit_the_kernel_limit_and_differ_by_scope_and_instance() {
        let b = bridge_name("conf-1-0");
        assert_eq!(b.len(), 15);
        assert!(b.starts_with(BRIDGE_PREFIX));
        assert_ne!(b, bridge_name("conf-1-1"));
        let v = veth_name("conf-1-0", "i-abc");
        assert_eq!(v.len(), 15);
        assert_ne!(v, veth_name("conf-1-0", "i-abd"));
        assert_ne!(v, veth_name("conf-1-1", "i-abc"));
        assert_eq!(veth_alias("s", "i-1"), "checkfu-linux:s:i-1");
    }

    #[test]
    fn candidate_subnets_are_in_the_shared_space() {
        for n in 0..64 {
            let s = candidate_subnet("scope", n);
            assert!(overlaps(s, 24, Ipv4Addr::new(100, 64, 0, 0), 10), "{s}");
            assert_eq!(s.octets()[3], 0);
        }
    }

    #[test]
    fn overlap_is_prefix_containment() {
        let a = Ipv4Addr::new(100, 70, 3, 0);
        assert!(overlaps(a, 24, Ipv4Addr::new(100, 70, 3, 9), 32));
        assert!(overlaps(a, 24, Ipv4Addr::new(100, 64, 0, 1), 10));
        assert!(!overlaps(a, 24, Ipv4Addr::new(100, 70, 4, 1), 24));
        assert!(!overlaps(a, 24, Ipv4Addr::new(172, 17, 0, 1), 16));
    }

    #[test]
    fn literals_become_endpoints_and_pin_nothing() {
        let p = plan(&[
            dest("10.0.0.9", 80),
            dest("[fd00::9]", 81),
            dest("10.0.0.9", 80),
        ])
        .unwrap();
        let eps: Vec<String> = p
            .endpoints
            .iter()
            .map(|e| format!("{} {}", e.addr, e.port))
            .collect();
        assert_eq!(eps, ["10.0.0.9 80", "fd00::9 81"]);
        assert!(p.hosts.is_empty());
        assert_eq!(hosts_file(&p), "127.0.0.1\tlocalhost\n::1\tlocalhost\n");
    }

    #[test]
    fn names_are_resolved_once_and_pinned() {
        // `localhost` resolves through the host's own files, no query leaves.
        let p = plan(&[dest("localhost", 7000)]).unwrap();
        assert!(!p.endpoints.is_empty());
        assert!(p.endpoints.iter().all(|e| e.port == 7000));
        for (ip, name) in &p.hosts {
            assert_eq!(name, "localhost");
            assert!(hosts_file(&p).contains(&format!("{ip}\tlocalhost\n")));
            assert!(p.endpoints.iter().any(|e| e.addr == *ip));
        }
    }

    #[test]
    fn a_missing_tool_is_not_found() {
        assert!(find_tool("checkfu-no-such-tool").is_none());
    }
}
