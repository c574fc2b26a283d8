//! Authorization: the rule every route declares (the role it needs and the scope it acts in),
//! the operator's overrides from the policy file (`--policy FILE`), which of Placement's
//! defaults are in force (its new ones, or its deprecated ones too), and the priorities an admin
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
    /// Any caller with credentials, whatever its roles, or none (oslo.policy's `@`).
    Authenticated,
    /// `reader`, `member` or `admin`.
    Reader,
    /// `member` or `admin`.
    Member,
    /// `admin`.
    Admin,
    /// `admin` or `service` (OpenStack services calling each other, such as Nova calling
    /// Placement).
    Service,
    /// `service` alone, not even `admin` (Placement's `service_api`, for the reshaper).
    ServiceOnly,
    /// `admin` or `service` for any project; `reader` (or `member`) for the project the request
    /// names in its `project_id` query parameter when it is the caller's own (Placement's
    /// `admin_or_project_reader_or_service_api`, for a project's usages).
    ProjectReader,
}

impl Need {
    const ALL: [Need; 8] = [
        Need::Public,
        Need::Authenticated,
        Need::Reader,
        Need::Member,
        Need::Admin,
        Need::Service,
        Need::ServiceOnly,
        Need::ProjectReader,
    ];

    /// The name used in the policy file, the OpenAPI document and the README.
    pub fn as_str(self) -> &'static str {
        match self {
            Need::Public => "public",
            Need::Authenticated => "authenticated",
            Need::Reader => "reader",
            Need::Member => "member",
            Need::Admin => "admin",
            Need::Service => "service",
            Need::ServiceOnly => "service-only",
            Need::ProjectReader => "project-reader",
        }
    }

    fn parse(text: &str) -> Option<Need> {
        Need::ALL.into_iter().find(|need| need.as_str() == text)
    }

    /// Whether `caller` has what this needs; `named_project` is the project the request names
    /// (its `project_id` query parameter), which only [`Need::ProjectReader`] reads.
    pub fn admits(self, caller: &Identity, named_project: Option<&str>) -> bool {
        let has = |role| caller.roles.contains(&role);
        match self {
            Need::Public | Need::Authenticated => true,
            Need::Reader => has(Role::Reader) || has(Role::Member) || has(Role::Admin),
            Need::Member => has(Role::Member) || has(Role::Admin),
            Need::Admin => has(Role::Admin),
            Need::Service => has(Role::Admin) || has(Role::Service),
            Need::ServiceOnly => has(Role::Service),
            Need::ProjectReader => {
                Need::Service.admits(caller, named_project)
                    || (Need::Reader.admits(caller, named_project)
                        && caller.has_project()
                        && named_project == Some(caller.project_id.as_str()))
            }
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
    /// Placement's resources, which its policies give to callers acting in a project
    /// (`scope_types = ['project']`): a token scoped to the system or a domain is refused, even
    /// an admin's.
    ProjectToken,
}

impl Scope {
    /// The name used in the OpenAPI document and the README.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::None => "none",
            Scope::Project => "project",
            Scope::System => "system",
            Scope::ProjectToken => "project-token",
        }
    }

    /// Whether `caller`'s token reaches routes of this scope.
    pub fn admits(self, caller: &Identity) -> bool {
        match self {
            Scope::None | Scope::System => true,
            Scope::Project => caller.has_project() || caller.is_admin(),
            Scope::ProjectToken => caller.has_project() && !caller.system_scope,
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
    /// The deprecated default that also admits a caller when the policy file keeps Placement's
    /// old defaults (`[placement] enforce_new_defaults = false`), as oslo.policy ORs a rule's
    /// deprecated check string with the new one; `None` once the rule is in force alone.
    pub legacy: Option<Need>,
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
    /// Placement (`admin_or_service_api`): admins and OpenStack services, acting in a project.
    pub const SERVICE: Rule = Rule::new(Need::Service, Scope::ProjectToken);
    /// Placement's reshaper (`service_api`): OpenStack services alone, acting in a project; with
    /// the old defaults, admins too (its deprecated `role:admin`).
    pub const SERVICE_ONLY: Rule = Rule {
        legacy: Some(Need::Admin),
        ..Rule::new(Need::ServiceOnly, Scope::ProjectToken)
    };
    /// Placement's usages of a project (`admin_or_project_reader_or_service_api`).
    pub const PROJECT_USAGES: Rule = Rule::new(Need::ProjectReader, Scope::ProjectToken);

    /// A rule.
    pub const fn new(need: Need, scope: Scope) -> Rule {
        Rule {
            need,
            scope,
            legacy: None,
        }
    }

    /// Whether the rule reads the project the request names (its `project_id` query parameter).
    pub fn reads_named_project(&self) -> bool {
        self.need == Need::ProjectReader || self.legacy == Some(Need::ProjectReader)
    }

    /// Whether `caller` may call the route; `named_project` as for [`Need::admits`].
    pub fn admits(&self, caller: &Identity, named_project: Option<&str>) -> bool {
        self.scope.admits(caller)
            && (self.need.admits(caller, named_project)
                || self
                    .legacy
                    .is_some_and(|need| need.admits(caller, named_project)))
    }
}

/// The default ceiling of a project's priorities: the default priority, so that by default no
/// member outranks another project's reservations made with the default.
pub const PRIORITY_CEILING_DEFAULT: u32 = 50;

/// The operator's authorization policy: route overrides, Placement's defaults and priority
/// grants.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    overrides: BTreeMap<(Method, String), Need>,
    /// Placement's deprecated defaults are honoured too (`enforce_new_defaults = false`).
    legacy_defaults: bool,
    ceiling: Option<u32>,
    granted: BTreeMap<String, u32>,
    budgets: Vec<ProjectBudget>,
}

/// A project's budget as the policy file sets it at start: the project, the period and the
/// most unit-hours of each class per period.
pub type ProjectBudget = (
    String,
    berth_core::model::budget::BudgetPeriod,
    BTreeMap<berth_core::ResourceClass, u64>,
);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    routes: BTreeMap<String, String>,
    #[serde(default)]
    placement: PlacementSection,
    #[serde(default)]
    priority: PrioritySection,
    #[serde(default)]
    budgets: BudgetsSection,
}

/// `[budgets]`: the period (`month` unless named) and, under `[budgets.projects.NAME]`, each
/// project's limits in unit-hours per period by class.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetsSection {
    period: Option<String>,
    #[serde(default)]
    projects: BTreeMap<String, BTreeMap<String, i64>>,
}

/// Placement's policy defaults, named as oslo.policy's option.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlacementSection {
    #[serde(default = "new_defaults")]
    enforce_new_defaults: bool,
}

impl Default for PlacementSection {
    fn default() -> PlacementSection {
        PlacementSection {
            enforce_new_defaults: new_defaults(),
        }
    }
}

/// Placement 16.0's default with the oslo.policy it requires (6.x): the new defaults alone.
fn new_defaults() -> bool {
    true
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrioritySection {
    ceiling: Option<u32>,
    #[serde(default)]
    projects: BTreeMap<String, u32>,
}

/// Checks `[budgets]`: a known period, class names, and limits of 0 or more hours.
fn budgets(section: BudgetsSection) -> anyhow::Result<Vec<ProjectBudget>> {
    use berth_core::model::budget::BudgetPeriod;
    let period = match section.period.as_deref() {
        None => BudgetPeriod::Month,
        Some(text) => BudgetPeriod::parse(text)
            .with_context(|| format!("[budgets] period = {text:?}: one of day, week, month"))?,
    };
    section
        .projects
        .into_iter()
        .map(|(project, limits)| {
            let limits = limits
                .into_iter()
                .map(|(name, hours)| {
                    let key = format!("[budgets.projects.{project}] {name}");
                    let class = berth_core::ResourceClass::parse(&name)
                        .with_context(|| format!("{key}: not a resource class name"))?;
                    let hours = u64::try_from(hours)
                        .with_context(|| format!("{key} = {hours}: hours are 0 or more"))?;
                    Ok((class, hours))
                })
                .collect::<anyhow::Result<_>>()?;
            Ok((project, period, limits))
        })
        .collect()
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
                let names: Vec<&str> = Need::ALL.iter().map(|need| need.as_str()).collect();
                format!("[routes] {key:?} = {value:?}: one of {}", names.join(", "))
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
        let budgets = budgets(file.budgets)?;
        Ok(AccessPolicy {
            overrides,
            legacy_defaults: !file.placement.enforce_new_defaults,
            ceiling: file.priority.ceiling,
            granted: file.priority.projects,
            budgets,
        })
    }

    /// The budgets the file sets, applied at start (an admin may change them later).
    pub fn budgets(&self) -> &[ProjectBudget] {
        &self.budgets
    }

    /// The rule of each route with the overrides applied; an override naming no route is an
    /// error (a typo must not leave a route at its default silently). A rule's deprecated
    /// default stays beside it only with `enforce_new_defaults = false`, and never on a route
    /// the file overrides (as oslo.policy: an operator's rule is the whole rule).
    pub fn apply(
        &self,
        routes: impl IntoIterator<Item = (Method, &'static str, Rule)>,
    ) -> anyhow::Result<BTreeMap<(Method, &'static str), Rule>> {
        let mut table: BTreeMap<(Method, &'static str), Rule> = routes
            .into_iter()
            .map(|(method, path, rule)| {
                let legacy = rule.legacy.filter(|_| self.legacy_defaults);
                ((method, path), Rule { legacy, ..rule })
            })
            .collect();
        for ((method, path), need) in &self.overrides {
            let rule = table
                .iter_mut()
                .find(|((m, p), _)| m == method && p == path)
                .map(|(_, rule)| rule)
                .with_context(|| format!("[routes] \"{method} {path}\": no such route"))?;
            *rule = Rule::new(*need, rule.scope);
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
        let met = |need: Need, roles: &[Role]| need.admits(&who("p1", roles), None);
        assert!(met(Need::Public, &[]));
        assert!(met(Need::Authenticated, &[]));
        assert!(!met(Need::Reader, &[]));
        assert!(met(Need::Reader, &[Role::Reader]));
        assert!(!met(Need::Member, &[Role::Reader]));
        assert!(met(Need::Member, &[Role::Member]));
        assert!(!met(Need::Admin, &[Role::Member, Role::Reader]));
        assert!(!met(Need::Admin, &[Role::Service]));
        assert!(met(Need::Service, &[Role::Service]));
        assert!(met(Need::Service, &[Role::Admin]));
        assert!(!met(Need::Service, &[Role::Member]));
        assert!(!met(Need::Reader, &[Role::Service]));
        assert!(met(Need::ServiceOnly, &[Role::Service]));
        assert!(!met(
            Need::ServiceOnly,
            &[Role::Admin, Role::Member, Role::Reader]
        ));
    }

    #[test]
    fn a_project_reader_reads_only_the_project_it_acts_in() {
        let reader = who("p1", &[Role::Reader]);
        let need = Need::ProjectReader;
        assert!(need.admits(&reader, Some("p1")));
        assert!(need.admits(&who("p1", &[Role::Member]), Some("p1")));
        assert!(!need.admits(&reader, Some("p2")));
        assert!(!need.admits(&reader, None));
        assert!(!need.admits(&who("p1", &[]), Some("p1")));
        assert!(!need.admits(&who("", &[Role::Reader]), Some("")));
        for any in [Role::Admin, Role::Service] {
            assert!(need.admits(&who("p2", &[any]), Some("p1")));
            assert!(need.admits(&who("p2", &[any]), None));
        }
    }

    #[test]
    fn placement_routes_refuse_tokens_not_scoped_to_a_project() {
        let project_admin = who("p1", &[Role::Admin]);
        let system_admin = Identity {
            system_scope: true,
            ..who("", &[Role::Admin])
        };
        let system_admin_naming_a_project = Identity {
            system_scope: true,
            ..project_admin.clone()
        };
        let domain_admin = Identity {
            domain_id: Some("d1".into()),
            ..who("", &[Role::Admin])
        };
        assert!(Rule::SERVICE.admits(&project_admin, None));
        for caller in [&system_admin, &system_admin_naming_a_project, &domain_admin] {
            assert!(!Rule::SERVICE.admits(caller, None), "{caller:?}");
            assert!(
                !Rule::PROJECT_USAGES.admits(caller, Some("p1")),
                "{caller:?}"
            );
            // berth's own cloud-wide and project routes still take them.
            assert!(Rule::SYSTEM_ADMIN.admits(caller, None), "{caller:?}");
            assert!(Rule::PROJECT_MEMBER.admits(caller, None), "{caller:?}");
        }
        let open = Rule::new(Need::Authenticated, Scope::ProjectToken);
        assert!(open.admits(&who("p1", &[]), None));
        assert!(!open.admits(&system_admin, None));
    }

    #[test]
    fn old_placement_defaults_are_honoured_only_when_the_file_asks() {
        let routes = || {
            [
                (Method::POST, "/placement/reshaper", Rule::SERVICE_ONLY),
                (Method::GET, "/placement/traits", Rule::SERVICE),
            ]
        };
        let admin = who("p1", &[Role::Admin]);
        let service = who("service", &[Role::Service]);
        let reshaper = (Method::POST, "/placement/reshaper");

        let new = AccessPolicy::default().apply(routes()).expect("applies");
        assert_eq!(new[&reshaper].legacy, None);
        assert!(!new[&reshaper].admits(&admin, None));
        assert!(new[&reshaper].admits(&service, None));
        let explicit = AccessPolicy::parse("[placement]\nenforce_new_defaults = true\n")
            .expect("parses")
            .apply(routes())
            .expect("applies");
        assert_eq!(explicit, new);

        let old = AccessPolicy::parse("[placement]\nenforce_new_defaults = false\n")
            .expect("parses")
            .apply(routes())
            .expect("applies");
        assert!(old[&reshaper].admits(&admin, None));
        assert!(old[&reshaper].admits(&service, None));
        assert!(!old[&reshaper].admits(&who("p1", &[Role::Member]), None));
        assert_eq!(
            old[&(Method::GET, "/placement/traits")],
            new[&(Method::GET, "/placement/traits")]
        );

        // An operator's rule is the whole rule: no deprecated default beside it.
        let overridden = AccessPolicy::parse(
            "[placement]\nenforce_new_defaults = false\n[routes]\n\"POST /placement/reshaper\" = \"authenticated\"\n",
        )
        .expect("parses")
        .apply(routes())
        .expect("applies");
        assert_eq!(
            overridden[&reshaper],
            Rule::new(Need::Authenticated, Scope::ProjectToken)
        );
        assert!(overridden[&reshaper].admits(&who("p1", &[]), None));
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
            "[placement]\nenforce_new_defaults = \"no\"\n",
            "[placement]\nenforce_scope = false\n",
        ] {
            assert!(AccessPolicy::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn budgets_are_read_with_their_period_and_bad_ones_name_their_key() {
        use berth_core::model::budget::BudgetPeriod;
        let policy = AccessPolicy::parse(
            "[budgets]\nperiod = \"week\"\n[budgets.projects.lab]\nVCPU = 2000\nMEMORY_MB = 0\n",
        )
        .expect("parsed");
        let [(project, period, limits)] = policy.budgets() else {
            panic!("one budget: {:?}", policy.budgets());
        };
        assert_eq!((project.as_str(), *period), ("lab", BudgetPeriod::Week));
        let vcpu = berth_core::ResourceClass::parse("VCPU").expect("a class");
        assert_eq!(limits.get(&vcpu), Some(&2000));
        assert!(AccessPolicy::parse("").expect("empty").budgets().is_empty());
        for (text, named) in [
            (
                "[budgets.projects.lab]\nVCPU = -1\n",
                "[budgets.projects.lab] VCPU = -1",
            ),
            ("[budgets.projects.lab]\n\"no class\" = 1\n", "no class"),
            ("[budgets]\nperiod = \"fortnight\"\n", "period"),
        ] {
            let error = AccessPolicy::parse(text).expect_err(text);
            assert!(format!("{error:#}").contains(named), "{error:#}");
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
