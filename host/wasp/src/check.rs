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
/// string.
///
/// # Errors
/// [`Error::Ruleset`] with file:line:col when the ruleset cannot be read, parsed or compiled,
/// a plugin cannot be loaded, or a plugin refuses a use's arguments.
pub fn check(path: &Path, print: bool, handles: bool) -> Result<String, Error> {
    let ruleset = wasp_ruleset::parse_file(path)?;
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
