//! Man pages from the clap command ([`crate::cli::Cli`]), rendered by `clap_mangen`: wasp(1)
//! and one page per command, named after its words (wasp-check(1), wasp-replay(1),
//! wasp-run(1), wasp-ctl(1), wasp-plugin(1), wasp-plugin-list(1), wasp-completions(1),
//! wasp-man(1)), all in section 1. Each says what the parser accepts: its options and, in its
//! DESCRIPTION, the command's long help (wasp-ctl(1) lists ctl's command words from
//! [`crate::ctl::CtlArgs`]'s). wasp(1) adds ENVIRONMENT (`WASP_PLUGIN_PATH`, `RUST_LOG`),
//! FILES (the default ruleset, the control socket, the plugin directories) and SEE ALSO.
//!
//! Errors: a command word that names no command is [`Error::Usage`]; a page that cannot be
//! written is [`Error::Output`] naming the file.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::bundled::{PLUGIN_PATH_ENV, SYSTEM_DIR};
use crate::error::Error;

/// The ENVIRONMENT and FILES sections of wasp(1), in roff.
const ROOT_EXTRA: &str = r#".SH ENVIRONMENT
.TP
\fBWASP_PLUGIN_PATH\fR
Directories (separated by \fB:\fR) searched first for a bundled plugin's \fINAME\fB.wasm\fR
(a ruleset's \fBplugin \fINAME\fB;\fR, the counter plugin behind every \fBcounter\fR,
\fB--swap\fR and \fB--offload-plugin\fR with a bare name). Then \fBplugins/\fR beside the
executable, then \fB/usr/lib/wasp/plugins\fR, then the copy embedded in the binary.
\fBwasp plugin list\fR shows which one each name gets.
.TP
\fBRUST_LOG\fR
What \fBwasp run\fR logs to standard error (default: info), e.g. \fBRUST_LOG=debug\fR.
.SH FILES
.TP
\fB/etc/wasp/wasp.nft\fR
The ruleset the packaged service runs (\fBwasp.service\fR).
.TP
\fB/run/wasp/wasp.sock\fR
The control socket of \fBwasp run\fR, which \fBwasp ctl\fR talks to (\fB--socket\fR).
.TP
\fB/usr/lib/wasp/plugins\fR
Plugin overrides for the whole system (the package creates none: the bundled plugins are
embedded in the binary).
"#;

/// The clap command as the pages and completions see it: built (so that subcommands have
/// their display names, `wasp-ctl`), without clap's `help` subcommand.
fn command() -> clap::Command {
    let mut cmd = crate::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// The page of the command named by `words` (`[]`: wasp(1); `["ctl"]`: wasp-ctl(1);
/// `["plugin", "list"]`: wasp-plugin-list(1)), in roff.
///
/// # Errors
/// [`Error::Usage`] when a word names no command.
pub fn page(words: &[&str]) -> Result<Vec<u8>, Error> {
    let root = command();
    let mut cmd = &root;
    for w in words {
        cmd = cmd.find_subcommand(w).ok_or_else(|| {
            Error::Usage(format!(
                "wasp man: `{}` has no command `{w}` (commands: {})",
                cmd.get_display_name().unwrap_or("wasp"),
                cmd.get_subcommands()
                    .filter(|s| !s.is_hide_set())
                    .map(|s| s.get_name().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
    }
    Ok(render(cmd, words.is_empty()))
}

/// Every page (wasp(1) and each command's, recursively), written into `dir` (created when
/// missing) as `NAME.1`; returns their paths, wasp.1 first.
///
/// # Errors
/// [`Error::Output`] naming the directory or file that cannot be written.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let out = |path: &Path, e: std::io::Error| Error::Output {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| out(dir, e))?;
    let root = command();
    let mut pages = vec![(&root, true)];
    let mut i = 0;
    while i < pages.len() {
        let (cmd, _) = pages[i];
        pages.extend(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| (s, false)),
        );
        i += 1;
    }
    let mut written = Vec::with_capacity(pages.len());
    for (cmd, is_root) in pages {
        let path = dir.join(format!("{}.1", name_of(cmd)));
        std::fs::write(&path, render(cmd, is_root)).map_err(|e| out(&path, e))?;
        written.push(path);
    }
    Ok(written)
}

/// A page's name: the command's display name (`wasp-ctl`).
fn name_of(cmd: &clap::Command) -> String {
    cmd.get_display_name().unwrap_or(cmd.get_name()).to_string()
}

/// One page in roff: clap_mangen's sections, then (for wasp(1)) ENVIRONMENT and FILES, then
/// SEE ALSO (the parent's page and the subcommands' pages).
fn render(cmd: &clap::Command, is_root: bool) -> Vec<u8> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .source(concat!("wasp ", env!("CARGO_PKG_VERSION")))
        .manual("wasp manual")
        .render(&mut buf)
        .expect("rendering into memory does not fail");
    if is_root {
        // The constants, so that the page says what the code does.
        debug_assert!(ROOT_EXTRA.contains(PLUGIN_PATH_ENV) && ROOT_EXTRA.contains(SYSTEM_DIR));
        buf.extend_from_slice(ROOT_EXTRA.as_bytes());
    }
    let name = name_of(cmd);
    // (page, section)
    let mut see: Vec<(String, u8)> = Vec::new();
    if let Some((parent, _)) = name.rsplit_once('-') {
        see.push((parent.to_string(), 1));
    }
    see.extend(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| (name_of(s), 1)),
    );
    if is_root {
        see.push(("nft".to_string(), 8));
    }
    if !see.is_empty() {
        let refs: Vec<String> = see
            .iter()
            .map(|(page, section)| format!("\\fB{}\\fR({section})", page.replace('-', "\\-")))
            .collect();
        buf.extend_from_slice(format!(".SH \"SEE ALSO\"\n{}\n", refs.join(",\n")).as_bytes());
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(words: &[&str]) -> String {
        String::from_utf8(page(words).unwrap()).unwrap()
    }

    #[test]
    fn the_pages_are_named_after_the_command_words() {
        let root = text(&[]);
        assert!(root.starts_with(".ie \\n(.g .ds Aq \\(aq"), "{root}");
        assert!(
            root.contains(&format!(
                ".TH wasp 1  \"wasp {}\" \"wasp manual\"",
                env!("CARGO_PKG_VERSION")
            )),
            "{root}"
        );
        assert!(root.contains(".SH ENVIRONMENT") && root.contains("WASP_PLUGIN_PATH"));
        assert!(root.contains("\\fBwasp\\-ctl\\fR(1)"), "{root}");
        assert!(root.contains("\\fBnft\\fR(8)"), "{root}");
        let ctl = text(&["ctl"]);
        assert!(ctl.contains(".TH wasp-ctl 1"), "{ctl}");
        let list = text(&["plugin", "list"]);
        assert!(list.contains(".TH wasp-plugin-list 1"), "{list}");
        assert!(matches!(page(&["frob"]), Err(Error::Usage(m)) if m.contains("ctl")));
    }

    #[test]
    fn every_page_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_all(dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for n in [
            "wasp.1",
            "wasp-check.1",
            "wasp-replay.1",
            "wasp-run.1",
            "wasp-ctl.1",
            "wasp-plugin.1",
            "wasp-plugin-list.1",
            "wasp-completions.1",
            "wasp-man.1",
        ] {
            assert!(names.contains(&n.to_string()), "{n} in {names:?}");
        }
        assert_eq!(names[0], "wasp.1");
        assert_eq!(std::fs::read(&files[0]).unwrap(), page(&[]).unwrap());
    }
}
