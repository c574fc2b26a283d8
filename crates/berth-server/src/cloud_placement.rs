//! Calls to provider clouds' Placement, shared by the synchronisation (which reads) and the
//! Promise instance routes (which write an instance's allocation where berth placed it).
//!
//! One token per cloud is kept between calls and renewed when Placement answers 401 (the sealed
//! password opens with the configured key). Writes are made as Nova's scheduler makes them, at
//! the microversion berth reads with: `PUT /allocations/{consumer}` with the consumer's
//! generation (`null` for a new one), its project, user and type, retried with the consumer's
//! current generation when Placement answers `placement.concurrent_update`. No call runs under
//! berth's writer lock.

use crate::clouds::CloudClient;
use crate::keystone::Secret;
use berth_core::limits::PROVIDER_CLOUD_ANSWER_BYTES_MAX;
use berth_core::model::cloud::{ProviderCloud, REMOTE_CONSUMER_TYPE};
use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// The Placement microversion berth reads and writes with (Nova's).
pub const PLACEMENT_VERSION: &str = "placement 1.39";
/// How many times an allocation write is tried when Placement answers that the consumer
/// changed concurrently (Nova's scheduler tries a claim as often).
pub const CLAIM_ATTEMPTS_MAX: u32 = 4;
/// The pause between two such tries.
const CLAIM_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A token and what its catalog and body gave.
#[derive(Clone)]
struct Session {
    token: Secret,
    placement_url: String,
    project_id: String,
    user_id: String,
}

/// Why a cloud did not take an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimError {
    /// Placement refused it (the capacity is taken there, or the provider is gone): its words.
    Refused(String),
    /// The cloud could not be reached, or did not answer as Placement.
    Unreachable(String),
}

/// Provider clouds' Placement, with a token per cloud.
pub struct CloudPlacement {
    client: Arc<CloudClient>,
    sessions: Mutex<HashMap<Uuid, Session>>,
    wake: Notify,
}

impl std::fmt::Debug for CloudPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudPlacement").finish_non_exhaustive()
    }
}

impl CloudPlacement {
    /// Calls through `client`.
    pub fn new(client: Arc<CloudClient>) -> CloudPlacement {
        CloudPlacement {
            client,
            sessions: Mutex::new(HashMap::new()),
            wake: Notify::new(),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Session>> {
        self.sessions
            .lock()
            .expect("invariant: the sessions' lock is never poisoned")
    }

    /// Asks the synchronisation to read the clouds now, not at its next interval (berth's view
    /// of a cloud turned out to be wrong).
    pub fn wake_sync(&self) {
        self.wake.notify_one();
    }

    /// Resolves when [`wake_sync`](Self::wake_sync) was called.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Forgets the token of cloud `id` (its next call authenticates again).
    pub fn forget(&self, id: Uuid) {
        self.sessions().remove(&id);
    }

    /// Forgets the tokens of clouds no longer registered.
    pub fn retain(&self, ids: &BTreeSet<Uuid>) {
        self.sessions().retain(|id, _| ids.contains(id));
    }

    /// Authenticates against the cloud's Keystone with its sealed password.
    async fn login(&self, cloud: &ProviderCloud) -> Result<Session, String> {
        let key = self
            .client
            .key()
            .ok_or("no [provider_clouds] credential_key is configured to open the credentials")?;
        let credentials = key
            .open(cloud.id, &cloud.sealed_credentials)
            .ok_or("the credentials do not open with the configured key")?;
        let connected = self
            .client
            .connect(
                &cloud.auth_url,
                &cloud.username,
                &Secret::new(credentials.password),
                &cloud.project,
                cloud.region.as_deref(),
            )
            .await
            .map_err(|error| error.to_string())?;
        Ok(Session {
            token: connected.token,
            placement_url: connected.placement_url,
            project_id: connected.project_id,
            user_id: connected.user_id,
        })
    }

    async fn session(&self, cloud: &ProviderCloud) -> Result<Session, String> {
        if let Some(session) = self.sessions().get(&cloud.id).cloned() {
            return Ok(session);
        }
        let session = self.login(cloud).await?;
        self.sessions().insert(cloud.id, session.clone());
        Ok(session)
    }

    /// `method path` on the cloud's Placement with `body`, authenticating first when needed and
    /// once more on a 401: the status, the answer and the session it was made with.
    async fn call(
        &self,
        cloud: &ProviderCloud,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Vec<u8>, Session), String> {
        for attempt in 0..2 {
            let session = self.session(cloud).await?;
            let url = format!("{}{path}", session.placement_url);
            let (status, answer) = self
                .client
                .placement_call(
                    method.clone(),
                    &url,
                    &session.token,
                    PLACEMENT_VERSION,
                    body,
                    PROVIDER_CLOUD_ANSWER_BYTES_MAX,
                )
                .await?;
            if status == 401 && attempt == 0 {
                self.forget(cloud.id);
                continue;
            }
            return Ok((status, answer, session));
        }
        Err(format!(
            "Placement refused a fresh token for {method} {path}"
        ))
    }

    /// `GET path` on the cloud's Placement, as `T`; any answer but 200 is an error.
    pub async fn get<T: DeserializeOwned>(
        &self,
        cloud: &ProviderCloud,
        path: &str,
    ) -> Result<T, String> {
        let (status, body, _) = self.call(cloud, Method::GET, path, None).await?;
        if status != 200 {
            return Err(format!("Placement answered {status} to GET {path}"));
        }
        serde_json::from_slice(&body).map_err(|error| {
            format!("Placement's answer to GET {path} is not as expected: {error}")
        })
    }

    /// Writes `amounts` on the cloud's provider `remote` for consumer `consumer` (an instance
    /// berth placed there), as Nova's scheduler claims an instance's resources.
    pub async fn claim(
        &self,
        cloud: &ProviderCloud,
        consumer: Uuid,
        remote: Uuid,
        amounts: &BTreeMap<String, u64>,
    ) -> Result<(), ClaimError> {
        let path = format!("/allocations/{consumer}");
        let mut generation = Value::Null;
        for attempt in 1..=CLAIM_ATTEMPTS_MAX {
            let session = self.session(cloud).await.map_err(ClaimError::Unreachable)?;
            let body = json!({
                "allocations": { remote.to_string(): { "resources": amounts } },
                "project_id": session.project_id,
                "user_id": session.user_id,
                "consumer_generation": generation,
                "consumer_type": REMOTE_CONSUMER_TYPE,
            });
            let (status, answer, _) = self
                .call(cloud, Method::PUT, &path, Some(&body))
                .await
                .map_err(ClaimError::Unreachable)?;
            match status {
                204 => return Ok(()),
                409 if error_code(&answer).as_deref() == Some("placement.concurrent_update")
                    && attempt < CLAIM_ATTEMPTS_MAX =>
                {
                    tokio::time::sleep(CLAIM_RETRY_PAUSE).await;
                    generation = self
                        .consumer_generation(cloud, consumer)
                        .await
                        .map_err(ClaimError::Unreachable)?;
                }
                400..=499 => {
                    return Err(ClaimError::Refused(format!(
                        "Placement answered {status} to PUT {path}: {}",
                        error_detail(&answer)
                    )));
                }
                _ => {
                    return Err(ClaimError::Unreachable(format!(
                        "Placement answered {status} to PUT {path}"
                    )));
                }
            }
        }
        Err(ClaimError::Refused(format!(
            "consumer {consumer} kept changing in Placement over {CLAIM_ATTEMPTS_MAX} tries"
        )))
    }

    /// The consumer's generation in the cloud's Placement (`null`: it has no allocation).
    async fn consumer_generation(
        &self,
        cloud: &ProviderCloud,
        consumer: Uuid,
    ) -> Result<Value, String> {
        #[derive(Deserialize)]
        struct Held {
            #[serde(default)]
            consumer_generation: Option<u64>,
        }
        let held: Held = self.get(cloud, &format!("/allocations/{consumer}")).await?;
        Ok(held.consumer_generation.map_or(Value::Null, Value::from))
    }

    /// Removes consumer `consumer`'s allocations from the cloud's Placement (none there is
    /// done too), as Nova does: an empty set of allocations written with the consumer's
    /// generation, tried again when the consumer changed meanwhile. (Unlike `DELETE`, this moves
    /// the providers' generations on, so the next read sees the capacity freed.)
    pub async fn release(&self, cloud: &ProviderCloud, consumer: Uuid) -> Result<(), String> {
        let path = format!("/allocations/{consumer}");
        for attempt in 1..=CLAIM_ATTEMPTS_MAX {
            let generation = self.consumer_generation(cloud, consumer).await?;
            if generation.is_null() {
                return Ok(());
            }
            let session = self.session(cloud).await?;
            let body = json!({
                "allocations": {},
                "project_id": session.project_id,
                "user_id": session.user_id,
                "consumer_generation": generation,
                "consumer_type": REMOTE_CONSUMER_TYPE,
            });
            let (status, answer, _) = self.call(cloud, Method::PUT, &path, Some(&body)).await?;
            match status {
                204 => return Ok(()),
                409 if error_code(&answer).as_deref() == Some("placement.concurrent_update")
                    && attempt < CLAIM_ATTEMPTS_MAX =>
                {
                    tokio::time::sleep(CLAIM_RETRY_PAUSE).await;
                }
                _ => {
                    return Err(format!(
                        "Placement answered {status} to PUT {path}: {}",
                        error_detail(&answer)
                    ));
                }
            }
        }
        Err(format!(
            "consumer {consumer} kept changing in Placement over {CLAIM_ATTEMPTS_MAX} tries"
        ))
    }
}

/// The `code` of the first error of a Placement error answer.
fn error_code(answer: &[u8]) -> Option<String> {
    let body: Value = serde_json::from_slice(answer).ok()?;
    body["errors"][0]["code"].as_str().map(str::to_owned)
}

/// The `detail` (else `title`) of the first error of a Placement error answer, at most 512
/// characters of it.
fn error_detail(answer: &[u8]) -> String {
    let body: Value = serde_json::from_slice(answer).unwrap_or_default();
    let error = &body["errors"][0];
    error["detail"]
        .as_str()
        .or_else(|| error["title"].as_str())
        .unwrap_or("no detail")
        .chars()
        .take(512)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_errors_are_read_for_their_code_and_detail() {
        let answer = br#"{"errors": [{"status": 409, "code": "placement.concurrent_update",
            "title": "Conflict", "detail": "consumer generation conflict"}]}"#;
        assert_eq!(
            error_code(answer).as_deref(),
            Some("placement.concurrent_update")
        );
        assert_eq!(error_detail(answer), "consumer generation conflict");
        assert_eq!(error_code(b"not json"), None);
        assert_eq!(error_detail(b"not json"), "no detail");
        let long = format!(r#"{{"errors": [{{"title": "{}"}}]}}"#, "x".repeat(600));
        assert_eq!(error_detail(long.as_bytes()).len(), 512);
    }
}
