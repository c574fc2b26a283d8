//! Where callbacks may go: the destination policy.
//!
//! A callback must not turn berth into a way to reach what only berth can reach. So by default
//! a callback address may not be loopback, unspecified, link-local, private (RFC 1918, CGNAT's
//! shared space, IPv6 unique local), multicast, broadcast or reserved, nor an IPv6 address that
//! embeds such an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64's well-known prefix). The
//! operator's allow-list (`--callback-allow CIDR`) lets chosen ranges through.
//!
//! The policy is pure: [`Destinations::check`] classifies one address. A literal address in a
//! `callbackUri` is checked when the subscription is made and again at each delivery; a host
//! name is checked at each delivery, on every address it resolves to, by the notifier's
//! resolver (the connection then goes only to addresses that passed).

use ipnet::IpNet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::{Host, Url};

/// Why an address is refused: the class it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 0.0.0.0/8 ("this network"), ::.
    Unspecified,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7 (unique local), fec0::/10.
    Private,
    /// 100.64.0.0/10, carrier-grade NAT's shared space.
    Shared,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 240.0.0.0/4 (future use) except the broadcast address.
    Reserved,
}

impl Class {
    /// The class with its article, as messages say it.
    pub fn describe(self) -> &'static str {
        match self {
            Class::Loopback => "a loopback address",
            Class::Unspecified => "an unspecified address",
            Class::LinkLocal => "a link-local address",
            Class::Private => "a private address",
            Class::Shared => "a shared (carrier-grade NAT) address",
            Class::Multicast => "a multicast address",
            Class::Broadcast => "a broadcast address",
            Class::Reserved => "a reserved address",
        }
    }
}

/// The refused class of `ip`, or `None` for an address callbacks may reach by default.
pub fn class_of(ip: IpAddr) -> Option<Class> {
    match ip {
        IpAddr::V4(v4) => class_of_v4(v4),
        IpAddr::V6(v6) => class_of_v6(v6),
    }
}

fn class_of_v4(ip: Ipv4Addr) -> Option<Class> {
    let [a, b, ..] = ip.octets();
    match () {
        () if a == 0 => Some(Class::Unspecified),
        () if ip.is_loopback() => Some(Class::Loopback),
        () if ip.is_link_local() => Some(Class::LinkLocal),
        () if ip.is_private() => Some(Class::Private),
        () if a == 100 && (b & 0xc0) == 64 => Some(Class::Shared),
        () if ip.is_multicast() => Some(Class::Multicast),
        () if ip.is_broadcast() => Some(Class::Broadcast),
        () if a >= 240 => Some(Class::Reserved),
        () => None,
    }
}

fn class_of_v6(ip: Ipv6Addr) -> Option<Class> {
    if let Some(v4) = embedded_v4(ip) {
        return class_of_v4(v4);
    }
    let first = ip.segments()[0];
    match () {
        () if ip.is_unspecified() => Some(Class::Unspecified),
        () if ip.is_loopback() => Some(Class::Loopback),
        () if (first & 0xffc0) == 0xfe80 => Some(Class::LinkLocal),
        () if (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfec0 => Some(Class::Private),
        () if ip.is_multicast() => Some(Class::Multicast),
        () => None,
    }
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped (`::ffff:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`, but not `::` or `::1`) or NAT64's well-known prefix
/// (`64:ff9b::a.b.c.d`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    // The low 32 bits.
    let low = Ipv4Addr::from_bits(ip.to_bits() as u32);
    match s[..6] {
        [0, 0, 0, 0, 0, 0] if !ip.is_unspecified() && !ip.is_loopback() => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0] => Some(low),
        _ => None,
    }
}

/// An address the policy refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The address.
    pub ip: IpAddr,
    /// Why.
    pub class: Class,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "destination {} is {}; allow it with --callback-allow",
            self.ip,
            self.class.describe()
        )
    }
}

impl std::error::Error for Refused {}

/// Why a callback URL is refused before any address is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlRefused {
    /// It carries `user:password@`.
    UserInfo,
    /// Its host is a literal address the policy refuses.
    Address(Refused),
}

impl fmt::Display for UrlRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlRefused::UserInfo => f.write_str(
                "user info (user:password@) is not accepted in a callback URL; sign notifications with authentication.secret instead",
            ),
            UrlRefused::Address(refused) => refused.fmt(f),
        }
    }
}

impl std::error::Error for UrlRefused {}

/// The destination policy: the refused classes, less the operator's allowed ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations {
    allow: Vec<IpNet>,
}

impl Destinations {
    /// The default policy with `allow` let through.
    pub fn new(allow: Vec<IpNet>) -> Destinations {
        Destinations { allow }
    }

    /// The allowed ranges.
    pub fn allowed(&self) -> &[IpNet] {
        &self.allow
    }

    /// `Ok` when callbacks may reach `ip`: it is in no refused class, or it (or the IPv4
    /// address it embeds) is in an allowed range.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let Some(class) = class_of(ip) else {
            return Ok(());
        };
        let embedded = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        let allowed = self
            .allow
            .iter()
            .any(|net| net.contains(&ip) || embedded.is_some_and(|v4| net.contains(&v4)));
        match allowed {
            true => Ok(()),
            false => Err(Refused { ip, class }),
        }
    }

    /// What can be checked of `url` without resolving it: no user info, and a literal address
    /// host (in any of the forms WHATWG parsing accepts: `0x7f000001`, `2130706433`,
    /// `0177.0.0.1`, `[::ffff:127.0.0.1]`) that [`Destinations::check`] lets through. A host
    /// name passes here; its addresses are checked when it is resolved.
    pub fn check_url(&self, url: &Url) -> Result<(), UrlRefused> {
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlRefused::UserInfo);
        }
        let ip = match url.host() {
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(Host::Domain(_)) | None => return Ok(()),
        };
        self.check(ip).map_err(UrlRefused::Address)
    }
}

/// Parses an allow-list: CIDR ranges (`10.1.0.0/16`, `fd00::/8`) or single addresses, each item
/// possibly a comma-separated list.
pub fn parse_allow<S: AsRef<str>>(items: &[S]) -> Result<Vec<IpNet>, String> {
    parse_ranges(items, "--callback-allow")
}

/// Parses address ranges given to `flag`: CIDR ranges or single addresses, each item possibly a
/// comma-separated list.
pub fn parse_ranges<S: AsRef<str>>(items: &[S], flag: &str) -> Result<Vec<IpNet>, String> {
    items
        .iter()
        .flat_map(|item| item.as_ref().split(','))
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(|text| {
            text.parse::<IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                .map(|net| net.trunc())
                .map_err(|_| format!("{flag} {text:?} is not a CIDR range like 10.1.0.0/16"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn every_refused_class_is_refused_by_default() {
        let policy = Destinations::default();
        for (text, class) in [
            ("127.0.0.1", Class::Loopback),
            ("127.255.0.9", Class::Loopback),
            ("::1", Class::Loopback),
            ("0.0.0.0", Class::Unspecified),
            ("0.1.2.3", Class::Unspecified),
            ("::", Class::Unspecified),
            ("169.254.169.254", Class::LinkLocal),
            ("fe80::1", Class::LinkLocal),
            ("febf::1", Class::LinkLocal),
            ("10.0.0.1", Class::Private),
            ("172.16.0.1", Class::Private),
            ("172.31.255.255", Class::Private),
            ("192.168.1.1", Class::Private),
            ("fc00::1", Class::Private),
            ("fd12:3456::1", Class::Private),
            ("fec0::1", Class::Private),
            ("100.64.0.1", Class::Shared),
            ("100.127.255.255", Class::Shared),
            ("224.0.0.1", Class::Multicast),
            ("239.255.255.250", Class::Multicast),
            ("ff02::1", Class::Multicast),
            ("255.255.255.255", Class::Broadcast),
            ("240.0.0.1", Class::Reserved),
            ("::ffff:127.0.0.1", Class::Loopback),
            ("::ffff:169.254.169.254", Class::LinkLocal),
            ("::ffff:10.0.0.1", Class::Private),
            ("::127.0.0.1", Class::Loopback),
            ("::10.0.0.1", Class::Private),
            ("64:ff9b::192.168.0.1", Class::Private),
        ] {
            let address = ip(text);
            assert_eq!(class_of(address), Some(class), "{text}");
            assert_eq!(
                policy.check(address),
                Err(Refused { ip: address, class }),
                "{text}"
            );
        }
    }

    #[test]
    fn public_addresses_pass() {
        let policy = Destinations::default();
        for text in [
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "169.253.0.1",
            "223.255.255.255",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "fe00::1",
        ] {
            assert_eq!(class_of(ip(text)), None, "{text}");
            assert!(policy.check(ip(text)).is_ok(), "{text}");
        }
    }

    #[test]
    fn the_allow_list_lets_its_ranges_through() {
        let policy = Destinations::new(
            parse_allow(&["127.0.0.0/8, 10.1.0.0/16", "fd00::/8", "169.254.169.254"])
                .expect("parsed"),
        );
        for text in [
            "127.0.0.1",
            "127.9.9.9",
            "::ffff:127.0.0.1",
            "10.1.200.3",
            "fd00::5",
            "169.254.169.254",
        ] {
            assert!(policy.check(ip(text)).is_ok(), "{text}");
        }
        for text in [
            "::1",
            "10.2.0.1",
            "169.254.169.253",
            "fc00::1",
            "192.168.0.1",
        ] {
            assert!(policy.check(ip(text)).is_err(), "{text}");
        }
        assert_eq!(
            parse_allow(&["10.1.2.3/16"]).expect("parsed"),
            vec!["10.1.0.0/16".parse::<IpNet>().expect("net")],
            "host bits are dropped"
        );
        for bad in ["10.1.0.0/33", "localhost", "10.1/16"] {
            let error = parse_allow(&[bad]).expect_err(bad);
            assert!(error.contains("--callback-allow"), "{error}");
        }
    }

    #[test]
    fn literal_hosts_in_every_spelling_are_checked_and_user_info_is_refused() {
        let policy = Destinations::default();
        for (url, refused) in [
            ("http://127.0.0.1:9000/x", "127.0.0.1"),
            ("http://0x7f000001/", "127.0.0.1"),
            ("http://2130706433/", "127.0.0.1"),
            ("http://0177.0.0.1/", "127.0.0.1"),
            ("http://127.1/", "127.0.0.1"),
            ("http://[::1]/", "::1"),
            ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
            (
                "https://169.254.169.254/latest/meta-data",
                "169.254.169.254",
            ),
            ("http://0/", "0.0.0.0"),
        ] {
            let parsed = Url::parse(url).expect("parsed");
            let error = policy.check_url(&parsed).expect_err(url);
            assert!(
                matches!(error, UrlRefused::Address(r) if r.ip == ip(refused)),
                "{url}: {error}"
            );
        }
        let error = policy
            .check_url(&Url::parse("http://0x7f000001/").expect("parsed"))
            .expect_err("loopback")
            .to_string();
        assert_eq!(
            error,
            "destination 127.0.0.1 is a loopback address; allow it with --callback-allow"
        );
        for url in ["http://user:pw@example.com/", "http://user@example.com/"] {
            let parsed = Url::parse(url).expect("parsed");
            assert_eq!(
                policy.check_url(&parsed),
                Err(UrlRefused::UserInfo),
                "{url}"
            );
        }
        for url in [
            "https://example.com/hook",
            "http://8.8.8.8/",
            "http://localhost/",
        ] {
            let parsed = Url::parse(url).expect("parsed");
            assert!(policy.check_url(&parsed).is_ok(), "{url}");
        }
    }
}
