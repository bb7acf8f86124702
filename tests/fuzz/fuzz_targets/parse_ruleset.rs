//! Feed arbitrary bytes to `wasp_ruleset::parse_str` as a ruleset file (lossily decoded as
//! UTF-8), then print what parses and display what does not, so input that makes the parser
//! panic, recurse without bound or print a malformed error is found here. All logic lives in
//! wasp-ruleset.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wasp_ruleset::error::Error;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // `include` reads files: keep the fuzzer inside the input.
    if text.contains("include") {
        return;
    }
    match wasp_ruleset::parse_str(&text, "fuzz.nft") {
        Ok(ruleset) => {
            let _ = wasp_ruleset::print_ruleset(&ruleset, true);
        }
        Err(Error::At(l)) => {
            assert!(l.line >= 1 && l.col >= 1);
            let _ = Error::At(l).to_string();
        }
        Err(e @ Error::Io { .. }) => panic!("parse_str read a file: {e}"),
    }
});
