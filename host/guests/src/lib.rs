//! Where the bundled plugins (`plugins/`) and the test guests (`tests/guests/`) are after the
//! build compiled them to wasm32-wasip2. Filled by the plugin issue.
