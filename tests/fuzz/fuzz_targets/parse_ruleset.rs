//! Feed arbitrary bytes to `wasp_ruleset::parse_bytes` as a ruleset file, then print what parses and display what does not, so input that makes the parser
//! panic, recurse without bound or print a malformed error is found here. All logic lives in
//! wasp-ruleset.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wasp_ruleset::error::Error;

fuzz_target!(|data: &[u8]| {
    // `include` reads files: keep the fuzzer inside the input.
    if data.windows(7).any(|w| w.eq_ignore_ascii_case(b"include")) {
        return;
    }
    match wasp_ruleset::parse_bytes(data, "fuzz.nft") {
        Ok(ruleset) => {
            let _ = wasp_ruleset::print_ruleset(&ruleset, true);
        }
        Err(Error::At(l)) => {
            assert!(l.line >= 1 && l.col >= 1);
            let _ = Error::At(l).to_string();
        }
        Err(e @ Error::Io { .. }) => panic!("parse_bytes read a file: {e}"),
        Err(e @ Error::Json(_)) => panic!("text parsed as JSON: {e}"),
    }
});
