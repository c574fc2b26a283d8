//! Progress on long operations: a bar for bulk enrolment from a file and a spinner while a
//! lease is awaited. Both are drawn on standard error, and only when it is a terminal, so
//! scripts and pipes see nothing of them.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal as _;
use std::time::Duration;

fn target() -> ProgressDrawTarget {
    match std::io::stderr().is_terminal() {
        true => ProgressDrawTarget::stderr(),
        false => ProgressDrawTarget::hidden(),
    }
}

/// A bar counting `len` steps, with a message.
pub(crate) fn bar(len: usize, message: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len as u64), target());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message.to_owned());
    bar
}

/// A spinner with a message, ticking on its own.
pub(crate) fn spinner(message: &str) -> ProgressBar {
    let spinner = ProgressBar::with_draw_target(None, target());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        spinner.set_style(style);
    }
    spinner.set_message(message.to_owned());
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
}
