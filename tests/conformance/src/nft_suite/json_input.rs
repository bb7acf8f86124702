//! nftables' own rules in libnftables' JSON (`tests/py/*/*.t.json`) through wasp's JSON
//! input (`wasp_ruleset::json_in`), compared with the same rules in text.
//!
//! For every unit (a rule line in one table and chain, [`super::units`]) whose command file
//! wasp accepts in text, and whose rule the file's `.t.json` writes in JSON (a `# RULE`
//! line, then the rule's statements as a JSON array): the declarations before the rule
//! (table, chain, sets, elements, objects) are the text model as `nft -j list ruleset`
//! prints it (`wasp_ctl::listing`), the rule is `{"add": {"rule": {..., "expr": ARRAY}}}`;
//! the document is loaded through the JSON path and its listing must equal the text's
//! (`print_ruleset`). A second figure reads the whole text ruleset back from its own JSON
//! listing (the rule too, as wasp lists it).
//!
//! In process, without root or the kernel: this measures the translation only (the kernel's
//! verdict on the rules is `nft_suite`'s).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value as Json, json};
use wasp_ctl::proto::{ListFlags, ListRequest, ListWhat};

use super::units::Unit;

/// The folders of the suite whose JSON this measures (`bridge` and `arp` have their own
/// schema gaps and are not wasp's families).
pub const FOLDERS: [&str; 5] = ["ip", "ip6", "inet", "netdev", "any"];

/// How one unit came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonOutcome {
    /// wasp refuses the text form: not measured.
    TextRefused,
    /// The `.t.json` file has no JSON for this rule: not measured.
    NoJson,
    /// The JSON loads and lists as the text does.
    Equal,
    /// The JSON loads and lists otherwise: (text's rule line, JSON's rule line).
    Differs(String, String),
    /// The JSON is refused: the error's first line.
    Refused(String),
}

/// One measured unit: the outcome of the suite's JSON and of wasp's own listing read back.
#[derive(Debug, Clone)]
pub struct JsonResult {
    /// The suite's JSON rule.
    pub suite: JsonOutcome,
    /// The text model's `-j` listing read back (`None` when the text is refused).
    pub round_trip: Option<JsonOutcome>,
}

/// The rules of one `.t.json` file: rule text to its JSON array.
///
/// # Errors
/// When a rule's JSON does not parse (the suite's files all do).
pub fn rules_of(text: &str) -> Result<HashMap<String, Json>, String> {
    let mut out = HashMap::new();
    let mut rule: Option<String> = None;
    let mut body = String::new();
    let mut flush = |rule: &Option<String>, body: &str| -> Result<(), String> {
        if let Some(r) = rule
            && !body.trim().is_empty()
        {
            let v: Json = serde_json::from_str(body).map_err(|e| format!("{r}: {e}"))?;
            out.insert(r.clone(), v);
        }
        Ok(())
    };
    for line in text.lines() {
        if let Some(r) = line.strip_prefix("# ") {
            flush(&rule, &body)?;
            rule = Some(r.trim().to_string());
            body.clear();
        } else {
            body.push_str(line);
            body.push('\n');
        }
    }
    flush(&rule, &body)?;
    Ok(out)
}

/// The text model's JSON listing (`nft -j list ruleset`), as the commands of a document:
/// the `metainfo` and the rules' handles left out, everything else as listed.
fn listing_json(rs: &wasp_ruleset::Ruleset, rules: bool) -> Vec<Json> {
    let req = ListRequest {
        what: ListWhat::Ruleset,
        family: None,
        table: None,
        name: None,
        flags: ListFlags {
            json: true,
            ..ListFlags::default()
        },
    };
    let pieces = wasp_ctl::listing::render(rs, &req).unwrap_or_default();
    let doc: Json = serde_json::from_str(&pieces.concat()).unwrap_or(Json::Null);
    let mut out = Vec::new();
    for mut item in doc["nftables"].as_array().cloned().unwrap_or_default() {
        if item.get("metainfo").is_some() || (!rules && item.get("rule").is_some()) {
            continue;
        }
        if let Some(r) = item.get_mut("rule").and_then(Json::as_object_mut) {
            r.remove("handle");
        }
        out.push(item);
    }
    out
}

/// The unit's declarations (its command file without the final `add rule` line) as JSON
/// commands, or `None` when they do not parse alone.
fn declarations(unit: &Unit) -> Option<Vec<Json>> {
    let lines: Vec<&str> = unit.commands.lines().collect();
    let (_, decls) = lines.split_last()?;
    let rs = wasp_ruleset::parse_str(&decls.join("\n"), "decl.nft").ok()?;
    Some(listing_json(&rs, false))
}

/// The rule lines of a listing (`\t\t` indented lines of chains), for reports.
fn rule_lines(listing: &str) -> String {
    listing
        .lines()
        .filter(|l| l.starts_with("\t\t") && !l.contains("type ") && !l.contains("elements"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" / ")
}

fn compare(text_listing: &str, doc: &Json) -> JsonOutcome {
    match wasp_ruleset::json_in::parse_str(&doc.to_string(), "unit.json") {
        Ok(rs) => {
            let listing = wasp_ruleset::print_ruleset(&rs, false);
            if listing == text_listing {
                JsonOutcome::Equal
            } else {
                JsonOutcome::Differs(rule_lines(text_listing), rule_lines(&listing))
            }
        }
        Err(e) => JsonOutcome::Refused(e.to_string().lines().next().unwrap_or("").to_string()),
    }
}

/// One unit: its text through `parse_str`, its suite JSON (`rule_json`, the `.t.json`
/// array, if the file has one) and its own JSON listing through `json_in::parse_str`.
pub fn run_unit(unit: &Unit, rule_json: Option<&Json>) -> JsonResult {
    let Ok(text_rs) = wasp_ruleset::parse_str(&unit.commands, "unit.nft") else {
        return JsonResult {
            suite: JsonOutcome::TextRefused,
            round_trip: None,
        };
    };
    let text_listing = wasp_ruleset::print_ruleset(&text_rs, false);
    let round_trip = compare(
        &text_listing,
        &json!({ "nftables": listing_json(&text_rs, true) }),
    );
    let suite = match (rule_json, declarations(unit)) {
        (None, _) => JsonOutcome::NoJson,
        (Some(_), None) => JsonOutcome::Refused("the declarations alone do not parse".into()),
        (Some(expr), Some(mut cmds)) => {
            cmds.push(json!({"add": {"rule": {
                "family": unit.family, "table": unit.table, "chain": unit.chain, "expr": expr
            }}}));
            compare(&text_listing, &json!({ "nftables": cmds }))
        }
    };
    JsonResult {
        suite,
        round_trip: Some(round_trip),
    }
}

/// Every unit of the suite's folders [`FOLDERS`] in wasp's families, with its result.
///
/// # Errors
/// When the suite's files cannot be read or a `.t.json` file does not parse.
pub fn run(py_dir: &Path) -> Result<Vec<(Unit, JsonResult)>, String> {
    let units = super::units::load(py_dir).map_err(|e| format!("{}: {e}", py_dir.display()))?;
    let mut json_files: HashMap<String, HashMap<String, Json>> = HashMap::new();
    let mut out = Vec::new();
    for u in units {
        let folder = u.file.split('/').next().unwrap_or("");
        if !FOLDERS.contains(&folder) || !super::REQUIRED_FAMILIES.contains(&u.family.as_str()) {
            continue;
        }
        if !json_files.contains_key(&u.file) {
            let path = py_dir.join(format!("{}.json", u.file));
            let rules = match std::fs::read_to_string(&path) {
                Ok(t) => rules_of(&t).map_err(|e| format!("{}: {e}", path.display()))?,
                Err(_) => HashMap::new(),
            };
            json_files.insert(u.file.clone(), rules);
        }
        let rule_json = json_files.get(&u.file).and_then(|m| m.get(&u.rule));
        let r = run_unit(&u, rule_json);
        out.push((u, r));
    }
    Ok(out)
}

/// Counts of one file or of all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Units whose text wasp accepts and whose rule has JSON: measured.
    pub tried: usize,
    /// Of those, loaded from JSON.
    pub loaded: usize,
    /// Of those, listed as the text.
    pub equal: usize,
    /// Refused from JSON.
    pub refused: usize,
    /// Units whose text wasp accepts, with no JSON for the rule.
    pub no_json: usize,
    /// wasp's own JSON listing read back: listed as the text.
    pub round_trip_equal: usize,
    /// wasp's own JSON listing read back: tried (units whose text wasp accepts).
    pub round_trip_tried: usize,
}

impl Counts {
    fn add(&mut self, r: &JsonResult) {
        match &r.suite {
            JsonOutcome::TextRefused => return,
            JsonOutcome::NoJson => self.no_json += 1,
            JsonOutcome::Equal => {
                self.tried += 1;
                self.loaded += 1;
                self.equal += 1;
            }
            JsonOutcome::Differs(..) => {
                self.tried += 1;
                self.loaded += 1;
            }
            JsonOutcome::Refused(_) => {
                self.tried += 1;
                self.refused += 1;
            }
        }
        if let Some(rt) = &r.round_trip {
            self.round_trip_tried += 1;
            if *rt == JsonOutcome::Equal {
                self.round_trip_equal += 1;
            }
        }
    }

    /// Percentage of the measured units whose JSON lists as their text.
    pub fn equal_pct(&self) -> f64 {
        pct(self.equal, self.tried)
    }

    /// Percentage of wasp's own listings read back the same.
    pub fn round_trip_pct(&self) -> f64 {
        pct(self.round_trip_equal, self.round_trip_tried)
    }
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        100.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

/// The counts per file, in file order, and over all.
pub fn counts(results: &[(Unit, JsonResult)]) -> (Vec<(String, Counts)>, Counts) {
    let mut files: Vec<(String, Counts)> = Vec::new();
    let mut all = Counts::default();
    for (u, r) in results {
        if files.last().is_none_or(|(f, _)| *f != u.file) {
            files.push((u.file.clone(), Counts::default()));
        }
        if let Some((_, c)) = files.last_mut() {
            c.add(r);
        }
        all.add(r);
    }
    (files, all)
}

/// The table per file (markdown) and the summary line.
pub fn report(results: &[(Unit, JsonResult)]) -> String {
    let (files, all) = counts(results);
    let mut s = String::from(
        "| file | tried | loaded | equal | refused | no JSON | equal % | own listing read back |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (f, c) in files
        .iter()
        .chain(std::iter::once(&("all".to_string(), all)))
    {
        let _ = writeln!(
            s,
            "| {f} | {} | {} | {} | {} | {} | {:.1} % | {}/{} |",
            c.tried,
            c.loaded,
            c.equal,
            c.refused,
            c.no_json,
            c.equal_pct(),
            c.round_trip_equal,
            c.round_trip_tried
        );
    }
    let _ = writeln!(
        s,
        "\nJSON input: {} units measured, {} loaded, {} list as their text ({:.1} %), {} refused; {} without JSON; wasp's own JSON listing read back the same for {} of {} ({:.1} %).",
        all.tried,
        all.loaded,
        all.equal,
        all.equal_pct(),
        all.refused,
        all.no_json,
        all.round_trip_equal,
        all.round_trip_tried,
        all.round_trip_pct()
    );
    s
}

/// One line per unit that is not equal (suite JSON, then own listing read back).
pub fn failures(results: &[(Unit, JsonResult)]) -> Vec<String> {
    let mut out = Vec::new();
    for (u, r) in results {
        let line = |what: &str, o: &JsonOutcome| match o {
            JsonOutcome::Differs(t, j) => Some(format!(
                "{} [{what}] differs: `{}`: text lists `{t}`, JSON lists `{j}`",
                u.id(),
                u.rule
            )),
            JsonOutcome::Refused(m) => {
                Some(format!("{} [{what}] refused: `{}`: {m}", u.id(), u.rule))
            }
            _ => None,
        };
        out.extend(line("suite", &r.suite));
        if let Some(rt) = &r.round_trip {
            out.extend(line("own listing", rt));
        }
    }
    out
}

/// The floor kept in `nft-suite-json-floor.txt` (first number of the file: the percentage
/// of measured units whose JSON must list as their text).
pub fn floor_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("nft-suite-json-floor.txt")
}
