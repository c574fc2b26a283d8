//! Id generation: the one place berth draws new uuids. Their random bits come from the thread's
//! own cryptographic generator, seeded by the operating system, not from a system call each.

use berth_app::IdGen;
use uuid::Uuid;

/// Time-ordered v7 uuids.
#[derive(Debug, Clone, Copy, Default)]
pub struct V7Ids;

impl IdGen for V7Ids {
    #[allow(
        clippy::disallowed_methods,
        reason = "the injected id generator is the one place that makes uuids"
    )]
    fn uuid(&self) -> Uuid {
        Uuid::now_v7()
    }
}

/// A random uuid for a request id.
#[allow(
    clippy::disallowed_methods,
    reason = "request ids are drawn here, beside the id generator"
)]
pub fn request_uuid() -> Uuid {
    Uuid::new_v4()
}
