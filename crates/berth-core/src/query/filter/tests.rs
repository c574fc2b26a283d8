//! The filter language: parsing, refusals and their messages, matching rules, and a round trip
//! through JSON for generated filters.

use super::*;
use proptest::prelude::*;

fn s(text: &str) -> AttrValue {
    AttrValue::String(text.to_owned())
}

fn n(number: f64) -> AttrValue {
    AttrValue::Number(number)
}

fn b(value: bool) -> AttrValue {
    AttrValue::Bool(value)
}

/// Whether the filter text matches a host with these properties.
fn matches(filter: &str, host: &[(&str, AttrValue)]) -> bool {
    let filter = Filter::parse(filter).expect("valid filter");
    let lookup = |name: &str| {
        host.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    };
    filter.matches(&lookup)
}

fn refused(filter: &str) -> FilterError {
    Filter::parse(filter).expect_err("refused")
}

fn message(filter: &str) -> String {
    refused(filter).to_string()
}

fn compare(op: Op, key: &str, value: Literal) -> Filter {
    Filter::Compare {
        op,
        key: key.to_owned(),
        value,
    }
}

fn text(value: &str) -> Literal {
    Literal::String(value.to_owned())
}

#[test]
fn empty_forms_mean_all() {
    for empty in ["", "   ", "\n\t", "[]", " [ ] ", "\"\""] {
        assert_eq!(Filter::parse(empty), Ok(Filter::All), "{empty:?}");
    }
    assert!(Filter::All.matches(&|_| None));
}

#[test]
fn blazar_examples_parse_and_match() {
    let az = Filter::parse("[\"==\", \"$availability_zone\", \"az1\"]").unwrap();
    assert_eq!(az, compare(Op::Eq, "availability_zone", text("az1")));
    let both = "[\"and\", [\">=\", \"$memory_mb\", \"65536\"], [\"==\", \"$gpu\", \"true\"]]";
    assert_eq!(
        Filter::parse(both).unwrap(),
        Filter::And(vec![
            compare(Op::Ge, "memory_mb", text("65536")),
            compare(Op::Eq, "gpu", text("true")),
        ])
    );
    let big = [("memory_mb", n(131_072.0)), ("gpu", b(true))];
    assert!(matches(both, &big));
    let small = [("memory_mb", s("9000")), ("gpu", s("True"))];
    assert!(!matches(both, &small), "9000 < 65536 numerically");
    let no_gpu = [("memory_mb", n(65_536.0)), ("gpu", s("false"))];
    assert!(!matches(both, &no_gpu));
}

#[test]
fn every_comparison_operator() {
    let host = [("x", n(5.0))];
    let cases = [
        ("==", 5, true),
        ("=", 5, true),
        ("==", 6, false),
        ("!=", 5, false),
        ("!=", 6, true),
        ("<", 6, true),
        ("<", 5, false),
        ("<=", 5, true),
        ("<=", 4, false),
        (">", 4, true),
        (">", 5, false),
        (">=", 5, true),
        (">=", 6, false),
    ];
    for (op, value, expected) in cases {
        let filter = format!("[\"{op}\", \"$x\", {value}]");
        assert_eq!(matches(&filter, &host), expected, "{filter}");
    }
}

#[test]
fn single_equals_is_double_equals() {
    assert_eq!(
        Filter::parse("[\"=\", \"$a\", \"b\"]"),
        Filter::parse("[\"==\", \"$a\", \"b\"]")
    );
}

#[test]
fn numeric_strings_compare_as_numbers() {
    assert!(matches("[\">\", \"$v\", \"9\"]", &[("v", s("10"))]));
    assert!(matches("[\"<\", \"$v\", 10]", &[("v", s("9"))]));
    assert!(matches("[\"==\", \"$v\", \"1e3\"]", &[("v", n(1000.0))]));
    assert!(matches("[\"==\", \"$v\", 2.5]", &[("v", s(" 2.50 "))]));
}

#[test]
fn non_numeric_host_values_compare_as_strings() {
    assert!(!matches("[\">\", \"$v\", \"9\"]", &[("v", s("10a"))]));
    assert!(matches("[\"<\", \"$v\", \"9\"]", &[("v", s("10a"))]));
    assert!(matches("[\">\", \"$v\", 5]", &[("v", s("abc"))]));
    assert!(matches("[\"<\", \"$v\", \"beta\"]", &[("v", s("alpha"))]));
    assert!(matches("[\"==\", \"$v\", \"4\"]", &[("v", n(4.0))]));
    assert!(!matches("[\"==\", \"$v\", \"inf\"]", &[("v", s("Inf"))]));
}

#[test]
fn numeric_host_and_word_literal_compare_as_text() {
    assert!(matches("[\"==\", \"$v\", \"12\"]", &[("v", n(12.0))]));
    assert!(matches("[\"<\", \"$v\", \"abc\"]", &[("v", n(12.0))]));
}

#[test]
fn booleans_compare_case_insensitively() {
    assert!(matches("[\"==\", \"$gpu\", true]", &[("gpu", s("True"))]));
    assert!(matches("[\"==\", \"$gpu\", \"true\"]", &[("gpu", b(true))]));
    assert!(matches(
        "[\"==\", \"$gpu\", \"FALSE\"]",
        &[("gpu", s("false"))]
    ));
    assert!(matches("[\"!=\", \"$gpu\", false]", &[("gpu", b(true))]));
    assert!(!matches("[\"==\", \"$gpu\", false]", &[("gpu", s("True"))]));
    assert!(!matches("[\"==\", \"$gpu\", true]", &[("gpu", s("yes"))]));
    assert!(!matches("[\"==\", \"$gpu\", true]", &[("gpu", n(1.0))]));
}

#[test]
fn ordering_booleans_from_strings_is_false() {
    for op in ["<", "<=", ">", ">="] {
        let filter = format!("[\"{op}\", \"$gpu\", \"true\"]");
        assert!(!matches(&filter, &[("gpu", b(true))]), "{filter}");
        assert!(!matches(&filter, &[("gpu", s("false"))]), "{filter}");
    }
}

#[test]
fn ordering_a_boolean_literal_is_refused() {
    let error = refused("[\"<\", \"$gpu\", true]");
    assert!(
        matches!(error, FilterError::TypeMismatch { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("\"<\" cannot order the boolean true")
    );
}

#[test]
fn missing_properties_only_differ() {
    let host = [("other", s("x"))];
    for op in ["==", "<", "<=", ">", ">="] {
        assert!(!matches(&format!("[\"{op}\", \"$gpu\", 1]"), &host), "{op}");
    }
    assert!(matches("[\"!=\", \"$gpu\", 1]", &host));
    assert!(!matches("[\"in\", \"$gpu\", 1, 2]", &host));
    assert!(matches("[\"not\", [\"==\", \"$gpu\", 1]]", &host));
}

#[test]
fn unordered_host_numbers_only_differ() {
    let host = [("x", n(f64::NAN))];
    assert!(!matches("[\"==\", \"$x\", 1]", &host));
    assert!(!matches("[\"<\", \"$x\", 1]", &host));
    assert!(matches("[\"!=\", \"$x\", 1]", &host));
}

#[test]
fn in_spread_and_list_forms() {
    let spread = Filter::parse("[\"in\", \"$az\", \"az1\", \"az2\"]").unwrap();
    let list = Filter::parse("[\"in\", \"$az\", [\"az1\", \"az2\"]]").unwrap();
    assert_eq!(spread, list);
    assert_eq!(
        spread,
        Filter::In {
            key: "az".to_owned(),
            values: vec![text("az1"), text("az2")],
        }
    );
    assert!(matches(
        "[\"in\", \"$az\", \"az1\", \"az2\"]",
        &[("az", s("az2"))]
    ));
    assert!(!matches(
        "[\"in\", \"$az\", [\"az1\", \"az2\"]]",
        &[("az", s("az3"))]
    ));
    assert!(matches(
        "[\"in\", \"$cpus\", [\"8\", 16]]",
        &[("cpus", s("16.0"))]
    ));
    assert!(matches("[\"in\", \"$gpu\", true]", &[("gpu", s("TRUE"))]));
}

#[test]
fn nesting_and_or_not() {
    let filter = "[\"or\", [\"and\", [\"==\", \"$az\", \"az1\"], [\"not\", [\"==\", \"$gpu\", true]]], [\">\", \"$mem\", 100]]";
    assert!(matches(filter, &[("az", s("az1"))]));
    assert!(!matches(filter, &[("az", s("az1")), ("gpu", b(true))]));
    assert!(matches(filter, &[("az", s("az2")), ("mem", n(101.0))]));
    assert!(!matches(filter, &[("az", s("az2")), ("mem", n(100.0))]));
    assert!(matches(
        "[\"not\", [\"not\", [\"==\", \"$a\", 1]]]",
        &[("a", n(1.0))]
    ));
    assert!(matches("[\"and\", [\"==\", \"$a\", 1]]", &[("a", n(1.0))]));
    assert!(!matches("[\"or\", [\"==\", \"$a\", 2]]", &[("a", n(1.0))]));
}

#[test]
fn refuses_text_that_is_not_json() {
    let error = refused("[\"==\", \"$a\"");
    assert!(matches!(error, FilterError::Malformed { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("malformed filter: not valid JSON")
    );
    assert!(matches!(refused("az1"), FilterError::Malformed { .. }));
}

#[test]
fn refuses_json_that_is_not_an_array() {
    assert_eq!(
        message("{\"az\": \"az1\"}"),
        "malformed filter: a filter is a JSON array, got an object {\"az\":\"az1\"}"
    );
    assert_eq!(
        message("\"az1\""),
        "malformed filter: a filter is a JSON array, got a string \"az1\""
    );
    assert!(message("null").ends_with("got null"));
    assert!(message("42").ends_with("got a number 42"));
}

#[test]
fn refuses_bad_operators() {
    assert_eq!(
        message("[\"\", \"$a\", 1]"),
        "malformed filter: empty operator in [\"\",\"$a\",1]"
    );
    for op in ["like", "~", "AND", "=~"] {
        let error = refused(&format!("[\"{op}\", \"$a\", 1]"));
        assert_eq!(error, FilterError::UnknownOperator { op: op.to_owned() });
    }
    assert_eq!(
        refused("[\"like\", \"$a\", \"x%\"]").in_field("resource_properties"),
        "unknown operator \"like\" in resource_properties"
    );
    assert!(message("[1, \"$a\", 1]").contains("an operator is a string, got 1"));
    assert!(message("[\"and\", []]").contains("empty clause []"));
    assert!(message("[\"and\", \"x\"]").contains("a clause is a JSON array, got a string \"x\""));
}

#[test]
fn refuses_comparisons_of_the_wrong_arity() {
    assert_eq!(
        message("[\"==\", \"$a\"]"),
        "malformed filter: \"==\" takes a key and one value, got 1 argument(s) in [\"==\",\"$a\"]"
    );
    assert!(message("[\"<\", \"$a\", 1, 2]").contains("\"<\" takes a key and one value, got 3"));
    assert!(message("[\"=\"]").contains("\"=\" takes a key and one value, got 0"));
}

#[test]
fn refuses_bad_keys() {
    let bad = [
        ("[\"==\", 42, 1]", "42"),
        ("[\"==\", \"gpu\", 1]", "\"gpu\""),
        ("[\"==\", \"$\", 1]", "\"$\""),
        ("[\"in\", null, 1]", "null"),
        ("[\"==\", [\"$a\"], 1]", "[\"$a\"]"),
    ];
    for (filter, key) in bad {
        assert_eq!(
            refused(filter),
            FilterError::BadKey {
                key: key.to_owned()
            },
            "{filter}"
        );
    }
    assert_eq!(
        message("[\"==\", \"gpu\", 1]"),
        "bad property key \"gpu\": a key is a string \"$name\""
    );
}

#[test]
fn refuses_values_that_are_not_scalars() {
    let cases = [
        ("[\"==\", \"$a\", {\"b\": 1}]", "got an object {\"b\":1}"),
        ("[\"==\", \"$a\", [1]]", "got an array [1]"),
        ("[\"==\", \"$a\", null]", "got null in"),
        ("[\"in\", \"$a\", 1, [2]]", "got an array [2]"),
        ("[\"in\", \"$a\", [[2]]]", "got an array [2]"),
    ];
    for (filter, part) in cases {
        let error = refused(filter);
        assert!(matches!(error, FilterError::Malformed { .. }), "{filter}");
        assert!(error.to_string().contains(part), "{filter}: {error}");
    }
}

#[test]
fn refuses_empty_logical_clauses() {
    assert_eq!(
        message("[\"and\"]"),
        "malformed filter: \"and\" needs at least one clause in [\"and\"]"
    );
    assert!(message("[\"or\"]").contains("\"or\" needs at least one clause"));
    assert!(message("[\"not\"]").contains("\"not\" takes exactly one clause, got 0"));
    let two = "[\"not\", [\"==\", \"$a\", 1], [\"==\", \"$b\", 1]]";
    assert!(message(two).contains("\"not\" takes exactly one clause, got 2"));
}

#[test]
fn refuses_in_without_values() {
    assert!(message("[\"in\", \"$a\"]").contains("\"in\" needs at least one value"));
    assert!(message("[\"in\", \"$a\", []]").contains("\"in\" needs at least one value"));
    assert!(message("[\"in\"]").contains("\"in\" takes a key and values"));
}

fn nested_nots(depth: usize) -> serde_json::Value {
    let mut value = serde_json::json!(["==", "$a", 1]);
    for _ in 1..depth {
        value = serde_json::json!(["not", value]);
    }
    value
}

#[test]
fn bounds_the_depth() {
    assert!(Filter::from_json(&nested_nots(FILTER_DEPTH_MAX)).is_ok());
    let error = Filter::from_json(&nested_nots(FILTER_DEPTH_MAX + 1)).unwrap_err();
    assert_eq!(
        error,
        FilterError::TooComplex {
            detail: "nested deeper than 32 levels".to_owned()
        }
    );
    assert_eq!(
        error.to_string(),
        "filter too complex: nested deeper than 32 levels"
    );
}

fn wide_and(clauses: usize) -> serde_json::Value {
    let mut items = vec![serde_json::json!("and")];
    items.extend((0..clauses).map(|i| serde_json::json!(["==", format!("$p{i}"), i])));
    serde_json::Value::Array(items)
}

#[test]
fn bounds_the_nodes() {
    assert!(Filter::from_json(&wide_and(FILTER_NODES_MAX - 1)).is_ok());
    let error = Filter::from_json(&wide_and(FILTER_NODES_MAX)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "filter too complex: more than 1000 nodes"
    );
    let mut values = vec![serde_json::json!("in"), serde_json::json!("$a")];
    values.extend((0..FILTER_NODES_MAX).map(|i| serde_json::json!(i)));
    let error = Filter::from_json(&serde_json::Value::Array(values)).unwrap_err();
    assert!(matches!(error, FilterError::TooComplex { .. }));
}

#[test]
fn long_offending_parts_are_cut() {
    let filter = format!("[\"==\", \"$a\", {{\"k\": \"{}\"}}]", "é".repeat(500));
    let message = message(&filter);
    assert!(message.contains('…'));
    assert!(message.chars().count() < 300, "{message}");
}

#[test]
fn properties_are_sorted_and_deduplicated() {
    let filter = Filter::parse(
        "[\"or\", [\"==\", \"$zone\", 1], [\"not\", [\"in\", \"$gpu\", 1]], [\"<\", \"$zone\", 3], [\"and\", [\"==\", \"$cpu\", 1]]]",
    )
    .unwrap();
    assert_eq!(filter.properties(), vec!["cpu", "gpu", "zone"]);
    assert!(Filter::All.properties().is_empty());
}

#[test]
fn check_known_names_the_first_unknown() {
    let filter = Filter::parse("[\"and\", [\"==\", \"$zz\", 1], [\"==\", \"$gpuu\", 1]]").unwrap();
    let error = filter.check_known(|name| name == "cpu").unwrap_err();
    assert_eq!(
        error,
        FilterError::UnknownProperty {
            name: "gpuu".to_owned()
        }
    );
    assert_eq!(error.to_string(), "property \"$gpuu\" is not known");
    assert_eq!(
        error.in_field("hypervisor_properties"),
        "property \"$gpuu\" is not known in hypervisor_properties"
    );
    assert_eq!(filter.check_known(|_| true), Ok(()));
}

#[test]
fn and_flattens() {
    let a = compare(Op::Eq, "a", Literal::Number(1.0));
    let b = compare(Op::Eq, "b", Literal::Number(2.0));
    let c = compare(Op::Eq, "c", Literal::Number(3.0));
    assert_eq!(Filter::All.and(Filter::All), Filter::All);
    assert_eq!(Filter::All.and(a.clone()), a);
    assert_eq!(a.clone().and(Filter::All), a);
    assert_eq!(
        a.clone().and(b.clone()),
        Filter::And(vec![a.clone(), b.clone()])
    );
    let ab = Filter::And(vec![a.clone(), b.clone()]);
    assert_eq!(
        ab.clone().and(c.clone()),
        Filter::And(vec![a.clone(), b.clone(), c.clone()])
    );
    assert_eq!(
        c.clone().and(ab.clone()),
        Filter::And(vec![c.clone(), a.clone(), b.clone()])
    );
    assert_eq!(
        ab.clone().and(ab),
        Filter::And(vec![a.clone(), b.clone(), a, b])
    );
}

#[test]
fn to_json_is_canonical() {
    let filter =
        Filter::parse("[\"and\", [\"=\", \"$a\", \"x\"], [\"in\", \"$b\", [1, true]]]").unwrap();
    assert_eq!(
        filter.to_json(),
        serde_json::json!(["and", ["==", "$a", "x"], ["in", "$b", 1.0, true]])
    );
    assert_eq!(Filter::All.to_json(), serde_json::json!([]));
}

fn literal_strategy() -> impl Strategy<Value = Literal> {
    prop_oneof![
        "\\PC{0,8}".prop_map(Literal::String),
        (-8000i32..8000).prop_map(|i| Literal::Number(f64::from(i) / 8.0)),
        any::<bool>().prop_map(Literal::Bool),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Eq),
        Just(Op::Ne),
        Just(Op::Lt),
        Just(Op::Le),
        Just(Op::Gt),
        Just(Op::Ge),
    ]
}

fn leaf_strategy() -> impl Strategy<Value = Filter> {
    let key = "[a-z_][a-z0-9_]{0,6}";
    prop_oneof![
        (op_strategy(), key, literal_strategy()).prop_map(|(op, key, value)| {
            let value = match value {
                Literal::Bool(b) if op.is_ordering() => Literal::String(b.to_string()),
                other => other,
            };
            Filter::Compare { op, key, value }
        }),
        (key, proptest::collection::vec(literal_strategy(), 1..4))
            .prop_map(|(key, values)| Filter::In { key, values }),
    ]
}

fn filter_strategy() -> impl Strategy<Value = Filter> {
    leaf_strategy().prop_recursive(5, 64, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Filter::And),
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Filter::Or),
            inner.prop_map(|clause| Filter::Not(Box::new(clause))),
        ]
    })
}

proptest! {
    #[test]
    fn json_round_trips(filter in filter_strategy()) {
        let text = serde_json::to_string(&filter.to_json()).unwrap();
        prop_assert_eq!(Filter::parse(&text), Ok(filter));
    }

    #[test]
    fn not_inverts(filter in filter_strategy(), value in literal_strategy()) {
        let host = match value {
            Literal::String(s) => AttrValue::String(s),
            Literal::Number(n) => AttrValue::Number(n),
            Literal::Bool(b) => AttrValue::Bool(b),
        };
        let lookup = |name: &str| name.starts_with('a').then(|| host.clone());
        let negated = Filter::Not(Box::new(filter.clone()));
        prop_assert_eq!(negated.matches(&lookup), !filter.matches(&lookup));
    }
}
