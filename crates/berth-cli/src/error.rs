//! Why a command did not succeed, and the exit code each reason gives: 0 success; 1 berth
//! refused the request (or answered with an error); 2 a usage error or berth could not be
//! reached.

use serde_json::Value;

/// Why a command did not succeed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CliError {
    /// The command line is wrong (exit 2).
    Usage(String),
    /// berth could not be reached (exit 2).
    Connection(String),
    /// berth answered with an error status (exit 1).
    Refused {
        /// The HTTP status.
        status: u16,
        /// berth's answer.
        body: Value,
    },
    /// The command ran but did not get what it wanted (exit 1).
    Failed(String),
}

impl CliError {
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Connection(_) => 2,
            CliError::Refused { .. } | CliError::Failed(_) => 1,
        }
    }
}
