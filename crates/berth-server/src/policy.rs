//! Authorization: the rule every route declares (the role it needs and the scope it acts in),
//! the operator's overrides from the policy file (`--policy FILE`), and the priorities an admin
//! grants projects.
//!
//! [`Authorization`] holds the rules in force, looked up by route template for every request.
//!
//! A route's rule is part of its registration (`http::routes::Routes::add`), so a route cannot
//! be served without one; the authorization middleware checks it before any handler runs. Roles
//! are resolved once per request; a role berth does not know grants nothing.

use crate::auth::{Identity, Role};
use anyhow::Context as _;
use axum::http::Method;
use berth_app::PriorityGrant;
use berth_core::model::promise::PRIORITY_MAX;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The role a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Anyone, without credentials.
    Public,
    /// `reader`, `member` or `admin`.
    Reader,
    /// `member` or `admin`.
    Member,
    /// `admin`.
    Admin,
    /// `admin` or `service` (OpenStack services calling each other, such as Nova calling
    /// Placement).
    Service,
}

impl Need {
    /// The name used in the policy file, the OpenAPI document and the README.
    pub fn as_str(self) -> &'static str {
        match self {
            Need::Public => "public",
            Need::Reader => "reader",
            Need::Member => "member",
            Need::Admin => "admin",
            Need::Service => "service",
        }
    }

    fn parse(text: &str) -> Option<Need> {
        [
            Need::Public,
            Need::Reader,
            Need::Member,
            Need::Admin,
            Need::Service,
        ]
        .into_iter()
        .find(|need| need.as_str() == text)
    }

    /// Whether a caller with `roles` has what this needs.
    pub fn satisfied_by(self, roles: &[Role]) -> bool {
        let has = |role| roles.contains(&role);
        match self {
            Need::Public => true,
            Need::Reader => has(Role::Reader) || has(Role::Member) || has(Role::Admin),
            Need::Member => has(Role::Member) || has(Role::Admin),
            Need::Admin => has(Role::Admin),
            Need::Service => has(Role::Admin) || has(Role::Service),
        }
    }
}

/// What a route acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Nothing of anyone's (versions, health, metrics, the dashboard's files).
    None,
    /// The caller's project's objects (leases, claims, subscriptions, instances); an admin's
    /// reach every project, anyone else's do not exist for the caller (404).
    Project,
    /// The cloud as a whole (inventory, capacity, flavors, policy).
    System,
}

impl Scope {
    /// The name used in the OpenAPI document and the README.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::None => "none",
            Scope::Project => "project",
            Scope::System => "system",
        }
    }
}

/// The rule a route declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The role it needs.
    pub need: Need,
    /// What it acts on.
    pub scope: Scope,
}

impl Rule {
    /// Anyone, no credentials.
    pub const PUBLIC: Rule = Rule::new(Need::Public, Scope::None);
    /// Reads of the caller's project's objects.
    pub const PROJECT_READER: Rule = Rule::new(Need::Reader, Scope::Project);
    /// Writes of the caller's project's objects.
    pub const PROJECT_MEMBER: Rule = Rule::new(Need::Member, Scope::Project);
    /// Reads of cloud-wide information any project may see (capacity, flavors, nodes).
    pub const SYSTEM_READER: Rule = Rule::new(Need::Reader, Scope::System);
    /// Cloud-wide administration (inventory, policy, planned capacity).
    pub const SYSTEM_ADMIN: Rule = Rule::new(Need::Admin, Scope::System);
    /// Placement: admins and OpenStack services.
    pub const SERVICE: Rule = Rule::new(Need::Service, Scope::System);

    /// A rule.
    pub const fn new(need: Need, scope: Scope) -> Rule {
        Rule { need, scope }
    }
}

/// The default ceiling of a project's priorities: the default priority, so that by default no
/// member outranks another project's reservations made with the default.
pub const PRIORITY_CEILING_DEFAULT: u32 = 50;

/// The operator's authorization policy: route overrides and priority grants.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    overrides: BTreeMap<(Method, String), Need>,
    ceiling: Option<u32>,
    granted: BTreeMap<String, u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    routes: BTreeMap<String, String>,
    #[serde(default)]
    priority: PrioritySection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrioritySection {
    ceiling: Option<u32>,
    #[serde(default)]
    projects: BTreeMap<String, u32>,
}

impl AccessPolicy {
    /// Reads and checks a policy file (routes are checked against the route table when the
    /// router is built, by [`AccessPolicy::apply`]).
    pub fn load(path: &Path) -> anyhow::Result<AccessPolicy> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading policy file {}", path.display()))?;
        AccessPolicy::parse(&text).with_context(|| format!("policy file {}", path.display()))
    }

    /// Parses the text of a policy file.
    pub fn parse(text: &str) -> anyhow::Result<AccessPolicy> {
        let file: PolicyFile = toml::from_str(text)?;
        let mut overrides = BTreeMap::new();
        for (key, value) in file.routes {
            let (method, path) = key
                .split_once(' ')
                .with_context(|| format!("[routes] {key:?}: write \"METHOD /path\""))?;
            let method = Method::from_bytes(method.trim().as_bytes())
                .ok()
                .filter(|m| {
                    [
                        Method::GET,
                        Method::POST,
                        Method::PUT,
                        Method::PATCH,
                        Method::DELETE,
                    ]
                    .contains(m)
                })
                .with_context(|| format!("[routes] {key:?}: unknown method"))?;
            let need = Need::parse(value.trim()).with_context(|| {
                format!(
                    "[routes] {key:?} = {value:?}: one of public, reader, member, admin, service"
                )
            })?;
            overrides.insert((method, path.trim().to_owned()), need);
        }
        let in_range = |name: &str, value: u32| {
            anyhow::ensure!(
                value <= PRIORITY_MAX,
                "[priority] {name} = {value}: priorities are from 0 to {PRIORITY_MAX}"
            );
            Ok(())
        };
        if let Some(ceiling) = file.priority.ceiling {
            in_range("ceiling", ceiling)?;
        }
        for (project, ceiling) in &file.priority.projects {
            in_range(&format!("projects.{project}"), *ceiling)?;
        }
        Ok(AccessPolicy {
            overrides,
            ceiling: file.priority.ceiling,
            granted: file.priority.projects,
        })
    }

    /// The rule of each route with the overrides applied; an override naming no route is an
    /// error (a typo must not leave a route at its default silently).
    pub fn apply(
        &self,
        routes: impl IntoIterator<Item = (Method, &'static str, Rule)>,
    ) -> anyhow::Result<BTreeMap<(Method, &'static str), Rule>> {
        let mut table: BTreeMap<(Method, &'static str), Rule> = routes
            .into_iter()
            .map(|(method, path, rule)| ((method, path), rule))
            .collect();
        for ((method, path), need) in &self.overrides {
            let rule = table
                .iter_mut()
                .find(|((m, p), _)| m == method && p == path)
                .map(|(_, rule)| rule)
                .with_context(|| format!("[routes] \"{method} {path}\": no such route"))?;
            rule.need = *need;
        }
        Ok(table)
    }

    /// What priorities `identity` may use: admins any, with displacement across projects;
    /// projects named in `[priority.projects]` up to their grant, across projects; everyone
    /// else up to `[priority] ceiling` (default 50), displacing only their own project's.
    pub fn grant(&self, identity: &Identity) -> PriorityGrant {
        if identity.is_admin() {
            return PriorityGrant {
                ceiling: PRIORITY_MAX,
                across_projects: true,
            };
        }
        match self.granted.get(&identity.project_id) {
            Some(ceiling) => PriorityGrant {
                ceiling: *ceiling,
                across_projects: true,
            },
            None => PriorityGrant {
                ceiling: self.ceiling.unwrap_or(PRIORITY_CEILING_DEFAULT),
                across_projects: false,
            },
        }
    }
}

/// The rules in force and the operator's policy.
#[derive(Debug)]
pub struct Authorization {
    rules: BTreeMap<(Method, &'static str), Rule>,
    /// The same rules by route template, for the lookup every request makes.
    by_path: HashMap<&'static str, Vec<(Method, Rule)>>,
    policy: AccessPolicy,
}

impl Authorization {
    /// The rules the routes declare with `policy`'s overrides applied.
    pub fn new(
        routes: impl IntoIterator<Item = (Method, &'static str, Rule)>,
        policy: AccessPolicy,
    ) -> anyhow::Result<Authorization> {
        let rules = policy.apply(routes)?;
        let mut by_path: HashMap<&'static str, Vec<(Method, Rule)>> = HashMap::new();
        for ((method, path), rule) in &rules {
            by_path
                .entry(path)
                .or_default()
                .push((method.clone(), *rule));
        }
        Ok(Authorization {
            rules,
            by_path,
            policy,
        })
    }

    /// The rule of every route.
    pub fn rules(&self) -> &BTreeMap<(Method, &'static str), Rule> {
        &self.rules
    }

    /// The operator's policy (priority grants).
    pub fn policy(&self) -> &AccessPolicy {
        &self.policy
    }

    /// The rule of the route `path` (a template) for `method` (`HEAD` as `GET`).
    pub fn rule(&self, method: &Method, path: &str) -> Option<Rule> {
        let method = match *method {
            Method::HEAD => Method::GET,
            ref other => other.clone(),
        };
        self.by_path
            .get(path)?
            .iter()
            .find(|(m, _)| *m == method)
            .map(|(_, rule)| *rule)
    }

    /// The methods the route `path` (a template) serves, in registration order.
    pub fn methods(&self, path: &str) -> Vec<Method> {
        self.by_path
            .get(path)
            .map(|rules| rules.iter().map(|(method, _)| method.clone()).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(project: &str, roles: &[Role]) -> Identity {
        Identity {
            project_id: project.into(),
            user_id: "u".into(),
            roles: roles.to_vec(),
            ..Identity::default()
        }
    }

    #[test]
    fn needs_are_met_only_by_the_roles_they_name() {
        assert!(Need::Public.satisfied_by(&[]));
        assert!(!Need::Reader.satisfied_by(&[]));
        assert!(Need::Reader.satisfied_by(&[Role::Reader]));
        assert!(!Need::Member.satisfied_by(&[Role::Reader]));
        assert!(Need::Member.satisfied_by(&[Role::Member]));
        assert!(!Need::Admin.satisfied_by(&[Role::Member, Role::Reader]));
        assert!(!Need::Admin.satisfied_by(&[Role::Service]));
        assert!(Need::Service.satisfied_by(&[Role::Service]));
        assert!(Need::Service.satisfied_by(&[Role::Admin]));
        assert!(!Need::Service.satisfied_by(&[Role::Member]));
        assert!(!Need::Reader.satisfied_by(&[Role::Service]));
    }

    #[test]
    fn overrides_replace_defaults_and_must_name_a_route() {
        let policy =
            AccessPolicy::parse("[routes]\n\"GET /a/{id}\" = \"reader\"\n").expect("parses");
        let table = policy
            .apply([
                (Method::GET, "/a/{id}", Rule::SYSTEM_ADMIN),
                (Method::POST, "/a", Rule::PROJECT_MEMBER),
            ])
            .expect("applies");
        assert_eq!(table[&(Method::GET, "/a/{id}")].need, Need::Reader);
        assert_eq!(table[&(Method::GET, "/a/{id}")].scope, Scope::System);
        assert_eq!(table[&(Method::POST, "/a")], Rule::PROJECT_MEMBER);

        let typo = AccessPolicy::parse("[routes]\n\"GET /b\" = \"reader\"\n").expect("parses");
        let error = typo
            .apply([(Method::GET, "/a", Rule::SYSTEM_ADMIN)])
            .expect_err("no such route");
        assert!(error.to_string().contains("no such route"), "{error}");

        for bad in [
            "[routes]\n\"GET\" = \"reader\"\n",
            "[routes]\n\"FETCH /a\" = \"reader\"\n",
            "[routes]\n\"GET /a\" = \"observer\"\n",
            "[priority]\nceiling = 101\n",
            "[priority.projects]\nops = 200\n",
            "[roles]\n",
        ] {
            assert!(AccessPolicy::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn priorities_are_granted_by_the_policy_not_by_the_caller() {
        let policy =
            AccessPolicy::parse("[priority]\nceiling = 40\n[priority.projects]\nops = 90\n")
                .expect("parses");
        assert_eq!(
            policy.grant(&who("p1", &[Role::Member])),
            PriorityGrant {
                ceiling: 40,
                across_projects: false
            }
        );
        assert_eq!(
            policy.grant(&who("ops", &[Role::Member])),
            PriorityGrant {
                ceiling: 90,
                across_projects: true
            }
        );
        assert_eq!(
            policy.grant(&who("p1", &[Role::Admin])),
            PriorityGrant {
                ceiling: 100,
                across_projects: true
            }
        );
        let default = AccessPolicy::default().grant(&who("p1", &[Role::Member]));
        assert_eq!(default.ceiling, PRIORITY_CEILING_DEFAULT);
        assert!(!default.across_projects);
    }
}
