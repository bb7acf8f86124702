//! Names nft reads from the system's files and lists back: users (`/etc/passwd`), groups
//! (`/etc/group`), device groups (`/etc/iproute2/group`) and route realms
//! (`/etc/iproute2/rt_realms`), as nft resolves `meta skuid "root"`, `iifgroup "default"` and
//! `meta rtclassid "cosmos"`, and conntrack labels (`/etc/connlabel.conf`, `ct label "name"`).
//! Each file is read once; a file that is missing gives the entries every Debian system has
//! (`root` 0, `default` 0, `cosmos` 0; no labels).

use std::sync::OnceLock;

/// Which table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// Users: `/etc/passwd` (name, uid).
    Users,
    /// Groups: `/etc/group` (name, gid).
    Groups,
    /// Device groups: `/etc/iproute2/group` (number, name).
    Devgroups,
    /// Route realms: `/etc/iproute2/rt_realms` (number, name).
    Realms,
    /// Conntrack labels: `/etc/connlabel.conf` (bit number, name), as nft's
    /// `ct_label_table_init` reads it.
    Connlabels,
}

fn table(which: Names) -> &'static [(String, u32)] {
    static USERS: OnceLock<Vec<(String, u32)>> = OnceLock::new();
    static GROUPS: OnceLock<Vec<(String, u32)>> = OnceLock::new();
    static DEVGROUPS: OnceLock<Vec<(String, u32)>> = OnceLock::new();
    static REALMS: OnceLock<Vec<(String, u32)>> = OnceLock::new();
    static LABELS: OnceLock<Vec<(String, u32)>> = OnceLock::new();
    let (cell, path, fallback) = match which {
        Names::Connlabels => (&LABELS, "/etc/connlabel.conf", ""),
        Names::Users => (&USERS, "/etc/passwd", "root"),
        Names::Groups => (&GROUPS, "/etc/group", "root"),
        Names::Devgroups => (&DEVGROUPS, "/etc/iproute2/group", "default"),
        Names::Realms => (&REALMS, "/etc/iproute2/rt_realms", "cosmos"),
    };
    cell.get_or_init(|| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut v = match which {
            Names::Users | Names::Groups => parse_colon(&text),
            Names::Devgroups | Names::Realms | Names::Connlabels => parse_iproute2(&text),
        };
        if v.is_empty() && !fallback.is_empty() {
            v.push((fallback.to_string(), 0));
        }
        v
    })
}

/// `name:x:id:...` lines.
fn parse_colon(text: &str) -> Vec<(String, u32)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id = f.nth(1)?.parse().ok()?;
            (!name.is_empty()).then(|| (name.to_string(), id))
        })
        .collect()
}

/// `number name` lines, `#` comments (iproute2's tables).
fn parse_iproute2(text: &str) -> Vec<(String, u32)> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let n = f.next()?;
            let name = f.next()?;
            let n = match n.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).ok()?,
                None => n.parse().ok()?,
            };
            Some((name.to_string(), n))
        })
        .collect()
}

/// The number `name` stands for in `which`.
pub fn lookup(which: Names, name: &str) -> Option<u32> {
    table(which)
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
}

/// The first name of number `n` in `which`.
pub fn name_of(which: Names, n: u32) -> Option<&'static str> {
    table(which)
        .iter()
        .find(|(_, v)| *v == n)
        .map(|(name, _)| name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_parse_as_nft_reads_them() {
        assert_eq!(
            parse_colon("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/bin/false\n"),
            vec![("root".to_string(), 0), ("daemon".to_string(), 1)]
        );
        assert_eq!(
            parse_iproute2("# realms\n0\tcosmos\n#1 inr.ac\n0x10 ten # comment\n"),
            vec![("cosmos".to_string(), 0), ("ten".to_string(), 16)]
        );
        assert_eq!(lookup(Names::Devgroups, "default"), Some(0));
    }
}
