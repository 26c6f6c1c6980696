//! The host side of one scope's allowlist plumbing: the bridge, veth
//! pairs, address leases under an exclusive lock, the nftables table
//! loaded into an instance namespace and read back, and their removal.

use super::*;

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
