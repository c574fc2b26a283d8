//! Keystone v3 token validation for `--auth keystone`, as keystonemiddleware does it in front of
//! an OpenStack service.
//!
//! berth authenticates itself with its own service credentials (a password or an application
//! credential from the configuration file), then validates each caller's `X-Auth-Token` with
//! `GET /v3/auth/tokens` (`X-Subject-Token`). What the token says (user, project, domain, system
//! scope, role names) is a [`Subject`]; `auth` turns it into the caller's identity.
//!
//! Validated tokens are cached, keyed by the SHA-256 of the token, until the earlier of their
//! expiry and the configured bound (300 s by default, as keystonemiddleware), in a cache of at most
//! `cache_entries` entries: a revoked token keeps working at most that bound. A token Keystone
//! does not know (expired, revoked, garbage) or an unscoped token is [`KeystoneError::Invalid`];
//! Keystone slow (past the timeout), down or refusing berth's own credentials is
//! [`KeystoneError::Unavailable`], never a pass.

use crate::clock::SystemClock;
use anyhow::Context as _;
use berth_app::Clock as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// keystonemiddleware's default `token_cache_time`.
pub const CACHE_SECONDS_DEFAULT: u64 = 300;
/// Default bound on the number of cached tokens.
pub const CACHE_ENTRIES_DEFAULT: usize = 10_000;
/// Default bound on one call to Keystone.
pub const TIMEOUT_SECONDS_DEFAULT: u64 = 5;
/// berth renews its own token this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// A secret from the configuration file: never printed, not even by `Debug`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, for the request that needs it (never for a log).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

/// A domain named by id or by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainRef {
    /// By id (`default` is the default domain's).
    Id(String),
    /// By name.
    Name(String),
}

/// berth's own credentials with Keystone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A user's password, scoped to a project (the user needs the `service` role there, or
    /// `reader` on the system, to validate others' tokens).
    Password {
        /// The user's name.
        username: String,
        /// The user's domain.
        user_domain: DomainRef,
        /// The password.
        password: Secret,
        /// The project the token is scoped to.
        project_name: String,
        /// That project's domain.
        project_domain: DomainRef,
    },
    /// An application credential (scoped to its project and roles by Keystone).
    ApplicationCredential {
        /// Its id.
        id: String,
        /// Its secret.
        secret: Secret,
    },
}

/// The `[keystone]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeystoneSettings {
    /// Keystone's v3 endpoint, such as `http://keystone:5000/v3`.
    pub auth_url: String,
    /// What `WWW-Authenticate: Keystone uri="..."` names (the auth URL unless set).
    pub www_authenticate_uri: String,
    /// berth's own credentials.
    pub credentials: Credentials,
    /// The longest a validated token is believed without asking again.
    pub cache_bound: Duration,
    /// The most tokens cached at once.
    pub cache_entries: usize,
    /// The longest one call to Keystone may take.
    pub timeout: Duration,
    /// Roles a service token must carry (`X-Service-Token`), any of them.
    pub service_token_roles: Vec<String>,
}

/// What a valid token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The user.
    pub user_id: String,
    /// The project of a project-scoped token.
    pub project_id: Option<String>,
    /// The project's domain, or the domain of a domain-scoped token.
    pub domain_id: Option<String>,
    /// Whether the token is scoped to the whole system.
    pub system: bool,
    /// The names of its roles.
    pub roles: Vec<String>,
}

/// Why a token was not validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeystoneError {
    /// Keystone does not know the token (expired, revoked, garbage), or it is unscoped.
    Invalid,
    /// Keystone could not say: slow, down, or refusing berth's own credentials.
    Unavailable(String),
}

/// The cache of validated tokens: at most `capacity` entries, each until its own deadline.
#[derive(Debug)]
pub struct TokenCache {
    entries: HashMap<[u8; 32], (Arc<Subject>, Instant)>,
    capacity: usize,
}

impl TokenCache {
    /// An empty cache of at most `capacity` tokens (0 caches nothing).
    pub fn new(capacity: usize) -> TokenCache {
        TokenCache {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// The cache key of a token (validated with expired tokens allowed or not).
    pub fn key(token: &str, allow_expired: bool) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update([u8::from(allow_expired)]);
        hash.update(token.as_bytes());
        hash.finalize().into()
    }

    /// The subject of a token still believed at `now`.
    pub fn get(&self, key: &[u8; 32], now: Instant) -> Option<Arc<Subject>> {
        self.entries
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(subject, _)| Arc::clone(subject))
    }

    /// Believes `subject` until `until`; when full, expired entries go first, then any.
    pub fn insert(&mut self, key: [u8; 32], subject: Arc<Subject>, until: Instant, now: Instant) {
        if self.capacity == 0 || until <= now {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, deadline)| now < *deadline);
            while self.entries.len() >= self.capacity {
                let Some(victim) = self.entries.keys().next().copied() else {
                    break;
                };
                self.entries.remove(&victim);
            }
        }
        self.entries.insert(key, (subject, until));
    }

    /// How many tokens are cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// berth's own token.
#[derive(Debug, Clone)]
struct OwnToken {
    token: String,
    renew_at: Instant,
}

/// The validator: berth's credentials, its token, the HTTP client and the cache.
#[derive(Debug)]
pub struct Keystone {
    settings: KeystoneSettings,
    client: reqwest::Client,
    own: tokio::sync::Mutex<Option<OwnToken>>,
    cache: Mutex<TokenCache>,
}

impl Keystone {
    /// A validator; nothing is asked of Keystone until the first token.
    pub fn new(settings: KeystoneSettings) -> anyhow::Result<Keystone> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("building the Keystone client")?;
        Ok(Keystone {
            cache: Mutex::new(TokenCache::new(settings.cache_entries)),
            settings,
            client,
            own: tokio::sync::Mutex::new(None),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &KeystoneSettings {
        &self.settings
    }

    /// The subject of `token` if the cache still believes it (the hot path).
    pub fn cached(&self, token: &str, allow_expired: bool) -> Option<Arc<Subject>> {
        let key = TokenCache::key(token, allow_expired);
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key, Instant::now())
    }

    /// The subject of `token`: from the cache, or validated by Keystone and cached. With
    /// `allow_expired` (a valid service token came with it), a token expired within Keystone's
    /// `allow_expired_window` is still accepted.
    pub async fn validate(
        &self,
        token: &str,
        allow_expired: bool,
    ) -> Result<Arc<Subject>, KeystoneError> {
        if let Some(subject) = self.cached(token, allow_expired) {
            return Ok(subject);
        }
        if token.is_empty()
            || token.len() > 8192
            || reqwest::header::HeaderValue::from_str(token).is_err()
        {
            return Err(KeystoneError::Invalid);
        }
        let (subject, expires_at) = self.ask(token, allow_expired).await?;
        let subject = Arc::new(subject);
        let now = Instant::now();
        let left = expires_at
            .map(|at| at.duration_since_micros(SystemClock.now().as_micros()))
            .unwrap_or(self.settings.cache_bound);
        let believed = match allow_expired {
            // An expired token validated through a service token: the bound alone.
            true => self.settings.cache_bound,
            false => left.min(self.settings.cache_bound),
        };
        let key = TokenCache::key(token, allow_expired);
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, Arc::clone(&subject), now + believed, now);
        Ok(subject)
    }

    /// Asks Keystone about `token`, renewing berth's own token once if Keystone refuses it.
    async fn ask(
        &self,
        token: &str,
        allow_expired: bool,
    ) -> Result<(Subject, Option<Expiry>), KeystoneError> {
        for attempt in 0..2 {
            let own = self.own_token(attempt > 0).await?;
            let mut url = format!("{}/auth/tokens?nocatalog", self.base());
            if allow_expired {
                url.push_str("&allow_expired=1");
            }
            let response = self
                .client
                .get(&url)
                .header("X-Auth-Token", own)
                .header("X-Subject-Token", token)
                .header("Accept", "application/json")
                .send()
                .await
                .map_err(|error| unavailable("validating a token", error))?;
            match response.status().as_u16() {
                200 => {
                    let body: TokenBody = response
                        .json()
                        .await
                        .map_err(|error| unavailable("reading a validated token", error))?;
                    return body.token.subject().ok_or(KeystoneError::Invalid);
                }
                404 => return Err(KeystoneError::Invalid),
                401 if attempt == 0 => {}
                status => {
                    return Err(KeystoneError::Unavailable(format!(
                        "Keystone answered {status} to berth's validation of a token"
                    )));
                }
            }
        }
        Err(KeystoneError::Unavailable(
            "Keystone refuses berth's own token".to_owned(),
        ))
    }

    /// The auth URL without a trailing slash.
    fn base(&self) -> &str {
        self.settings.auth_url.trim_end_matches('/')
    }

    /// berth's own token, obtained or renewed when it is near its end (or `renew` says so).
    async fn own_token(&self, renew: bool) -> Result<String, KeystoneError> {
        let mut own = self.own.lock().await;
        if let Some(current) = own.as_ref()
            && !renew
            && Instant::now() < current.renew_at
        {
            return Ok(current.token.clone());
        }
        let fresh = self.authenticate().await?;
        let token = fresh.token.clone();
        *own = Some(fresh);
        Ok(token)
    }

    /// Authenticates berth with its credentials.
    async fn authenticate(&self) -> Result<OwnToken, KeystoneError> {
        let body = AuthRequest::of(&self.settings.credentials);
        let response = self
            .client
            .post(format!("{}/auth/tokens?nocatalog", self.base()))
            .json(&body)
            .send()
            .await
            .map_err(|error| unavailable("authenticating berth", error))?;
        let status = response.status();
        if status.as_u16() != 201 {
            return Err(KeystoneError::Unavailable(format!(
                "Keystone answered {status} to berth's own credentials"
            )));
        }
        let token = response
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                KeystoneError::Unavailable("Keystone issued berth no token".to_owned())
            })?;
        let body: TokenBody = response
            .json()
            .await
            .map_err(|error| unavailable("reading berth's own token", error))?;
        let left = Expiry::parse(&body.token.expires_at)
            .map(|at| at.duration_since_micros(SystemClock.now().as_micros()))
            .unwrap_or(RENEW_BEFORE);
        // Renew a minute before the end, or at half the lifetime of a short-lived token.
        let margin = RENEW_BEFORE.min(left / 2);
        Ok(OwnToken {
            token,
            renew_at: Instant::now() + left.saturating_sub(margin),
        })
    }
}

fn unavailable(what: &str, error: reqwest::Error) -> KeystoneError {
    KeystoneError::Unavailable(format!(
        "{what}: {:#}",
        anyhow::Error::from(error.without_url())
    ))
}

/// When a token expires, in microseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expiry(i64);

impl Expiry {
    fn parse(text: &str) -> Option<Expiry> {
        let at: jiff::Timestamp = text.parse().ok()?;
        Some(Expiry(at.as_microsecond()))
    }

    /// How long from `now` (microseconds since the epoch) until then; zero when past.
    fn duration_since_micros(self, now: i64) -> Duration {
        Duration::from_micros(u64::try_from(self.0.saturating_sub(now)).unwrap_or(0))
    }
}

/// `POST /v3/auth/tokens`.
#[derive(Debug, Serialize)]
struct AuthRequest<'a> {
    auth: AuthBody<'a>,
}

#[derive(Debug, Serialize)]
struct AuthBody<'a> {
    identity: IdentityBody<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<ScopeBody<'a>>,
}

#[derive(Debug, Serialize)]
struct IdentityBody<'a> {
    methods: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    password: Option<PasswordBody<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    application_credential: Option<AppCredentialBody<'a>>,
}

#[derive(Debug, Serialize)]
struct PasswordBody<'a> {
    user: UserBody<'a>,
}

#[derive(Debug, Serialize)]
struct UserBody<'a> {
    name: &'a str,
    domain: DomainBody<'a>,
    password: &'a str,
}

#[derive(Debug, Serialize)]
struct AppCredentialBody<'a> {
    id: &'a str,
    secret: &'a str,
}

#[derive(Debug, Serialize)]
struct ScopeBody<'a> {
    project: ProjectBody<'a>,
}

#[derive(Debug, Serialize)]
struct ProjectBody<'a> {
    name: &'a str,
    domain: DomainBody<'a>,
}

#[derive(Debug, Serialize)]
struct DomainBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

impl<'a> DomainBody<'a> {
    fn of(domain: &'a DomainRef) -> DomainBody<'a> {
        match domain {
            DomainRef::Id(id) => DomainBody {
                id: Some(id),
                name: None,
            },
            DomainRef::Name(name) => DomainBody {
                id: None,
                name: Some(name),
            },
        }
    }
}

impl<'a> AuthRequest<'a> {
    fn of(credentials: &'a Credentials) -> AuthRequest<'a> {
        let auth = match credentials {
            Credentials::Password {
                username,
                user_domain,
                password,
                project_name,
                project_domain,
            } => AuthBody {
                identity: IdentityBody {
                    methods: ["password"],
                    password: Some(PasswordBody {
                        user: UserBody {
                            name: username,
                            domain: DomainBody::of(user_domain),
                            password: password.expose(),
                        },
                    }),
                    application_credential: None,
                },
                scope: Some(ScopeBody {
                    project: ProjectBody {
                        name: project_name,
                        domain: DomainBody::of(project_domain),
                    },
                }),
            },
            Credentials::ApplicationCredential { id, secret } => AuthBody {
                identity: IdentityBody {
                    methods: ["application_credential"],
                    password: None,
                    application_credential: Some(AppCredentialBody {
                        id,
                        secret: secret.expose(),
                    }),
                },
                scope: None,
            },
        };
        AuthRequest { auth }
    }
}

/// A token as Keystone describes it (the members berth reads).
#[derive(Debug, Deserialize)]
struct TokenBody {
    token: TokenData,
}

#[derive(Debug, Deserialize)]
struct TokenData {
    expires_at: String,
    user: Named,
    #[serde(default)]
    project: Option<ProjectData>,
    #[serde(default)]
    domain: Option<Named>,
    #[serde(default)]
    system: Option<SystemData>,
    #[serde(default)]
    roles: Vec<RoleData>,
}

#[derive(Debug, Deserialize)]
struct Named {
    id: String,
}

#[derive(Debug, Deserialize)]
struct ProjectData {
    id: String,
    #[serde(default)]
    domain: Option<Named>,
}

#[derive(Debug, Deserialize)]
struct SystemData {
    #[serde(default)]
    all: bool,
}

#[derive(Debug, Deserialize)]
struct RoleData {
    name: String,
}

impl TokenData {
    /// The subject and expiry of a scoped token; `None` for an unscoped one.
    fn subject(self) -> Option<(Subject, Option<Expiry>)> {
        let system = self.system.is_some_and(|s| s.all);
        let (project_id, domain_id) = match (self.project, self.domain) {
            (Some(project), _) => (Some(project.id), project.domain.map(|d| d.id)),
            (None, Some(domain)) => (None, Some(domain.id)),
            (None, None) => (None, None),
        };
        if project_id.is_none() && domain_id.is_none() && !system {
            return None;
        }
        let subject = Subject {
            user_id: self.user.id,
            project_id,
            domain_id,
            system,
            roles: self.roles.into_iter().map(|r| r.name).collect(),
        };
        Some((subject, Expiry::parse(&self.expires_at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(user: &str) -> Arc<Subject> {
        Arc::new(Subject {
            user_id: user.into(),
            project_id: Some("p".into()),
            domain_id: Some("default".into()),
            system: false,
            roles: vec!["reader".into()],
        })
    }

    #[test]
    fn the_cache_believes_a_token_until_its_deadline_and_stays_bounded() {
        let t0 = Instant::now();
        let mut cache = TokenCache::new(2);
        let a = TokenCache::key("a", false);
        cache.insert(a, subject("a"), t0 + Duration::from_secs(2), t0);
        assert_eq!(
            cache.get(&a, t0 + Duration::from_secs(1)),
            Some(subject("a"))
        );
        assert_eq!(cache.get(&a, t0 + Duration::from_secs(2)), None);
        assert_ne!(
            a,
            TokenCache::key("a", true),
            "allowing expired tokens is cached apart"
        );
        let (b, c) = (TokenCache::key("b", false), TokenCache::key("c", false));
        cache.insert(b, subject("b"), t0 + Duration::from_secs(10), t0);
        // Full: the expired entry goes first.
        cache.insert(
            c,
            subject("c"),
            t0 + Duration::from_secs(10),
            t0 + Duration::from_secs(3),
        );
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&b, t0).is_some() && cache.get(&c, t0).is_some());
        cache.insert(a, subject("a"), t0 + Duration::from_secs(10), t0);
        assert_eq!(cache.len(), 2, "never beyond its capacity");
        let mut off = TokenCache::new(0);
        off.insert(a, subject("a"), t0 + Duration::from_secs(10), t0);
        assert!(off.is_empty());
    }

    #[test]
    fn tokens_are_read_by_their_scope_and_unscoped_ones_refused() {
        let parse = |text: &str| {
            serde_json::from_str::<TokenBody>(text)
                .expect("token")
                .token
                .subject()
        };
        let (project, expiry) = parse(
            r#"{"token":{"expires_at":"2030-01-01T00:00:00.000000Z","user":{"id":"u"},
                "project":{"id":"p","domain":{"id":"d"}},"roles":[{"id":"1","name":"member"},{"id":"2","name":"reader"}]}}"#,
        )
        .expect("scoped");
        assert_eq!(project.project_id.as_deref(), Some("p"));
        assert_eq!(project.domain_id.as_deref(), Some("d"));
        assert_eq!(project.roles, ["member", "reader"]);
        assert!(!project.system);
        assert_eq!(expiry, Expiry::parse("2030-01-01T00:00:00Z"));
        let (system, _) = parse(
            r#"{"token":{"expires_at":"2030-01-01T00:00:00Z","user":{"id":"u"},"system":{"all":true},"roles":[{"name":"admin"}]}}"#,
        )
        .expect("system");
        assert!(system.system && system.project_id.is_none());
        assert!(
            parse(
                r#"{"token":{"expires_at":"2030-01-01T00:00:00Z","user":{"id":"u"},"roles":[]}}"#
            )
            .is_none(),
            "unscoped"
        );
        assert_eq!(
            Expiry(10_000_000).duration_since_micros(4_000_000),
            Duration::from_secs(6)
        );
        assert_eq!(Expiry(1).duration_since_micros(5), Duration::ZERO);
    }

    #[test]
    fn secrets_never_show() {
        let credentials = Credentials::ApplicationCredential {
            id: "id".into(),
            secret: Secret::new("hunter2"),
        };
        assert!(!format!("{credentials:?}").contains("hunter2"));
        let body = serde_json::to_string(&AuthRequest::of(&credentials)).expect("json");
        assert!(body.contains("\"application_credential\""), "{body}");
        let password = Credentials::Password {
            username: "berth".into(),
            user_domain: DomainRef::Id("default".into()),
            password: Secret::new("pw"),
            project_name: "service".into(),
            project_domain: DomainRef::Name("Default".into()),
        };
        let body = serde_json::to_string(&AuthRequest::of(&password)).expect("json");
        assert!(
            body.contains(r#""scope":{"project":{"name":"service","domain":{"name":"Default"}}}"#),
            "{body}"
        );
    }
}
