//! The suite's tables: counts per class, per family and per file, and the acceptance rate.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::REQUIRED_FAMILIES;
use super::outcome::{Class, Outcome, Side};
use super::units::Unit;

/// Units per class for one row (a family, a file, or a total).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Units per class.
    pub by_class: BTreeMap<Class, usize>,
}

impl Counts {
    fn add(&mut self, c: Class) {
        *self.by_class.entry(c).or_default() += 1;
    }

    /// Units of class `c`.
    pub fn get(&self, c: Class) -> usize {
        self.by_class.get(&c).copied().unwrap_or(0)
    }

    /// All units of the row.
    pub fn total(&self) -> usize {
        self.by_class.values().sum()
    }

    /// Units the kernel loads (in scope): both-accept, listing-differs, wasp-refuses and
    /// refusals by design.
    pub fn kernel_accepts(&self) -> usize {
        self.get(Class::BothAccept)
            + self.get(Class::ListingDiffers)
            + self.get(Class::WaspRefuses)
            + self.get(Class::WaspRefusesByDesign)
    }

    /// Units the kernel loads that wasp loads too.
    pub fn wasp_accepts_of_kernel(&self) -> usize {
        self.get(Class::BothAccept) + self.get(Class::ListingDiffers)
    }

    /// Percentage of the units the kernel loads that wasp loads (100 when there are none).
    pub fn acceptance_percent(&self) -> f64 {
        match self.kernel_accepts() {
            0 => 100.0,
            n => 100.0 * self.wasp_accepts_of_kernel() as f64 / n as f64,
        }
    }

    /// Percentage of the units both load whose listings are the same (100 when none).
    pub fn listing_percent(&self) -> f64 {
        match self.wasp_accepts_of_kernel() {
            0 => 100.0,
            n => 100.0 * self.get(Class::BothAccept) as f64 / n as f64,
        }
    }
}

/// The counts of one run, by family, by file and in total.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Per family (`ip`, `netdev`, ...).
    pub families: BTreeMap<String, Counts>,
    /// Per test file (`ip/ip.t`), required families only.
    pub files: BTreeMap<String, Counts>,
    /// The required families together.
    pub required: Counts,
    /// bridge and arp together.
    pub others: Counts,
}

impl Report {
    /// Counts `outcomes` (one per unit, in the same order).
    pub fn new(units: &[Unit], outcomes: &[Outcome]) -> Report {
        let mut r = Report::default();
        for (u, o) in units.iter().zip(outcomes) {
            r.families.entry(u.family.clone()).or_default().add(o.class);
            if REQUIRED_FAMILIES.contains(&u.family.as_str()) {
                r.files.entry(u.file.clone()).or_default().add(o.class);
                r.required.add(o.class);
            } else {
                r.others.add(o.class);
            }
        }
        r
    }

    /// The tables as Markdown: per family, then per file (required families), then totals.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let header = |s: &mut String, first: &str| {
            let _ = write!(s, "| {first} | units |");
            for c in Class::ALL {
                let _ = write!(s, " {} |", c.label());
            }
            s.push_str(" accepted | same listing |\n|---|---:|");
            for _ in Class::ALL {
                s.push_str("---:|");
            }
            s.push_str("---:|---:|\n");
        };
        let row = |s: &mut String, name: &str, c: &Counts| {
            let _ = write!(s, "| {name} | {} |", c.total());
            for k in Class::ALL {
                let _ = write!(s, " {} |", c.get(k));
            }
            let _ = writeln!(
                s,
                " {:.1} % | {:.1} % |",
                c.acceptance_percent(),
                c.listing_percent()
            );
        };
        header(&mut s, "family");
        for (f, c) in &self.families {
            row(&mut s, f, c);
        }
        row(&mut s, "**netdev, ip, ip6, inet**", &self.required);
        row(&mut s, "bridge, arp", &self.others);
        s.push('\n');
        header(&mut s, "file (netdev, ip, ip6, inet)");
        for (f, c) in &self.files {
            row(&mut s, f, c);
        }
        s
    }

    /// One paragraph: the required families' totals.
    pub fn summary(&self) -> String {
        let r = &self.required;
        format!(
            "netdev/ip/ip6/inet: {} units; kernel loads {}, wasp loads {:.1} % of them ({}); \
             same listing on {:.1} % of both-loaded; kernel refuses {} (wasp refuses {}); \
             newer syntax {}; no meaning in wasp {}; crashes {}. bridge/arp: {} units, \
             {:.1} % accepted.",
            r.total(),
            r.kernel_accepts(),
            r.acceptance_percent(),
            r.wasp_accepts_of_kernel(),
            r.listing_percent(),
            r.get(Class::BothRefuse) + r.get(Class::WaspAccepts),
            r.get(Class::BothRefuse),
            r.get(Class::OutOfScope),
            r.get(Class::WaspRefusesByDesign),
            r.get(Class::Crash),
            self.others.total(),
            self.others.acceptance_percent(),
        )
    }
}

/// A line per unit of the given classes: its id, class, and what each side said (the first
/// differing listing line for a listing difference).
pub fn details(units: &[Unit], outcomes: &[Outcome], classes: &[Class]) -> String {
    let mut s = String::new();
    for (u, o) in units.iter().zip(outcomes) {
        if !classes.contains(&o.class) {
            continue;
        }
        let _ = write!(s, "{} {}: {}", o.class.label(), u.id(), u.rule);
        match (&o.kernel, &o.wasp) {
            (Side::Accepted(k), Side::Accepted(w)) => {
                let diff = k
                    .lines()
                    .zip(w.lines())
                    .find(|(a, b)| a.trim_end() != b.trim_end());
                match diff {
                    Some((a, b)) => {
                        let _ = write!(s, "\n    kernel: {}\n    wasp:   {}", a.trim(), b.trim());
                    }
                    None => {
                        let _ = write!(
                            s,
                            "\n    kernel: {} lines, wasp: {} lines",
                            k.lines().count(),
                            w.lines().count()
                        );
                    }
                }
            }
            (_, Side::Refused(m)) | (_, Side::Crashed(m)) => {
                let _ = write!(s, "\n    wasp: {m}");
            }
            (Side::Refused(m), _) => {
                let _ = write!(s, "\n    kernel: {m}");
            }
            _ => {}
        }
        s.push('\n');
    }
    s
}
