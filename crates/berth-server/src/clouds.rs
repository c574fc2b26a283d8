//! Provider clouds, the I/O side: authenticating against another OpenStack cloud's Keystone
//! (v3 password authentication, scoped to the project Promise calls the tenant), finding its
//! Placement and Compute endpoints in the token's service catalog, and sealing the credentials
//! berth keeps (ChaCha20-Poly1305 with the key of `[provider_clouds] credential_key`, the
//! provider's id bound in as associated data, so sealed credentials name their provider).
//!
//! Nothing here logs or answers a password: a [`Secret`] prints as `***`, and the errors say
//! what Keystone answered, never what was sent.

use crate::keystone::Secret;
use aws_lc_rs::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom as _, SystemRandom};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use uuid::Uuid;

/// The longest one call to a provider cloud may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The prefix of the sealed text this build writes (the format's version).
const SEALED_PREFIX: &str = "v1:";

/// The key provider credentials are sealed with: 32 bytes, given as 64 hexadecimal digits.
#[derive(Clone)]
pub struct CredentialKey([u8; 32]);

impl std::fmt::Debug for CredentialKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CredentialKey(***)")
    }
}

impl CredentialKey {
    /// Reads the key from 64 hexadecimal digits.
    pub fn from_hex(text: &str) -> Option<CredentialKey> {
        let bytes = unhex(text.trim())?;
        Some(CredentialKey(bytes.try_into().ok()?))
    }

    fn key(&self) -> LessSafeKey {
        // A 32-byte key is what ChaCha20-Poly1305 takes: this cannot fail.
        LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &self.0).expect("a 32-byte key"))
    }

    /// Seals `credentials` for provider `id`: `v1:` and the hexadecimal nonce, ciphertext and tag.
    pub fn seal(&self, id: Uuid, credentials: &Credentials) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the system's random number generator");
        let mut data = serde_json::to_vec(credentials).expect("credentials encode");
        self.key()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(id.as_bytes()),
                &mut data,
            )
            .expect("sealing fits in memory");
        format!("{SEALED_PREFIX}{}{}", hex(&nonce), hex(&data))
    }

    /// Opens what [`seal`](Self::seal) sealed for `id`; `None` when the text was sealed with
    /// another key, for another provider, or changed.
    pub fn open(&self, id: Uuid, sealed: &str) -> Option<Credentials> {
        let bytes = unhex(sealed.strip_prefix(SEALED_PREFIX)?)?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut data = data.to_vec();
        let plain = self
            .key()
            .open_in_place(nonce, Aad::from(id.as_bytes()), &mut data)
            .ok()?;
        serde_json::from_slice(plain).ok()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).ok())
        .collect()
}

/// What berth keeps sealed: the password (the user, project and endpoint are kept in clear).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The user's password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(***)")
    }
}

/// Why a cloud could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// Keystone could not be reached, or did not answer as Keystone.
    #[error("{0}")]
    Unreachable(String),
    /// Keystone refused the credentials.
    #[error("{0}")]
    Refused(String),
    /// The catalog has no Placement endpoint (in the region asked).
    #[error("{0}")]
    NoPlacement(String),
}

/// Keystone's v3 root for the endpoint a request gives, and a note when it was changed: the
/// v2.0 token URL Promise's examples give (`.../v2.0/tokens`), a `.../v2.0` root or a bare
/// host become `.../v3`; a `.../v3/auth/tokens` URL becomes its root. `None`: not an http(s)
/// URL.
pub fn keystone_v3(endpoint: &str) -> Option<(String, Option<String>)> {
    let mut url = url::Url::parse(endpoint.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return None;
    }
    url.set_query(None);
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/').to_owned();
    let (root, mapped) = if let Some(base) = path.strip_suffix("/v3/auth/tokens") {
        (format!("{base}/v3"), false)
    } else if path.ends_with("/v3") {
        (path.clone(), false)
    } else if let Some(base) = path
        .strip_suffix("/v2.0/tokens")
        .or_else(|| path.strip_suffix("/v2.0"))
    {
        (format!("{base}/v3"), true)
    } else {
        (format!("{path}/v3"), true)
    };
    url.set_path(&root);
    let v3 = url.as_str().trim_end_matches('/').to_owned();
    let note = mapped.then(|| {
        format!(
            "endpoint {} is taken as Keystone's v3 API at {v3} (berth authenticates with Keystone v3)",
            endpoint.trim()
        )
    });
    Some((v3, note))
}

/// A cloud berth authenticated against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    /// The token Keystone issued.
    pub token: Secret,
    /// The user the token was issued to: its id (its name when Keystone answers none).
    pub user_id: String,
    /// The project the token is scoped to: its id and name.
    pub project_id: String,
    /// Its name.
    pub project_name: String,
    /// The region whose endpoints were chosen.
    pub region: Option<String>,
    /// Placement's endpoint.
    pub placement_url: String,
    /// Compute's endpoint, if the catalog has one.
    pub compute_url: Option<String>,
}

/// Talks to provider clouds.
#[derive(Debug, Clone)]
pub struct CloudClient {
    http: reqwest::Client,
    key: Option<CredentialKey>,
}

impl CloudClient {
    /// A client sealing credentials with `key` (none: no cloud can be registered).
    pub fn new(key: Option<CredentialKey>) -> anyhow::Result<CloudClient> {
        let builder = || {
            reqwest::Client::builder()
                .timeout(CALL_TIMEOUT)
                .connect_timeout(CALL_TIMEOUT)
        };
        let http = match builder().build() {
            Ok(http) => http,
            Err(error) => {
                // Without a usable system store (a minimal container), berth still starts: it
                // reaches clouds over plain http only, and says so.
                tracing::warn!(
                    error = %format_args!("{:#}", anyhow::Error::from(error)),
                    "the system's trusted roots are unusable: provider clouds can be reached over http only"
                );
                builder().tls_certs_only(Vec::new()).build()?
            }
        };
        Ok(CloudClient { http, key })
    }

    /// `method url` with `token`, Placement's `version` and `body` (JSON) when given: the
    /// status and at most `max_bytes` of the answer (a longer answer is an error, as is a
    /// failed request).
    pub async fn placement_call(
        &self,
        method: reqwest::Method,
        url: &str,
        token: &Secret,
        version: &str,
        body: Option<&serde_json::Value>,
        max_bytes: usize,
    ) -> Result<(u16, Vec<u8>), String> {
        let unreachable = |error: reqwest::Error| {
            format!(
                "Placement at {url} could not be reached: {:#}",
                anyhow::Error::from(error.without_url())
            )
        };
        let mut request = self
            .http
            .request(method.clone(), url)
            .header("X-Auth-Token", token.expose())
            .header("OpenStack-API-Version", version)
            .header("Accept", "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > max_bytes {
                return Err(format!(
                    "Placement's answer to {method} {url} is larger than {max_bytes} bytes"
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    }

    /// The key credentials are sealed with, when configured.
    pub fn key(&self) -> Option<&CredentialKey> {
        self.key.as_ref()
    }

    /// Authenticates `username` in project `project_id` or `project_name` (default domain)
    /// against Keystone v3 at `auth_url`, and finds Placement (and Compute) in `region` (the
    /// first region offering Placement when `None`).
    pub async fn connect(
        &self,
        auth_url: &str,
        username: &str,
        password: &Secret,
        project: &berth_core::model::cloud::CloudProject,
        region: Option<&str>,
    ) -> Result<Connected, ConnectError> {
        let scope = match (&project.id, &project.name) {
            (Some(id), _) => serde_json::json!({"project": {"id": id}}),
            (None, Some(name)) => {
                serde_json::json!({"project": {"name": name, "domain": {"id": "default"}}})
            }
            (None, None) => serde_json::Value::Null,
        };
        let mut auth = serde_json::json!({"identity": {"methods": ["password"], "password": {
            "user": {"name": username, "domain": {"id": "default"}, "password": password.expose()}}}});
        if !scope.is_null() {
            auth["scope"] = scope;
        }
        let response = self
            .http
            .post(format!("{auth_url}/auth/tokens"))
            .json(&serde_json::json!({ "auth": auth }))
            .send()
            .await
            .map_err(|error| {
                ConnectError::Unreachable(format!(
                    "Keystone at {auth_url} could not be reached: {:#}",
                    anyhow::Error::from(error.without_url())
                ))
            })?;
        let status = response.status();
        if matches!(status.as_u16(), 401 | 403) {
            return Err(ConnectError::Refused(format!(
                "Keystone at {auth_url} refused the credentials of user {username} ({status})"
            )));
        }
        if status.as_u16() != 201 {
            return Err(ConnectError::Unreachable(format!(
                "Keystone at {auth_url} answered {status} to a v3 password authentication"
            )));
        }
        let token = response
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(Secret::new)
            .ok_or_else(|| {
                ConnectError::Unreachable(format!("{auth_url} issued no X-Subject-Token"))
            })?;
        let body: TokenBody = response.json().await.map_err(|_| {
            ConnectError::Unreachable(format!("{auth_url} did not answer as Keystone v3"))
        })?;
        let Some(scoped) = body.token.project else {
            return Err(ConnectError::Refused(format!(
                "Keystone at {auth_url} gave user {username} no project-scoped token (name the tenant)"
            )));
        };
        let (region, placement_url) = endpoint(&body.token.catalog, "placement", region)
            .ok_or_else(|| {
                ConnectError::NoPlacement(match region {
                    Some(region) => format!(
                        "the service catalog of {auth_url} has no placement endpoint in region {region}"
                    ),
                    None => format!("the service catalog of {auth_url} has no placement endpoint"),
                })
            })?;
        let compute_url = endpoint(&body.token.catalog, "compute", Some(&region)).map(|(_, u)| u);
        let user_id = body
            .token
            .user
            .map_or_else(|| username.to_owned(), |user| user.id);
        Ok(Connected {
            token,
            user_id,
            project_id: scoped.id,
            project_name: scoped.name,
            region: Some(region).filter(|r| !r.is_empty()),
            placement_url,
            compute_url,
        })
    }
}

/// The endpoint of service `kind` in `region` (any region when `None`), public first, then
/// internal, then admin: its region and URL (without a trailing slash).
fn endpoint(catalog: &[Service], kind: &str, region: Option<&str>) -> Option<(String, String)> {
    let endpoints: Vec<&Endpoint> = catalog
        .iter()
        .filter(|s| s.kind == kind)
        .flat_map(|s| &s.endpoints)
        .filter(|e| {
            region
                .is_none_or(|r| e.region_id.as_deref() == Some(r) || e.region.as_deref() == Some(r))
        })
        .collect();
    ["public", "internal", "admin"]
        .iter()
        .find_map(|interface| {
            endpoints
                .iter()
                .find(|e| e.interface == *interface)
                .map(|e| {
                    let region = e
                        .region_id
                        .clone()
                        .or_else(|| e.region.clone())
                        .unwrap_or_default();
                    (region, e.url.trim_end_matches('/').to_owned())
                })
        })
}

/// A token as Keystone v3 describes it (the members berth reads).
#[derive(Debug, Deserialize)]
struct TokenBody {
    token: TokenData,
}

#[derive(Debug, Deserialize)]
struct TokenData {
    #[serde(default)]
    project: Option<ProjectData>,
    #[serde(default)]
    user: Option<UserData>,
    #[serde(default)]
    catalog: Vec<Service>,
}

#[derive(Debug, Deserialize)]
struct ProjectData {
    id: String,
    name: String,
}

#[derive(Debug, Deserialize)]
struct UserData {
    id: String,
}

#[derive(Debug, Deserialize)]
struct Service {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
}

#[derive(Debug, Deserialize)]
struct Endpoint {
    interface: String,
    url: String,
    #[serde(default)]
    region_id: Option<String>,
    #[serde(default)]
    region: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_credentials_open_only_with_their_key_and_provider() {
        let key = CredentialKey::from_hex(&"ab".repeat(32)).expect("key");
        let other = CredentialKey::from_hex(&"cd".repeat(32)).expect("key");
        let id = Uuid::from_u128(7);
        let credentials = Credentials {
            password: "hunter2".to_owned(),
        };
        let sealed = key.seal(id, &credentials);
        assert!(!sealed.contains("hunter2"), "{sealed}");
        assert_ne!(
            sealed,
            key.seal(id, &credentials),
            "a fresh nonce each time"
        );
        assert_eq!(key.open(id, &sealed), Some(credentials));
        assert_eq!(other.open(id, &sealed), None, "another key");
        assert_eq!(
            key.open(Uuid::from_u128(8), &sealed),
            None,
            "another provider"
        );
        let mut changed = sealed.clone();
        changed.pop();
        changed.push('0');
        assert!(
            changed == sealed || key.open(id, &changed).is_none(),
            "changed"
        );
        assert!(CredentialKey::from_hex("abcd").is_none(), "too short");
        assert!(
            CredentialKey::from_hex(&"zz".repeat(32)).is_none(),
            "not hex"
        );
        assert_eq!(format!("{key:?}"), "CredentialKey(***)");
        assert!(
            !format!(
                "{:?}",
                Credentials {
                    password: "hunter2".into()
                }
            )
            .contains("hunter2")
        );
    }

    #[test]
    fn keystone_endpoints_are_taken_as_v3() {
        let v3 = |e: &str| keystone_v3(e).map(|(url, note)| (url, note.is_some()));
        assert_eq!(
            v3("http://10.0.2.15:5000/v2.0/tokens"),
            Some(("http://10.0.2.15:5000/v3".to_owned(), true))
        );
        assert_eq!(
            v3("http://k:5000/v3"),
            Some(("http://k:5000/v3".to_owned(), false))
        );
        assert_eq!(
            v3("https://k/identity/v3/auth/tokens"),
            Some(("https://k/identity/v3".to_owned(), false))
        );
        assert_eq!(
            v3("http://k:5000/"),
            Some(("http://k:5000/v3".to_owned(), true))
        );
        assert_eq!(v3("ftp://k/v3"), None);
        assert_eq!(v3("keystone"), None);
    }
}
