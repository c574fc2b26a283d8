//! Query-string parameters of the Placement API, parsed exactly as Placement parses them,
//! including their microversion gates and error messages.
//!
//! Parsing needs no catalog: whether the classes and traits a query names exist is asked with
//! the query (`berth_core::query::names::Names`), and a refusal comes back through [`refusal`]
//! in Placement's words.

use crate::http::error::ApiError;
use crate::http::surface::Microversion;
use berth_app::AppError;
use berth_core::query::providers::{MemberOf, TraitFilter};
use berth_core::{Rejection, ResourceClass, TraitName};
use std::collections::BTreeSet;
use uuid::Uuid;

/// The query string as ordered key-value pairs (repeated keys kept).
pub fn pairs(raw: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(raw.unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("Invalid query string parameters: {e}")))
}

/// Refuses keys outside `allowed`, as Placement's schemas do.
pub fn only(pairs: &[(String, String)], allowed: &[&str]) -> Result<(), ApiError> {
    match pairs
        .iter()
        .find(|(key, _)| !allowed.contains(&key.as_str()))
    {
        Some((key, _)) => Err(ApiError::bad_request(format!(
            "Invalid query string parameters: Additional properties are not allowed ('{key}' was unexpected)"
        ))),
        None => Ok(()),
    }
}

/// Every value of `key`, in order.
pub fn values<'p>(
    pairs: &'p [(String, String)],
    key: &'p str,
) -> impl Iterator<Item = &'p str> + 'p {
    pairs
        .iter()
        .filter(move |(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn uuid_list(text: &str) -> Result<BTreeSet<Uuid>, ApiError> {
    text.split(',')
        .map(|item| {
            Uuid::parse_str(item.trim()).map_err(|_| {
                ApiError::bad_request(format!(
                    "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: {item}"
                ))
            })
        })
        .collect()
}

/// Parses every `member_of` value: AND across values, OR within `in:`, `!` forbidden from 1.32.
pub fn member_of<'a>(
    raw: impl Iterator<Item = &'a str>,
    mv: Microversion,
) -> Result<MemberOf, ApiError> {
    let raw: Vec<&str> = raw.collect();
    if raw.len() > 1 && !mv.at_least(24) {
        return Err(ApiError::bad_request(
            "Multiple member_of parameters are not supported",
        ));
    }
    let mut filter = MemberOf::default();
    for value in raw {
        let (forbidden, rest) = match value.strip_prefix('!') {
            Some(rest) if mv.at_least(32) => (true, rest),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "Forbidden member_of parameters are not supported in the specified microversion",
                ));
            }
            None => (false, value),
        };
        let set = match rest.strip_prefix("in:") {
            Some(list) => uuid_list(list)?,
            None if rest.contains(',') => {
                return Err(ApiError::bad_request(format!(
                    "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using the valid microversion. Got: {value}"
                )));
            }
            None => uuid_list(rest)?,
        };
        match forbidden {
            true => filter.forbidden.extend(set),
            false => filter.required.push(set),
        }
    }
    Ok(filter)
}

/// Parses `resources=RC:N,...`, in the order written.
pub fn resources(text: &str) -> Result<Vec<(ResourceClass, u64)>, ApiError> {
    let malformed = |got: &str| {
        ApiError::bad_request(format!(
            "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: {got}."
        ))
    };
    if text.trim().is_empty() {
        return Err(malformed("empty string"));
    }
    let mut out: Vec<(ResourceClass, u64)> = Vec::new();
    for item in text.split(',') {
        let (name, amount) = item
            .split_once(':')
            .filter(|(_, amount)| !amount.contains(':'))
            .ok_or_else(|| malformed(item))?;
        let name = name.trim();
        let amount: i64 = amount.trim().parse().map_err(|_| {
            ApiError::bad_request(format!(
                "Requested resource {name} expected positive integer amount. Got: {amount}."
            ))
        })?;
        if amount < 1 {
            return Err(ApiError::bad_request(format!(
                "Requested resource {name} requires amount >= 1. Got: {amount}."
            )));
        }
        let class = ResourceClass::parse(name).ok_or_else(|| unknown_class(name))?;
        if out.iter().any(|(existing, _)| *existing == class) {
            return Err(ApiError::bad_request(format!(
                "Badly formed resources parameter: resource class {name} is given more than once."
            )));
        }
        out.push((
            class,
            u64::try_from(amount).expect("invariant: checked positive"),
        ));
    }
    Ok(out)
}

fn unknown_class(name: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid resource class in resources parameter: No such resource class {name}."
    ))
}

/// Parses every value of the `required` parameter named `key` (`required`, `required1`, ...):
/// `!` forbidden from 1.22, `in:` any-of and repetition from 1.39 (below 1.39 the last value
/// wins); malformed values and conflicts are refused in Placement's words. Returns the filter
/// and every trait it names, as named (in order, with repeats), for the catalog to check.
pub fn required<'a>(
    raw: impl Iterator<Item = &'a str>,
    mv: Microversion,
    key: &str,
) -> Result<(TraitFilter, Vec<TraitName>), ApiError> {
    let raw: Vec<&str> = raw.collect();
    let values: &[&str] = match mv.at_least(39) {
        true => &raw,
        false => raw.last().map(std::slice::from_ref).unwrap_or(&[]),
    };
    let mut filter = TraitFilter::default();
    let mut named = Vec::new();
    let mut parse = |name: &str| -> Result<TraitName, ApiError> {
        // A name no trait could have is one the catalog does not know.
        let parsed = TraitName::parse(name)
            .ok_or_else(|| ApiError::bad_request(format!("No such trait(s): {name}.")))?;
        named.push(parsed.clone());
        Ok(parsed)
    };
    let refused = |detail: String| {
        Err(ApiError::bad_request(format!(
            "Invalid query string parameters: {detail}"
        )))
    };
    let allow_forbidden = mv.at_least(22);
    for value in values {
        if let Some(list) = value.strip_prefix("in:") {
            let names: Vec<&str> = list.split(',').map(str::trim).collect();
            if !mv.at_least(39) {
                return refused(format!(
                    "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: {value}"
                ));
            }
            if names.iter().any(|name| name.is_empty()) {
                return refused(format!(
                    "Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
                ));
            }
            if names.iter().any(|name| name.starts_with('!')) {
                return refused(format!(
                    "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: {value}"
                ));
            }
            let mut any = BTreeSet::new();
            for name in names {
                any.insert(parse(name)?);
            }
            filter.any_of.push(any);
            continue;
        }
        let names: Vec<&str> = value.split(',').map(str::trim).collect();
        if names
            .iter()
            .any(|name| name.trim_start_matches('!').is_empty())
        {
            let form = match allow_forbidden {
                true => "HW_CPU_X86_VMX,!CUSTOM_MAGIC",
                false => "HW_CPU_X86_VMX,CUSTOM_MAGIC",
            };
            return refused(format!(
                "Expected 'required' parameter value of the form: {form}. Got an empty trait in: {value}"
            ));
        }
        if !allow_forbidden && names.iter().any(|name| name.starts_with('!')) {
            return refused(format!(
                "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}"
            ));
        }
        for name in names {
            match name.strip_prefix('!') {
                Some(forbidden) => {
                    filter.forbidden.insert(parse(forbidden)?);
                }
                None => {
                    filter.all_of.insert(parse(name)?);
                }
            }
        }
    }
    if let Some(conflict) = filter.conflict() {
        return Err(ApiError::bad_request(format!(
            "Conflicting required and forbidden traits found in the following traits keys: {key}: ({})",
            conflict.as_str()
        )));
    }
    Ok((filter, named))
}

/// A query refused for what it names, in Placement's words: a resource class the catalog does
/// not know as Placement names it in a query; any other rejection (unknown traits among them)
/// as usual.
pub fn refusal(rejection: Rejection) -> ApiError {
    match rejection {
        Rejection::UnknownResourceClass(name) => unknown_class(&name),
        other => other.into(),
    }
}

/// A read's error, with [`refusal`]'s words for a rejection.
pub fn read_error(error: AppError) -> ApiError {
    match error {
        AppError::Rejected(rejection) => refusal(rejection),
        other => other.into(),
    }
}

/// Parses a uuid-valued parameter.
pub fn uuid_param(key: &str, value: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(value).map_err(|_| {
        ApiError::bad_request(format!("Invalid query string parameters: Expected '{key}' parameter to be a format of uuid. Got: {value}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use berth_core::Catalog;
    use berth_core::query::names::Names;

    fn mv(minor: u16) -> Microversion {
        // Only the negotiation code builds microversions; tests go through it as well.
        let header = format!("placement 1.{minor}");
        crate::http::surface::tests_support::negotiate(&header)
    }

    const A: &str = "00000000-0000-0000-0000-00000000000a";
    const B: &str = "00000000-0000-0000-0000-00000000000b";

    #[test]
    fn member_of_forms_and_gates() {
        let all = member_of([format!("in:{A},{B}").as_str()].into_iter(), mv(3)).expect("in:");
        assert_eq!(all.required.len(), 1);
        assert_eq!(all.required[0].len(), 2);
        let forbidden =
            member_of([format!("!in:{A},{B}").as_str()].into_iter(), mv(32)).expect("!in:");
        assert_eq!(forbidden.forbidden.len(), 2);
        let gated = member_of([format!("!{A}").as_str()].into_iter(), mv(31)).expect_err("gate");
        assert_eq!(gated.status(), StatusCode::BAD_REQUEST);
        let mixed =
            member_of([format!("in:{A},!{B}").as_str()].into_iter(), mv(39)).expect_err("in:a,!b");
        assert_eq!(mixed.status(), StatusCode::BAD_REQUEST);
        let bare =
            member_of([format!("{A},{B}").as_str()].into_iter(), mv(39)).expect_err("bare list");
        assert_eq!(bare.status(), StatusCode::BAD_REQUEST);
        let repeated = [A, B];
        assert!(member_of(repeated.into_iter(), mv(23)).is_err());
        assert_eq!(
            member_of(repeated.into_iter(), mv(24))
                .expect("anded")
                .required
                .len(),
            2
        );
    }

    /// Parses `resources` and checks its classes against `catalog`.
    fn checked_resources(text: &str, catalog: &Catalog) -> Result<usize, ApiError> {
        let parsed = resources(text)?;
        let mut names = Names::default();
        names.classes(parsed.iter().map(|(class, _)| class.clone()));
        names.check(catalog).map_err(refusal)?;
        Ok(parsed.len())
    }

    /// Parses `required` and checks its traits against `catalog`.
    fn checked_required<'a>(
        raw: impl Iterator<Item = &'a str>,
        mv: Microversion,
        catalog: &Catalog,
    ) -> Result<TraitFilter, ApiError> {
        let (filter, named) = required(raw, mv, "required")?;
        let mut names = Names::default();
        names.traits(named);
        names.check(catalog).map_err(refusal)?;
        Ok(filter)
    }

    #[test]
    fn resources_and_traits_are_checked() {
        let catalog = Catalog::new();
        assert_eq!(
            checked_resources("VCPU:2,MEMORY_MB:2048", &catalog).expect("ok"),
            2
        );
        for bad in [
            "VCPU",
            "VCPU:0",
            "VCPU:x",
            "CUSTOM_NOPE:1",
            "VCPU:1,VCPU:2",
            "",
        ] {
            assert!(checked_resources(bad, &catalog).is_err(), "{bad}");
        }
        let filter = checked_required(
            ["HW_CPU_X86_AVX2,!HW_CPU_X86_SSE"].into_iter(),
            mv(22),
            &catalog,
        )
        .expect("ok");
        assert_eq!(filter.forbidden.len(), 1);
        assert!(checked_required(["CUSTOM_NOPE"].into_iter(), mv(39), &catalog).is_err());
        assert!(
            checked_required(
                ["HW_CPU_X86_AVX2,!HW_CPU_X86_AVX2"].into_iter(),
                mv(39),
                &catalog
            )
            .is_err()
        );
        assert!(
            checked_required(
                ["in:HW_CPU_X86_AVX2,!HW_CPU_X86_SSE"].into_iter(),
                mv(39),
                &catalog
            )
            .is_err()
        );
        let any = checked_required(
            ["in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE", "HW_CPU_X86_AVX"].into_iter(),
            mv(39),
            &catalog,
        )
        .expect("ok");
        assert_eq!((any.any_of.len(), any.all_of.len()), (1, 1));
        let last_wins = checked_required(
            ["HW_CPU_X86_AVX2", "HW_CPU_X86_SSE"].into_iter(),
            mv(38),
            &catalog,
        )
        .expect("ok");
        assert_eq!(last_wins.all_of.len(), 1);
    }
}
