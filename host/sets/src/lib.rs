//! Set back-ends. The foundation has exact-match keys (the hash back-end); interval and
//! concatenated-range back-ends (pipapo) come with the sets issue.
#![forbid(unsafe_code)]
