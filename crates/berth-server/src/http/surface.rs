//! The context of the current request: its request id, the surface that serves its path, and
//! (for Placement and the bare-metal API) the negotiated microversion, held in a task-local for
//! the whole request.
//! The context middleware (`http::context`) sets it; error rendering reads it.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use std::convert::Infallible;

/// Which API surface serves a request; decides the error format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// `/placement`.
    Placement,
    /// `/reservation`.
    Blazar,
    /// `/baremetal` (Ironic's dialect).
    Ironic,
    /// Everything else.
    Berth,
}

/// Lowest Placement microversion.
pub const PLACEMENT_MIN: Microversion = Microversion(0);
/// Highest Placement microversion.
pub const PLACEMENT_MAX: Microversion = Microversion(39);

/// Lowest bare-metal (Ironic) microversion.
pub const IRONIC_MIN: Microversion = Microversion(1);
/// Highest bare-metal (Ironic) microversion: 1.60, the version by which every field of the
/// resources berth serves exists (allocations 1.52, their `PATCH` 1.57, backfilling 1.58, their
/// owner 1.60); later versions add fields and resources berth does not serve.
pub const IRONIC_MAX: Microversion = Microversion(60);
/// The first bare-metal microversion with allocations.
pub const IRONIC_ALLOCATIONS: u16 = 52;

/// A Placement or bare-metal (Ironic) microversion `1.N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Microversion(u16);

impl Microversion {
    /// Whether this is `1.minor` or later.
    pub fn at_least(self, minor: u16) -> bool {
        self.0 >= minor
    }

    /// The minor number.
    pub fn minor(self) -> u16 {
        self.0
    }

    /// [`VersionError::Absent`] (404) unless this is `1.minor` or later: routes below their
    /// version do not exist.
    pub fn require(self, minor: u16) -> Result<(), VersionError> {
        match self.at_least(minor) {
            true => Ok(()),
            false => Err(VersionError::Absent),
        }
    }
}

impl std::fmt::Display for Microversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Microversion {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Microversion, Infallible> {
        Ok(parts
            .extensions
            .get::<Microversion>()
            .copied()
            .unwrap_or(PLACEMENT_MIN))
    }
}

/// Why a Placement microversion does not serve a request (rendered as an error by
/// `http::error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionError {
    /// `OpenStack-API-Version` names no version `1.N` (400).
    Malformed(String),
    /// A version outside [`PLACEMENT_MIN`] to [`PLACEMENT_MAX`] (406).
    Unsupported(String),
    /// The route does not exist below the version it appeared in (404).
    Absent,
}

impl VersionError {
    /// The status it is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            VersionError::Malformed(_) => StatusCode::BAD_REQUEST,
            VersionError::Unsupported(_) => StatusCode::NOT_ACCEPTABLE,
            VersionError::Absent => StatusCode::NOT_FOUND,
        }
    }
}

impl std::fmt::Display for VersionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionError::Malformed(version) => write!(f, "invalid version string: {version}"),
            VersionError::Unsupported(version) => {
                write!(f, "Unacceptable version header: {version}")
            }
            VersionError::Absent => f.write_str("The resource could not be found."),
        }
    }
}

/// The context of the current request.
#[derive(Debug, Clone)]
pub struct RequestCtx {
    /// `req-<uuid>`.
    pub request_id: String,
    /// The serving surface.
    pub surface: Surface,
    /// The negotiated Placement or bare-metal microversion.
    pub microversion: Option<Microversion>,
    /// Whether the caller's `Accept` prefers HTML to JSON, so that Placement's errors are
    /// rendered as a page (as WebOb renders them).
    pub html_errors: bool,
}

tokio::task_local! {
    static CTX: RequestCtx;
}

/// The current request's context (a neutral one outside a request).
pub fn current() -> RequestCtx {
    CTX.try_with(Clone::clone).unwrap_or(RequestCtx {
        request_id: String::new(),
        surface: Surface::Berth,
        microversion: None,
        html_errors: false,
    })
}

/// How much an `Accept` header wants `media` (`type/subtype`): the quality of the most specific
/// range that matches it (`type/subtype`, then `type/*`, then `*/*`), 0 when none does. No
/// header accepts everything.
pub fn acceptance(accept: Option<&str>, media: &str) -> f32 {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return 1.0;
    };
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    let mut best: Option<(u8, f32)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let quality = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let specificity = if name == media {
            3
        } else if name.strip_suffix("/*") == Some(kind) {
            2
        } else if name == "*/*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(s, _)| specificity > s) {
            best = Some((specificity, quality));
        }
    }
    best.map_or(0.0, |(_, quality)| quality)
}

/// Runs `work` with `ctx` as the current request's context.
pub async fn scope<F: std::future::Future>(ctx: RequestCtx, work: F) -> F::Output {
    CTX.scope(ctx, work).await
}

/// The surface that serves `path`.
pub fn surface_of(path: &str) -> Surface {
    if path == "/placement" || path.starts_with("/placement/") {
        Surface::Placement
    } else if path.starts_with("/reservation/") || path == "/reservation" {
        Surface::Blazar
    } else if path.starts_with("/baremetal/") || path == "/baremetal" {
        Surface::Ironic
    } else {
        Surface::Berth
    }
}

/// Parses `OpenStack-API-Version` for the `placement` service.
pub fn negotiate(header_value: Option<&str>) -> Result<Microversion, VersionError> {
    let Some(text) = header_value else {
        return Ok(PLACEMENT_MIN);
    };
    let wanted = text.split(',').map(str::trim).find_map(|entry| {
        let (service, version) = entry.split_once(char::is_whitespace)?;
        service
            .eq_ignore_ascii_case("placement")
            .then(|| version.trim())
    });
    let Some(version) = wanted else {
        return Ok(PLACEMENT_MIN);
    };
    if version.eq_ignore_ascii_case("latest") {
        return Ok(PLACEMENT_MAX);
    }
    let malformed = || VersionError::Malformed(version.to_owned());
    let (major, minor) = version.split_once('.').ok_or_else(malformed)?;
    let major: u16 = major.parse().map_err(|_| malformed())?;
    let minor: u16 = minor.parse().map_err(|_| malformed())?;
    if major != 1 || minor > PLACEMENT_MAX.0 {
        return Err(VersionError::Unsupported(version.to_owned()));
    }
    Ok(Microversion(minor))
}

/// Parses the bare-metal API's version: `X-OpenStack-Ironic-API-Version: 1.N` (or `latest`),
/// else `OpenStack-API-Version: baremetal 1.N`; none means the lowest, as Ironic.
pub fn negotiate_ironic(
    ironic_header: Option<&str>,
    openstack_header: Option<&str>,
) -> Result<Microversion, VersionError> {
    let named = || {
        openstack_header?
            .split(',')
            .map(str::trim)
            .find_map(|entry| {
                let (service, version) = entry.split_once(char::is_whitespace)?;
                service
                    .eq_ignore_ascii_case("baremetal")
                    .then(|| version.trim())
            })
    };
    let Some(version) = ironic_header.map(str::trim).or_else(named) else {
        return Ok(IRONIC_MIN);
    };
    if version.eq_ignore_ascii_case("latest") {
        return Ok(IRONIC_MAX);
    }
    let malformed = || VersionError::Malformed(version.to_owned());
    let (major, minor) = version.split_once('.').ok_or_else(malformed)?;
    let major: u16 = major.parse().map_err(|_| malformed())?;
    let minor: u16 = minor.parse().map_err(|_| malformed())?;
    if major != 1 || !(IRONIC_MIN.0..=IRONIC_MAX.0).contains(&minor) {
        return Err(VersionError::Unsupported(version.to_owned()));
    }
    Ok(Microversion(minor))
}

/// Microversions for unit tests elsewhere in the crate.
#[cfg(test)]
pub mod tests_support {
    /// Negotiates a header value that must be valid.
    pub fn negotiate(value: &str) -> super::Microversion {
        super::negotiate(Some(value)).expect("valid test microversion")
    }
}

/// Where Placement is mounted for the request at hand: `/placement` on berth's listener, the
/// root on Placement's own. Links and `Location` headers are built under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mount(&'static str);

impl Mount {
    /// Under `/placement`, beside berth's other surfaces.
    pub(crate) const PREFIXED: Mount = Mount("/placement");
    /// At the root of a listener of its own.
    pub(crate) const ROOT: Mount = Mount("");

    /// The path of `rest` (which starts with `/`) under this mount.
    pub(crate) fn path(self, rest: &str) -> String {
        format!("{}{rest}", self.0)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Mount {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Mount, Infallible> {
        Ok(parts
            .extensions
            .get::<Mount>()
            .copied()
            .unwrap_or(Mount::PREFIXED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_metal_negotiation_follows_ironic() {
        assert_eq!(negotiate_ironic(None, None).expect("none"), IRONIC_MIN);
        assert_eq!(
            negotiate_ironic(Some("latest"), None).expect("latest"),
            IRONIC_MAX
        );
        assert_eq!(
            negotiate_ironic(Some("1.52"), None).expect("1.52").minor(),
            52
        );
        assert_eq!(
            negotiate_ironic(None, Some("compute 2.1, baremetal 1.58"))
                .expect("named")
                .minor(),
            58
        );
        assert_eq!(
            negotiate_ironic(Some("1.31"), Some("baremetal 1.58"))
                .expect("Ironic's own header first")
                .minor(),
            31
        );
        for bad in ["abc", "1", "1.x", ""] {
            assert_eq!(
                negotiate_ironic(Some(bad), None).expect_err(bad).status(),
                StatusCode::BAD_REQUEST,
                "{bad}"
            );
        }
        for unsupported in ["1.0", "1.61", "1.115", "2.1"] {
            assert_eq!(
                negotiate_ironic(Some(unsupported), None)
                    .expect_err(unsupported)
                    .status(),
                StatusCode::NOT_ACCEPTABLE,
                "{unsupported}"
            );
        }
    }

    #[test]
    fn negotiation_follows_placement() {
        assert_eq!(negotiate(None).expect("none"), PLACEMENT_MIN);
        assert_eq!(
            negotiate(Some("placement 1.39")).expect("max"),
            PLACEMENT_MAX
        );
        assert_eq!(
            negotiate(Some("placement latest")).expect("latest"),
            PLACEMENT_MAX
        );
        assert_eq!(
            negotiate(Some("compute 2.1")).expect("other service"),
            PLACEMENT_MIN
        );
        assert_eq!(
            negotiate(Some("compute 2.1, placement 1.17"))
                .expect("list")
                .minor(),
            17
        );
        assert_eq!(
            negotiate(Some("placement abc")).expect_err("bad").status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            negotiate(Some("placement 1")).expect_err("bad").status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            negotiate(Some("placement 2.0")).expect_err("406").status(),
            StatusCode::NOT_ACCEPTABLE
        );
        assert_eq!(
            negotiate(Some("placement 1.99")).expect_err("406").status(),
            StatusCode::NOT_ACCEPTABLE
        );
    }
}
