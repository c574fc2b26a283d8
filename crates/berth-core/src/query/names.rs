//! The resource classes and traits the catalog knows, listed and filtered, and whether a request
//! names only known ones. Names are parsed where a request is read; only whether they exist is
//! a question for the catalog, asked here.

use crate::catalog::Catalog;
use crate::model::name::{ResourceClass, STANDARD_RESOURCE_CLASSES, TraitName};
use crate::rejection::Rejection;
use std::collections::BTreeSet;

/// Every resource class: the standard ones in their documented order, then the custom ones
/// sorted.
pub fn resource_classes(catalog: &Catalog) -> Vec<&str> {
    STANDARD_RESOURCE_CLASSES
        .iter()
        .copied()
        .chain(
            catalog
                .custom_resource_classes()
                .iter()
                .map(ResourceClass::as_str),
        )
        .collect()
}

/// Which trait names a trait listing keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NameFilter {
    /// Every name.
    #[default]
    Any,
    /// The names in the set.
    In(BTreeSet<String>),
    /// The names that start with the prefix.
    StartsWith(String),
}

impl NameFilter {
    /// Whether the filter keeps `name`.
    pub fn admits(&self, name: &str) -> bool {
        match self {
            NameFilter::Any => true,
            NameFilter::In(names) => names.contains(name),
            NameFilter::StartsWith(prefix) => name.starts_with(prefix.as_str()),
        }
    }
}

/// A trait listing: which names, and whether only traits some provider has (or has not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraitQuery {
    /// Which names.
    pub name: NameFilter,
    /// `Some(true)`: only traits some provider has; `Some(false)`: only traits none has.
    pub associated: Option<bool>,
}

/// The traits, standard and custom, that `query` keeps, sorted.
pub fn traits<'c>(catalog: &'c Catalog, query: &TraitQuery) -> Vec<&'c str> {
    let used: BTreeSet<&str> = match query.associated {
        None => BTreeSet::new(),
        Some(_) => catalog
            .providers()
            .flat_map(|p| p.traits().iter().map(TraitName::as_str))
            .collect(),
    };
    catalog
        .all_traits()
        .into_iter()
        .filter(|name| query.name.admits(name))
        .filter(|name| {
            query
                .associated
                .is_none_or(|want| used.contains(name) == want)
        })
        .collect()
}

/// One step of what a request names: the classes of one parameter, or the traits of one.
#[derive(Debug, Clone, PartialEq)]
enum Named {
    Classes(Vec<ResourceClass>),
    Traits(Vec<TraitName>),
}

/// The resource classes and traits a request names, in the order it names them, so that a
/// request naming one the catalog does not know is refused, as Placement refuses it, before it
/// is answered ([`Names::check`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    steps: Vec<Named>,
}

impl Names {
    /// Adds the classes of one parameter, in the order it names them.
    pub fn classes(&mut self, classes: impl IntoIterator<Item = ResourceClass>) {
        self.steps
            .push(Named::Classes(classes.into_iter().collect()));
    }

    /// Adds the traits of one parameter, as it names them (in order, with repeats).
    pub fn traits(&mut self, traits: Vec<TraitName>) {
        self.steps.push(Named::Traits(traits));
    }

    /// Checks every step in order: the first that names something unknown refuses the request,
    /// with [`Rejection::UnknownResourceClass`] for its first unknown class, or
    /// [`Rejection::UnknownTraits`] listing every unknown trait of the step as named.
    pub fn check(&self, catalog: &Catalog) -> Result<(), Rejection> {
        for step in &self.steps {
            match step {
                Named::Classes(classes) => {
                    if let Some(unknown) = classes.iter().find(|c| !catalog.has_resource_class(c)) {
                        return Err(Rejection::UnknownResourceClass(unknown.as_str().to_owned()));
                    }
                }
                Named::Traits(traits) => known_traits(catalog, traits)?,
            }
        }
        Ok(())
    }
}

/// Refuses `traits` unless the catalog knows each: [`Rejection::UnknownTraits`] lists every
/// unknown one, in the order given.
pub fn known_traits<'t>(
    catalog: &Catalog,
    traits: impl IntoIterator<Item = &'t TraitName>,
) -> Result<(), Rejection> {
    let unknown: Vec<&str> = traits
        .into_iter()
        .filter(|t| !catalog.has_trait(t))
        .map(TraitName::as_str)
        .collect();
    match unknown.is_empty() {
        true => Ok(()),
        false => Err(Rejection::UnknownTraits(unknown.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str) -> ResourceClass {
        ResourceClass::parse(name).expect("class")
    }

    fn name(text: &str) -> TraitName {
        TraitName::parse(text).expect("trait")
    }

    #[test]
    fn the_first_step_naming_something_unknown_refuses() {
        let catalog = Catalog::new();
        let mut names = Names::default();
        names.classes([class("VCPU"), class("MEMORY_MB")]);
        names.traits(vec![name("HW_CPU_X86_AVX2")]);
        assert_eq!(names.check(&catalog), Ok(()));
        names.traits(vec![
            name("CUSTOM_B"),
            name("HW_CPU_X86_SSE"),
            name("CUSTOM_A"),
        ]);
        names.classes([class("CUSTOM_NOPE")]);
        assert_eq!(
            names.check(&catalog),
            Err(Rejection::UnknownTraits("CUSTOM_B, CUSTOM_A".into()))
        );
        let mut names = Names::default();
        names.classes([class("VCPU"), class("CUSTOM_X"), class("CUSTOM_Y")]);
        assert_eq!(
            names.check(&catalog),
            Err(Rejection::UnknownResourceClass("CUSTOM_X".into()))
        );
    }

    #[test]
    fn trait_listings_filter_by_name_and_use() {
        let catalog = Catalog::new();
        let avx = TraitQuery {
            name: NameFilter::StartsWith("HW_CPU_X86_AVX".into()),
            associated: None,
        };
        let found = traits(&catalog, &avx);
        assert!(!found.is_empty());
        assert!(found.iter().all(|n| n.starts_with("HW_CPU_X86_AVX")));
        let used = TraitQuery {
            associated: Some(true),
            ..TraitQuery::default()
        };
        assert!(traits(&catalog, &used).is_empty(), "no provider has any");
        let listed = resource_classes(&catalog);
        assert_eq!(listed.len(), STANDARD_RESOURCE_CLASSES.len());
    }
}
