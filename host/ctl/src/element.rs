//! `get element` (and the listing of `reset element`) from the ruleset model, as nft 1.0.6
//! answers it: the set's header and the elements that hold the asked keys (an interval or
//! prefix that contains a value answers for it), without counters; a key no element holds is
//! "Error: Could not process rule: No such file or directory" with the command underlined.

use wasp_ruleset::model::{KeyPart, Ruleset, SetElem};
use wasp_ruleset::{PrintOptions, print_set};

use crate::proto::{ElementOp, ElementRequest, parse_family};

/// The lowest and highest value of a key part, big-endian bytes.
fn bounds(p: &KeyPart) -> (Vec<u8>, Vec<u8>) {
    match p {
        KeyPart::Value(v) => (v.bytes.to_vec(), v.bytes.to_vec()),
        KeyPart::Range(a, b) => (a.bytes.to_vec(), b.bytes.to_vec()),
        KeyPart::Prefix(v, len) => {
            let width = u32::from(v.dtype.width_bits());
            let pad = (v.bytes.len() as u32) * 8 - width;
            let mut hi = v.bytes.clone();
            for bit in (pad + u32::from(*len))..(pad + width) {
                hi[(bit / 8) as usize] |= 0x80 >> (bit % 8);
            }
            (v.bytes.to_vec(), hi.to_vec())
        }
    }
}

/// `true` when every field of `q` lies within the same field of `e`.
fn holds(e: &SetElem, q: &SetElem) -> bool {
    e.key.len() == q.key.len()
        && e.key.iter().zip(&q.key).all(|(a, b)| {
            let (alo, ahi) = bounds(a);
            let (blo, bhi) = bounds(b);
            alo <= blo && bhi <= ahi
        })
}

/// The elements of the set `req` names that hold the keys of `req.elements`, in the set's
/// order, each once.
///
/// # Errors
/// nft's messages: an unknown family, table or set, elements that do not parse for the
/// set's type (file:line:col in the command), a key no element holds.
pub fn find_elements(rs: &Ruleset, req: &ElementRequest) -> Result<Vec<SetElem>, String> {
    let fam_name = req.family.as_deref().unwrap_or("ip");
    let family =
        parse_family(fam_name).ok_or_else(|| format!("Error: unknown family `{fam_name}`"))?;
    let command = ElementRequest {
        op: ElementOp::Get,
        ..req.clone()
    }
    .command_text();
    let command = command.trim_end();
    let not_found = || {
        format!(
            "Error: Could not process rule: No such file or directory\n{command}\n{}",
            // nft marks the whole command and one more column (its end).
            "^".repeat(command.chars().count() + 1)
        )
    };
    let (ti, si) = rs
        .tables
        .iter()
        .enumerate()
        .find(|(_, t)| t.family == family && t.name == req.table)
        .and_then(|(ti, t)| {
            t.sets
                .iter()
                .position(|s| s.name == req.set)
                .map(|si| (ti, si))
        })
        .ok_or_else(not_found)?;
    // Parse the keys as the set's type wants them: add them to an emptied copy of the set
    // (a map's copy made a set, as `get` names keys only).
    let t = &rs.tables[ti];
    let mut set = t.sets[si].clone();
    set.elements = Default::default();
    set.is_map = false;
    set.data = None;
    set.data_typeof = None;
    let mut table = t.header();
    table.sets.push(set);
    let scratch = Ruleset {
        table_handle: 0,
        tables: vec![table],
        sources: Vec::new(),
    };
    // The same command with `add` (as long as `get`): an error quotes the user's command.
    let add = format!("add{}", &command["get".len()..]);
    let parsed = wasp_ruleset::apply_batch(&scratch, &format!("{add}\n"), "<command>")
        .map_err(|e| e.to_string().replacen(&add, command, 1))?;
    let queries = &parsed.tables[0].sets[0].elements;
    let set = &rs.tables[ti].sets[si];
    let mut found = vec![false; set.elements.len()];
    for q in queries {
        let mut any = false;
        for (i, e) in set.elements.iter().enumerate() {
            if holds(&e, &q) {
                found[i] = true;
                any = true;
            }
        }
        if !any {
            return Err(not_found());
        }
    }
    Ok(set
        .elements
        .iter()
        .zip(found)
        .filter(|(_, f)| *f)
        .map(|(e, _)| e.into_owned())
        .collect())
}

/// `get element ...` as nft prints it: the table, the set's header without its `counter`
/// line, and the found elements without their counters.
///
/// # Errors
/// As [`find_elements`].
pub fn get_text(rs: &Ruleset, req: &ElementRequest) -> Result<String, String> {
    elements_text(rs, req, false)
}

/// The found elements as [`get_text`] prints them, with their counters when `counters` (as
/// `nft reset element` lists them: the values in `rs`).
///
/// # Errors
/// As [`find_elements`].
pub fn elements_text(rs: &Ruleset, req: &ElementRequest, counters: bool) -> Result<String, String> {
    let elems = find_elements(rs, req)?;
    let family = parse_family(req.family.as_deref().unwrap_or("ip"))
        .unwrap_or(wasp_ruleset::model::Family::Ip);
    let t = rs
        .tables
        .iter()
        .find(|t| t.family == family && t.name == req.table)
        .ok_or("Error: No such file or directory")?;
    let set = t
        .sets
        .iter()
        .find(|s| s.name == req.set)
        .ok_or("Error: No such file or directory")?;
    let mut shown = set.clone();
    shown.counter = false;
    shown.elements = elems
        .into_iter()
        .map(|mut e| {
            e.counter &= counters;
            e
        })
        .collect();
    Ok(format!(
        "table {} {} {{\n{}}}\n",
        t.family.name(),
        t.name,
        print_set(&shown, &PrintOptions::default())
    ))
}
