//! `wasp check`: parse and compile a ruleset (loading its plugins and configuring every use,
//! as `wasp replay` does), optionally print it back as `nft list ruleset`.

use std::path::Path;

use wasp_plugin::HostConfig;

use crate::datapath::{Clocks, Shared, build};
use crate::error::Error;
use crate::plugins::{PluginCache, REPLAY_DEADLINE_TICKS};

/// Parse and compile the ruleset at `path`, load its plugins and configure every use site
/// (so that arguments a plugin refuses are reported at their file:line:col). With `print`, return its text as
/// `nft list ruleset` prints it (`handles`: as `nft -a list ruleset`); otherwise an empty
/// string. A file that [`looks_like_json`] is read in libnftables' schema (`nft -j -f`); its
/// errors name the JSON command and statement they come from (`rules.json:
/// nftables[2].add.rule.expr[0]: error: ...`), compile errors included.
///
/// # Errors
/// [`Error::Ruleset`] with file:line:col when the ruleset cannot be read, parsed or compiled,
/// a plugin cannot be loaded, or a plugin refuses a use's arguments.
pub fn check(path: &Path, print: bool, handles: bool) -> Result<String, Error> {
    let bytes = std::fs::read(path).map_err(|e| wasp_ruleset::Error::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let text = String::from_utf8_lossy(&bytes);
    if !looks_like_json(&text) {
        return checked(wasp_ruleset::parse_file(path)?, print, handles);
    }
    let name = path.display().to_string();
    let t = wasp_ruleset::json_in::translate(&text, &name)?;
    let ruleset = wasp_ruleset::parse_str(&t.text, &name).map_err(|e| t.relocate(e))?;
    checked(ruleset, print, handles).map_err(|e| match e {
        Error::Ruleset(r) => Error::Ruleset(t.relocate(r)),
        e => e,
    })
}

/// Whether a ruleset file's text is JSON: its first character that is not white space is
/// `{` (nft syntax never begins so). nft reads a file as JSON first and falls back to its own
/// syntax when that fails, with `-j` or without; wasp decides by this.
pub fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// Compile `ruleset` with its plugins, and print it when `print`.
fn checked(ruleset: wasp_ruleset::Ruleset, print: bool, handles: bool) -> Result<String, Error> {
    let mut cache = PluginCache::default();
    let host = HostConfig {
        deadline_ticks: REPLAY_DEADLINE_TICKS,
        ..HostConfig::default()
    };
    build(
        &ruleset,
        0,
        1,
        Clocks::default(),
        false,
        &mut Shared::single(&mut cache, host),
    )?;
    Ok(if print {
        wasp_ruleset::print_ruleset(&ruleset, handles)
    } else {
        String::new()
    })
}
