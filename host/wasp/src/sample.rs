//! `sample.toml`: what a sample directory declares (documented in `samples/README.md`).
//!
//! ```toml
//! description = "small-office firewall"   # optional, free text
//! ruleset = "firewall.nft"                # required, relative to the sample directory
//! in-dev = "lan0"                         # optional; default: the first ingress base chain's device
//! out = "out"                             # optional; default "out"
//!
//! [[capture]]
//! path = "office.pcap"                    # relative to the sample directory
//! required = true                         # optional; default false: a missing file is skipped
//! note = "generated, hits every rule"     # optional, free text
//! ```
//!
//! A sample that forwards names its gateway file (devices, addresses, routes, neighbours;
//! relative to the sample directory): `gateway = "gateway.conf"`.
//!
//! A sample with plugins may also declare hot swaps, as `wasp replay --swap` takes them (a
//! path with a `/` or ending in `.wasm` is relative to the sample directory, a bare name is a
//! bundled plugin): `swap = ["counter=v2/counter.wasm@100"]`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Name of the file in a sample directory.
pub const SAMPLE_FILE: &str = "sample.toml";

/// A `sample.toml` that cannot be read or does not say what a sample must say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    /// The file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        message: String,
    },
    /// The TOML is malformed, a key is unknown, or a required key is missing.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message (with line and column).
        message: String,
    },
}

/// The file as written (paths still relative).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSample {
    description: Option<String>,
    ruleset: PathBuf,
    in_dev: Option<String>,
    out: Option<PathBuf>,
    #[serde(default)]
    capture: Vec<RawCapture>,
    #[serde(default)]
    swap: Vec<String>,
    gateway: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapture {
    path: PathBuf,
    #[serde(default)]
    required: bool,
    note: Option<String>,
}

/// One capture a sample declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleCapture {
    /// Path resolved against the sample directory.
    pub path: PathBuf,
    /// Path as written in `sample.toml` (for messages).
    pub declared: PathBuf,
    /// A missing required capture is an error; a missing optional one is skipped with a note.
    pub required: bool,
    /// Free text.
    pub note: Option<String>,
}

/// A sample directory's declaration, with paths resolved against the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The sample directory.
    pub dir: PathBuf,
    /// Free text.
    pub description: Option<String>,
    /// The ruleset file.
    pub ruleset: PathBuf,
    /// Input device, when declared (the default: a pcapng's interface names override it per
    /// packet, see [`crate::replay`](mod@crate::replay)).
    pub in_dev: Option<String>,
    /// Output directory (default `DIR/out`).
    pub out: PathBuf,
    /// Captures in replay order.
    pub captures: Vec<SampleCapture>,
    /// Hot swaps (`swap = ["NAME=PATH@N"]`), file paths resolved against the directory.
    pub swaps: Vec<crate::plugins::SwapSpec>,
    /// The gateway file (`gateway = "FILE"`), resolved against the directory.
    pub gateway: Option<PathBuf>,
}

impl Sample {
    /// Read `DIR/sample.toml`.
    ///
    /// # Errors
    /// [`SampleError`] when it cannot be read or is invalid.
    pub fn load(dir: &Path) -> Result<Self, SampleError> {
        let path = dir.join(SAMPLE_FILE);
        let usage = "a sample directory holds a sample.toml (see samples/README.md); or use --ruleset FILE --in CAPTURE";
        if dir.exists() && !dir.is_dir() {
            return Err(SampleError::Io {
                path: dir.to_path_buf(),
                message: format!("not a directory: {usage}"),
            });
        }
        if dir.is_dir() && !path.exists() {
            return Err(SampleError::Io {
                path: dir.to_path_buf(),
                message: format!("no {SAMPLE_FILE} here: {usage}"),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|e| SampleError::Io {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Sample::parse(dir, &path, &text)
    }

    /// Parse `text` as the `sample.toml` of `dir` (`path` names the file in errors).
    ///
    /// # Errors
    /// [`SampleError::Invalid`] for bad TOML, an unknown key, a missing `ruleset`, or no
    /// capture at all.
    pub fn parse(dir: &Path, path: &Path, text: &str) -> Result<Self, SampleError> {
        let raw: RawSample = toml::from_str(text).map_err(|e| SampleError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        if raw.capture.is_empty() {
            return Err(SampleError::Invalid {
                path: path.to_path_buf(),
                message: "no [[capture]] declared: a sample needs at least one capture".to_string(),
            });
        }
        let mut swaps = Vec::with_capacity(raw.swap.len());
        for text in &raw.swap {
            let mut spec: crate::plugins::SwapSpec =
                text.parse().map_err(|m| SampleError::Invalid {
                    path: path.to_path_buf(),
                    message: format!("swap: {m}"),
                })?;
            if crate::plugins::is_file_path(&spec.path) {
                spec.path = dir.join(&spec.path).display().to_string();
            }
            swaps.push(spec);
        }
        Ok(Sample {
            swaps,
            gateway: raw.gateway.map(|g| dir.join(g)),
            dir: dir.to_path_buf(),
            description: raw.description,
            ruleset: dir.join(&raw.ruleset),
            in_dev: raw.in_dev,
            out: dir.join(raw.out.unwrap_or_else(|| PathBuf::from("out"))),
            captures: raw
                .capture
                .into_iter()
                .map(|c| SampleCapture {
                    path: dir.join(&c.path),
                    declared: c.path,
                    required: c.required,
                    note: c.note,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps() {
        let text = "ruleset = \"r.nft\"\nswap = [\"counter=v2/c.wasm@100\", \"idletimer=idletimer@0\"]\n[[capture]]\npath = \"c.pcap\"\n";
        let s = Sample::parse(
            Path::new("samples/x"),
            Path::new("samples/x/sample.toml"),
            text,
        )
        .unwrap();
        let got: Vec<(&str, &str, u64)> = s
            .swaps
            .iter()
            .map(|w| (w.name.as_str(), w.path.as_str(), w.after))
            .collect();
        assert_eq!(
            got,
            [
                ("counter", "samples/x/v2/c.wasm", 100),
                ("idletimer", "idletimer", 0)
            ]
        );
        let bad = "ruleset = \"r.nft\"\nswap = [\"counter\"]\n[[capture]]\npath = \"c.pcap\"\n";
        let e = Sample::parse(Path::new("x"), Path::new("x/sample.toml"), bad).unwrap_err();
        assert!(e.to_string().contains("swap: expected NAME=PATH@N"), "{e}");
    }

    #[test]
    fn full_sample() {
        let s = Sample::parse(
            Path::new("samples/fw"),
            Path::new("samples/fw/sample.toml"),
            r#"
description = "office"
ruleset = "firewall.nft"
in-dev = "lan0"
out = "results"

[[capture]]
path = "office.pcap"
required = true
note = "ours"

[[capture]]
path = "../../../shared/pcaps/x.pcap"
"#,
        )
        .unwrap();
        assert_eq!(s.ruleset, PathBuf::from("samples/fw/firewall.nft"));
        assert_eq!(s.in_dev.as_deref(), Some("lan0"));
        assert_eq!(s.out, PathBuf::from("samples/fw/results"));
        assert_eq!(s.description.as_deref(), Some("office"));
        assert_eq!(s.captures.len(), 2);
        assert_eq!(s.captures[0].path, PathBuf::from("samples/fw/office.pcap"));
        assert!(s.captures[0].required);
        assert_eq!(s.captures[0].note.as_deref(), Some("ours"));
        assert_eq!(
            s.captures[1].path,
            PathBuf::from("samples/fw/../../../shared/pcaps/x.pcap")
        );
        assert_eq!(
            s.captures[1].declared,
            PathBuf::from("../../../shared/pcaps/x.pcap")
        );
        assert!(!s.captures[1].required);
    }

    #[test]
    fn defaults() {
        let s = Sample::parse(
            Path::new("d"),
            Path::new("d/sample.toml"),
            "ruleset = \"r.nft\"\n[[capture]]\npath = \"a.pcap\"\n",
        )
        .unwrap();
        assert_eq!(s.out, PathBuf::from("d/out"));
        assert_eq!(s.in_dev, None);
        assert!(!s.captures[0].required);
    }

    #[test]
    fn unknown_key_missing_ruleset_and_no_capture_are_errors() {
        let p = Path::new("d/sample.toml");
        let e = Sample::parse(
            Path::new("d"),
            p,
            "ruleset = \"r.nft\"\nrulset = \"x\"\n[[capture]]\npath = \"a\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field `rulset`"), "{e}");
        let e = Sample::parse(Path::new("d"), p, "[[capture]]\npath = \"a\"\n").unwrap_err();
        assert!(e.to_string().contains("missing field `ruleset`"), "{e}");
        let e = Sample::parse(Path::new("d"), p, "ruleset = \"r.nft\"\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "d/sample.toml: no [[capture]] declared: a sample needs at least one capture"
        );
    }
}
