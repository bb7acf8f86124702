//! Print a ruleset file as `nft list ruleset` would (`-a` for handles).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let handles = args.iter().any(|a| a == "-a");
    let Some(path) = args.iter().skip(1).find(|a| *a != "-a") else {
        eprintln!("usage: nftprint [-a] FILE");
        std::process::exit(2);
    };
    match wasp_ruleset::parse_file(std::path::Path::new(path)) {
        Ok(r) => print!("{}", wasp_ruleset::print_ruleset(&r, handles)),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
