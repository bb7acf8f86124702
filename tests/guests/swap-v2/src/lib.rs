//! `swapper` version 2: no packet matches; takes the counts over; refuses the argument
//! `v1-only`.
const VERSION: &str = "2";
const ANSWER: u8 = 0;
const TRANSFER: bool = true;
const REFUSE: &str = "v1-only";
include!("../../swap-common.rs");
