//! `swapper` version 1: every packet matches; carries its counts across a hot swap.
const VERSION: &str = "1";
const ANSWER: u8 = 1;
const TRANSFER: bool = true;
const REFUSE: &str = "never";
include!("../../swap-common.rs");
