//! What a command does with a command line clap refused or answered
//! itself: print clap's text, and exit 0 for `--help` and `--version`,
//! 2 for a usage error (clap's own convention). Shared by the `learner`,
//! `replay-server` and `actor` commands, which run as binaries and inside
//! the Python package (`seed-rs ...`), where exiting is the caller's.

/// Prints `e` (to stdout for help and version, stderr otherwise) and
/// returns the exit code the command ends with.
pub fn usage_exit_code(e: &clap::Error) -> u8 {
    let _ = e.print();
    match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    #[command(name = "t", version)]
    struct Flags {
        #[arg(long)]
        n: u32,
    }

    #[test]
    fn help_and_version_succeed_and_bad_usage_is_two() {
        let code = |args: &[&str]| usage_exit_code(&Flags::try_parse_from(args).unwrap_err());
        assert_eq!(code(&["t", "--help"]), 0);
        assert_eq!(code(&["t", "--version"]), 0);
        assert_eq!(code(&["t", "--n", "x"]), 2);
        assert_eq!(code(&["t"]), 2);
    }
}
