//! Authentication and roles: who is calling, resolved once per request from the configured mode.

use anyhow::Context as _;
use axum::http::HeaderMap;
use clap::ValueEnum;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// How requests are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Every request is an admin; `X-Auth-Token` is ignored.
    Noauth,
    /// `X-Auth-Token` must name a token in the tokens file.
    Token,
    /// Identity comes from `X-Project-Id`, `X-User-Id`, `X-Roles` (keystonemiddleware).
    Headers,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Project (tenant) id.
    pub project_id: String,
    /// User id.
    pub user_id: String,
    /// Roles berth recognises (others are dropped).
    pub roles: Vec<Role>,
}

impl Identity {
    /// The identity every `noauth` request gets.
    pub fn noauth_admin() -> Identity {
        Identity {
            project_id: "admin".into(),
            user_id: "admin".into(),
            roles: vec![Role::Admin],
        }
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
        })
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

    /// The identity of a request with these headers.
    pub fn identify(&self, headers: &HeaderMap) -> Result<Identity, AuthFailure> {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        match self.mode {
            AuthMode::Noauth => Ok(Identity::noauth_admin()),
            AuthMode::Token => {
                let token = header("x-auth-token").ok_or(AuthFailure::Missing)?;
                self.tokens.get(token).cloned().ok_or(AuthFailure::Invalid)
            }
            AuthMode::Headers => {
                let project_id = header("x-project-id")
                    .or_else(|| header("x-tenant-id"))
                    .ok_or(AuthFailure::Missing)?;
                let user_id = header("x-user-id").ok_or(AuthFailure::Missing)?;
                let roles = header("x-roles").map(parse_roles).unwrap_or_default();
                Ok(Identity {
                    project_id: project_id.to_owned(),
                    user_id: user_id.to_owned(),
                    roles,
                })
            }
        }
    }
}

fn parse_roles(text: &str) -> Vec<Role> {
    text.split(',').filter_map(Role::parse).collect()
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
        let roles = entry.roles.iter().filter_map(|r| Role::parse(r)).collect();
        let identity = Identity {
            project_id: entry.project_id,
            user_id: entry.user_id,
            roles,
        };
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

    #[test]
    fn each_mode_resolves_or_refuses() {
        let noauth = Authenticator::new(AuthMode::Noauth, None).expect("noauth");
        assert!(
            noauth
                .identify(&headers(&[("x-auth-token", "notused")]))
                .expect("admin")
                .is_admin()
        );

        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, "[[tokens]]\ntoken = \"t1\"\nproject_id = \"p1\"\nuser_id = \"u1\"\nroles = [\"member\"]\n")
            .expect("write");
        let token = Authenticator::new(AuthMode::Token, Some(&file)).expect("token");
        assert_eq!(token.identify(&HeaderMap::new()), Err(AuthFailure::Missing));
        assert_eq!(
            token.identify(&headers(&[("x-auth-token", "nope")])),
            Err(AuthFailure::Invalid)
        );
        let member = token
            .identify(&headers(&[("x-auth-token", "t1")]))
            .expect("known");
        assert_eq!(member.project_id, "p1");
        assert!(!member.is_admin());

        let trusted = Authenticator::new(AuthMode::Headers, None).expect("headers");
        assert_eq!(
            trusted.identify(&headers(&[("x-user-id", "u")])),
            Err(AuthFailure::Missing)
        );
        let admin = trusted
            .identify(&headers(&[
                ("x-project-id", "p"),
                ("x-user-id", "u"),
                ("x-roles", "reader,admin"),
            ]))
            .expect("identified");
        assert!(admin.is_admin());
    }
}
