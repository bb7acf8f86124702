//! `swapper` version 3: every packet matches; no state transfer (starts fresh).
const VERSION: &str = "3";
const ANSWER: u8 = 1;
const TRANSFER: bool = false;
const REFUSE: &str = "never";
include!("../../swap-common.rs");
