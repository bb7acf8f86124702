//! The translator's unit tests: JSON commands to nft lines, and errors told in JSON terms.
