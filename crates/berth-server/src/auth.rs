//! Authentication and roles: who is calling, resolved once per request from the configured mode.
//!
//! Every mode ends in the same [`Identity`], built by [`Identity::from_claims`] from what the
//! mode learned (a token file's entry, a trusted proxy's headers, a Keystone token), so that one
//! authorization model serves them all.

use crate::keystone::{Keystone, KeystoneError};
use anyhow::Context as _;
use axum::http::HeaderMap;
use clap::ValueEnum;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// How requests are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Every request is an admin (and a service); `X-Auth-Token` is ignored.
    Noauth,
    /// Placement's test mode: `X-Auth-Token: USER[:PROJECT]` is believed as given (`admin` is
    /// an admin, anyone else has the roles `X-Roles` names, or none); no token is 401.
    Noauth2,
    /// `X-Auth-Token` must name a token in the tokens file.
    Token,
    /// Identity comes from `X-Project-Id`, `X-User-Id`, `X-Roles` (keystonemiddleware).
    Headers,
    /// `X-Auth-Token` is a Keystone token, validated by berth against Keystone's v3 API.
    Keystone,
}

impl AuthMode {
    /// Whether the mode believes whoever calls, so that it may only listen on loopback.
    pub fn trusts_anyone(self) -> bool {
        matches!(self, AuthMode::Noauth | AuthMode::Noauth2)
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::Noauth => "noauth",
            AuthMode::Noauth2 => "noauth2",
            AuthMode::Token => "token",
            AuthMode::Headers => "headers",
            AuthMode::Keystone => "keystone",
        }
    }
}

/// A role berth knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything, every project.
    Admin,
    /// Read and write within the own project.
    Member,
    /// Read within the own project.
    Reader,
    /// An OpenStack service calling berth on its users' behalf (Nova calling Placement).
    Service,
}

impl Role {
    fn parse(name: &str) -> Option<Role> {
        match name.trim().to_ascii_lowercase().as_str() {
            "admin" => Some(Role::Admin),
            "member" | "_member_" => Some(Role::Member),
            "reader" => Some(Role::Reader),
            "service" => Some(Role::Service),
            _ => None,
        }
    }
}

/// The caller of one request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// Project (tenant) id; empty for a caller scoped to a domain or the system.
    pub project_id: String,
    /// User id.
    pub user_id: String,
    /// Roles berth recognises (others are dropped).
    pub roles: Vec<Role>,
    /// The project's domain, or the domain a domain-scoped caller acts in, when known.
    pub domain_id: Option<String>,
    /// Whether the caller is scoped to the whole system (Keystone's `system: all`).
    pub system_scope: bool,
}

/// What an authentication mode learned about a caller, before berth reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Claims<'a> {
    /// The project of a project-scoped caller.
    pub project_id: Option<&'a str>,
    /// The user.
    pub user_id: &'a str,
    /// Role names as given (unknown ones are dropped).
    pub roles: &'a [&'a str],
    /// The domain, when known.
    pub domain_id: Option<&'a str>,
    /// Scoped to the whole system.
    pub system_scope: bool,
}

impl Identity {
    /// The identity every `noauth` request gets: an admin and a service, so that it passes
    /// every rule (Placement's reshaper is a service's alone).
    pub fn noauth_admin() -> Identity {
        Identity {
            project_id: "admin".into(),
            user_id: "admin".into(),
            roles: vec![Role::Admin, Role::Service],
            ..Identity::default()
        }
    }

    /// The one way every mode turns what it learned into a caller: roles berth does not know
    /// are dropped; a caller with no project acts in none (see [`Identity::has_project`]).
    pub fn from_claims(claims: Claims<'_>) -> Identity {
        let mut roles: Vec<Role> = Vec::with_capacity(claims.roles.len());
        for role in claims.roles.iter().filter_map(|name| Role::parse(name)) {
            if !roles.contains(&role) {
                roles.push(role);
            }
        }
        Identity {
            project_id: claims.project_id.unwrap_or_default().to_owned(),
            user_id: claims.user_id.to_owned(),
            roles,
            domain_id: claims.domain_id.map(str::to_owned),
            system_scope: claims.system_scope,
        }
    }

    /// Whether the caller acts in a project (a domain- or system-scoped caller does not, so
    /// only an admin among them may touch projects' objects).
    pub fn has_project(&self) -> bool {
        !self.project_id.is_empty()
    }

    /// Whether the caller is an admin.
    pub fn is_admin(&self) -> bool {
        self.roles.contains(&Role::Admin)
    }
}

/// Why a request could not be authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No credentials.
    Missing,
    /// Credentials that name nobody.
    Invalid,
    /// Identity headers from a peer that is not a trusted proxy.
    Untrusted,
    /// The identity service could not say who the caller is (slow, down, or refusing berth's
    /// own credentials): 503, never a pass.
    Unavailable,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    tokens: Vec<TokenEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    token: String,
    project_id: String,
    user_id: String,
    roles: Vec<String>,
}

/// Resolves identities according to the configured mode.
#[derive(Debug, Clone)]
pub struct Authenticator {
    mode: AuthMode,
    tokens: HashMap<String, Identity>,
    trusted: Vec<ipnet::IpNet>,
    keystone: Option<Arc<Keystone>>,
}

impl Authenticator {
    /// Builds the authenticator, reading the token file in `token` mode.
    pub fn new(mode: AuthMode, tokens: Option<&Path>) -> anyhow::Result<Authenticator> {
        let tokens = match (mode, tokens) {
            (AuthMode::Token, Some(path)) => load_tokens(path)?,
            (AuthMode::Token, None) => anyhow::bail!("--auth token needs --tokens FILE"),
            _ => HashMap::new(),
        };
        Ok(Authenticator {
            mode,
            tokens,
            trusted: Vec::new(),
            keystone: None,
        })
    }

    /// Sets the validator `keystone` mode asks.
    pub fn with_keystone(mut self, keystone: Arc<Keystone>) -> Authenticator {
        self.keystone = Some(keystone);
        self
    }

    /// The validator of `keystone` mode.
    pub fn keystone(&self) -> Option<&Keystone> {
        self.keystone.as_deref()
    }

    /// Sets the peers whose identity headers `headers` mode believes.
    pub fn with_trusted_proxies(mut self, trusted: Vec<ipnet::IpNet>) -> Authenticator {
        self.trusted = trusted;
        self
    }

    /// Whether a request from `peer` may be identified: in `headers` mode only a trusted
    /// proxy's requests are (anyone could send the headers themselves).
    pub fn trusts(&self, peer: Option<std::net::IpAddr>) -> Result<(), AuthFailure> {
        let trusted = self.mode != AuthMode::Headers
            || peer.is_some_and(|ip| self.trusted.iter().any(|net| net.contains(&ip)));
        match trusted {
            true => Ok(()),
            false => Err(AuthFailure::Untrusted),
        }
    }

    /// The configured mode.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// The identity of a request with these headers (in `keystone` mode, validated by
    /// Keystone unless the cache still believes the token).
    pub async fn identify(&self, headers: &HeaderMap) -> Result<Identity, AuthFailure> {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        match self.mode {
            AuthMode::Noauth => Ok(Identity::noauth_admin()),
            AuthMode::Noauth2 => {
                let token = header("x-auth-token").ok_or(AuthFailure::Missing)?;
                let (user_id, project) = token.split_once(':').unwrap_or((token, ""));
                let project = Some(project).filter(|p| !p.is_empty()).unwrap_or(user_id);
                let system_scope = header("openstack-system-scope").is_some_and(|s| s == "all");
                let project_id = header("x-project-id")
                    .or_else(|| header("x-tenant-id"))
                    .or((!system_scope).then_some(project));
                let roles: Vec<&str> = match header("x-roles") {
                    Some(text) => text.split(',').collect(),
                    None if user_id == "admin" => vec!["admin"],
                    None => Vec::new(),
                };
                Ok(Identity::from_claims(Claims {
                    project_id,
                    user_id,
                    roles: &roles,
                    domain_id: None,
                    system_scope,
                }))
            }
            AuthMode::Token => {
                let token = header("x-auth-token").ok_or(AuthFailure::Missing)?;
                self.tokens.get(token).cloned().ok_or(AuthFailure::Invalid)
            }
            AuthMode::Headers => {
                let system_scope = header("x-system-scope").is_some_and(|s| s == "all");
                let project_id = header("x-project-id").or_else(|| header("x-tenant-id"));
                if project_id.is_none() && !system_scope {
                    return Err(AuthFailure::Missing);
                }
                let user_id = header("x-user-id").ok_or(AuthFailure::Missing)?;
                let roles: Vec<&str> = header("x-roles")
                    .map(|text| text.split(',').collect())
                    .unwrap_or_default();
                Ok(Identity::from_claims(Claims {
                    project_id,
                    user_id,
                    roles: &roles,
                    domain_id: header("x-project-domain-id").or_else(|| header("x-domain-id")),
                    system_scope,
                }))
            }
            AuthMode::Keystone => {
                let keystone = self.keystone.as_deref().ok_or(AuthFailure::Unavailable)?;
                let token = header("x-auth-token").ok_or(AuthFailure::Missing)?;
                // As keystonemiddleware: a valid service token (an OpenStack service acting for
                // the user) lets a user token past its expiry, within Keystone's window.
                let allow_expired = match header("x-service-token") {
                    None => false,
                    Some(service) => {
                        let subject = keystone
                            .validate(service, false)
                            .await
                            .map_err(failure_of)?;
                        let roles = &keystone.settings().service_token_roles;
                        if !subject.roles.iter().any(|r| roles.contains(r)) {
                            return Err(AuthFailure::Invalid);
                        }
                        true
                    }
                };
                let subject = keystone
                    .validate(token, allow_expired)
                    .await
                    .map_err(failure_of)?;
                let roles: Vec<&str> = subject.roles.iter().map(String::as_str).collect();
                Ok(Identity::from_claims(Claims {
                    project_id: subject.project_id.as_deref(),
                    user_id: &subject.user_id,
                    roles: &roles,
                    domain_id: subject.domain_id.as_deref(),
                    system_scope: subject.system,
                }))
            }
        }
    }
}

/// What a refusal of Keystone means for the caller.
fn failure_of(error: KeystoneError) -> AuthFailure {
    match error {
        KeystoneError::Invalid => AuthFailure::Invalid,
        KeystoneError::Unavailable(reason) => {
            tracing::warn!(%reason, "Keystone could not validate a token");
            AuthFailure::Unavailable
        }
    }
}

fn load_tokens(path: &Path) -> anyhow::Result<HashMap<String, Identity>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading token file {}", path.display()))?;
    let file: TokenFile =
        toml::from_str(&text).with_context(|| format!("parsing token file {}", path.display()))?;
    let mut out = HashMap::new();
    for entry in file.tokens {
        anyhow::ensure!(
            !entry.token.is_empty(),
            "token file {}: empty token",
            path.display()
        );
        let roles: Vec<&str> = entry.roles.iter().map(String::as_str).collect();
        let identity = Identity::from_claims(Claims {
            project_id: Some(&entry.project_id),
            user_id: &entry.user_id,
            roles: &roles,
            ..Claims::default()
        });
        anyhow::ensure!(
            out.insert(entry.token, identity).is_none(),
            "token file {}: duplicate token",
            path.display()
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("header value"));
        }
        map
    }

    #[tokio::test]
    async fn each_mode_resolves_or_refuses() {
        let noauth = Authenticator::new(AuthMode::Noauth, None).expect("noauth");
        let anyone = noauth
            .identify(&headers(&[("x-auth-token", "notused")]))
            .await
            .expect("admin");
        assert!(anyone.is_admin());
        // Every rule passes, Placement's service-only reshaper too.
        assert!(crate::policy::Rule::SERVICE_ONLY.admits(&anyone, None));

        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, "[[tokens]]\ntoken = \"t1\"\nproject_id = \"p1\"\nuser_id = \"u1\"\nroles = [\"member\"]\n")
            .expect("write");
        let token = Authenticator::new(AuthMode::Token, Some(&file)).expect("token");
        assert_eq!(
            token.identify(&HeaderMap::new()).await,
            Err(AuthFailure::Missing)
        );
        assert_eq!(
            token.identify(&headers(&[("x-auth-token", "nope")])).await,
            Err(AuthFailure::Invalid)
        );
        let member = token
            .identify(&headers(&[("x-auth-token", "t1")]))
            .await
            .expect("known");
        assert_eq!(member.project_id, "p1");
        assert!(!member.is_admin());

        let trusted = Authenticator::new(AuthMode::Headers, None).expect("headers");
        assert_eq!(
            trusted.identify(&headers(&[("x-user-id", "u")])).await,
            Err(AuthFailure::Missing)
        );
        let admin = trusted
            .identify(&headers(&[
                ("x-project-id", "p"),
                ("x-user-id", "u"),
                ("x-roles", "reader,admin"),
            ]))
            .await
            .expect("identified");
        assert!(admin.is_admin());
        let system = trusted
            .identify(&headers(&[
                ("x-system-scope", "all"),
                ("x-user-id", "u"),
                ("x-roles", "reader"),
            ]))
            .await
            .expect("system scope");
        assert!(system.system_scope && !system.has_project());
    }

    #[tokio::test]
    async fn noauth2_believes_the_token_as_placement_does() {
        let noauth2 = Authenticator::new(AuthMode::Noauth2, None).expect("noauth2");
        assert_eq!(
            noauth2.identify(&HeaderMap::new()).await,
            Err(AuthFailure::Missing)
        );
        let admin = noauth2
            .identify(&headers(&[("x-auth-token", "admin")]))
            .await
            .expect("admin");
        assert!(admin.is_admin());
        assert_eq!(admin.project_id, "admin");
        let user = noauth2
            .identify(&headers(&[("x-auth-token", "alice:p7")]))
            .await
            .expect("user");
        assert_eq!(
            (user.user_id.as_str(), user.project_id.as_str()),
            ("alice", "p7")
        );
        assert!(user.roles.is_empty(), "no roles unless named");
        let reader = noauth2
            .identify(&headers(&[
                ("x-auth-token", "user"),
                ("x-roles", "reader"),
                ("x-project-id", "p9"),
            ]))
            .await
            .expect("reader");
        assert_eq!(
            (reader.roles.as_slice(), reader.project_id.as_str()),
            (&[Role::Reader][..], "p9")
        );
        let system = noauth2
            .identify(&headers(&[
                ("x-auth-token", "user"),
                ("x-roles", "admin,member,reader"),
                ("openstack-system-scope", "all"),
            ]))
            .await
            .expect("system");
        assert!(system.system_scope && !system.has_project() && system.is_admin());
    }

    #[test]
    fn every_mode_reads_roles_the_same_way() {
        let identity = Identity::from_claims(Claims {
            project_id: Some("p"),
            user_id: "u",
            roles: &["Member", " reader", "observer", "_member_"],
            domain_id: Some("default"),
            system_scope: false,
        });
        assert_eq!(identity.roles, [Role::Member, Role::Reader]);
        assert!(identity.has_project() && !identity.is_admin());
        assert_eq!(identity.domain_id.as_deref(), Some("default"));
    }
}
