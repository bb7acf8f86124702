//! `wasp check`: parse and compile a ruleset, optionally print it back as `nft list ruleset`.

use std::path::Path;

use wasp_core::Engine;

use crate::error::Error;

/// Parse and compile the ruleset at `path`. With `print`, return its text as
/// `nft list ruleset` prints it (`handles`: as `nft -a list ruleset`); otherwise an empty
/// string.
///
/// # Errors
/// [`Error::Ruleset`] with file:line:col when the ruleset cannot be read, parsed or compiled.
pub fn check(path: &Path, print: bool, handles: bool) -> Result<String, Error> {
    let ruleset = wasp_ruleset::parse_file(path)?;
    Engine::compile(&ruleset)?;
    Ok(if print {
        wasp_ruleset::print_ruleset(&ruleset, handles)
    } else {
        String::new()
    })
}
