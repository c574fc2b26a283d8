//! The time-indexed capacity ledger: what leases reserve on each host, as step functions of time.
//!
//! A [`Hold`] is what one reservation holds on one host (a provider) over a half-open [`Window`]
//! `[start, end)`: an amount per resource class, and possibly the whole host exclusively.
//! Back-to-back windows (one ends exactly when the next starts) share no instant.
//!
//! Every hold is stored once, by reservation: in a list of its reservation's, or not at all
//! when a [`Holder`] describes it (a lease: the catalog's ledger keeps the lease and reads a
//! reservation's holds from it when asked for). Per host, a [`Ledger`] keeps a *timeline*: a step
//! function from instants to levels (`BTreeMap<Instant, Level>`, where a breakpoint's level holds
//! from that instant until the next breakpoint, and the level before the first breakpoint is
//! zero). A level counts the holds and the exclusive holds covering an instant and sums their
//! amounts. The map is kept canonical: no breakpoint repeats its predecessor's level. So
//! [`Ledger::peak`] and [`Ledger::is_free`] cost `O(log n + k)`, `k` being the breakpoints inside
//! the window, and never scan the reservations; adding or removing a hold costs the same over its
//! own window. Holds of the reservations a query excludes are subtracted instant by instant.
//!
//! Compactness: each timeline interns the classes it has seen in a small `Vec<ResourceClass>`,
//! and a level stores its amounts as a `Box<[u64]>` indexed by that table, trailing zeros trimmed
//! (no allocation at all for a level without amounts). A hold's amounts are a shared list
//! ([`Amounts`]): the ledger keeps one copy of each distinct list (instance reservations come in
//! a few sizes), and each reservation's holds are one list allocated at its length. The ledger
//! keeps no index by end ([`Ledger::forget_before`], housekeeping nothing calls on a hot path,
//! visits the reservations instead). The cost of one stored hold with three classes, on a
//! 64-bit target, is about:
//!
//! | part                                                        | bytes |
//! |-------------------------------------------------------------|------:|
//! | the [`Hold`] itself, in its reservation's list (one hold; none when a holder describes it) | 96 |
//! | its amounts (shared with every hold of the same size)       |     0 |
//! | its reservation's entry in the by-reservation map           |   ~40 |
//! | its `(start, reservation)` key in the host's start index    |   ~40 |
//! | at most 2 breakpoints (8 + 24 each in the map, 32 of amounts) | ~170 |
//!
//! that is about 350 bytes per hold; measured in a process's resident memory (allocator
//! overhead and node slack included), a ledger of 1,000,000 holds added one by one takes about
//! 380 bytes per hold (`docs/benchmarks.md`, "Memory of the ledger").
//! Timelines, per-reservation hold lists, the by-reservation maps and the amount lists sit behind
//! `Arc`s, so copying a ledger (the writers' working copy of the catalog) copies pointers; a copy
//! that changes a timeline or a list clones that one alone, and its first change of a
//! by-reservation map clones that map.
//!
//! [`Ledger::from_holds`] builds a ledger from many holds at once (a restart): each index is
//! sorted and bulk-loaded, and each host's timeline is built in one sweep over its holds'
//! boundaries, with the same result as adding the holds one by one.

use crate::model::id::{ProviderId, ReservationId};
use crate::model::name::ResourceClass;
use crate::model::time::{Instant, Span};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Bound, ControlFlow};
use std::sync::Arc;
use uuid::Uuid;

/// A half-open window `[start, end)` of time. Its fields are private so that every window made
/// outside this module goes through [`Window::new`] (which refuses `start >= end`) or is
/// [`Window::ALWAYS`]:
///
/// ```
/// use berth_core::Instant;
/// use berth_core::model::ledger::Window;
/// let (a, b) = (Instant::from_micros(1), Instant::from_micros(2));
/// assert_eq!(Window::new(a, b).map(|w| (w.start(), w.end())), Some((a, b)));
/// assert_eq!(Window::new(b, a), None);
/// ```
///
/// ```compile_fail
/// use berth_core::Instant;
/// use berth_core::model::ledger::Window;
/// let backwards = Window { start: Instant::from_micros(2), end: Instant::from_micros(1) };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    /// All of time: for "now or later, for as long as anything is held".
    pub const ALWAYS: Window = Window {
        start: Instant::from_micros(i64::MIN),
        end: Instant::from_micros(i64::MAX),
    };

    /// The window `[start, end)`; `None` unless `start < end`.
    pub fn new(start: Instant, end: Instant) -> Option<Window> {
        (start < end).then_some(Window { start, end })
    }

    /// The window of the one instant `t` (`[t, t + 1 µs)`; at the far future, the last instant
    /// before it): what is held at `t` is what overlaps it.
    ///
    /// ```
    /// use berth_core::Instant;
    /// use berth_core::model::ledger::Window;
    /// let (t, held) = (Instant::from_micros(10), Window::new(Instant::from_micros(5), Instant::from_micros(11)));
    /// assert!(Window::instant(t).overlaps(&held.unwrap()));
    /// assert!(!Window::instant(Instant::from_micros(11)).overlaps(&held.unwrap()));
    /// assert!(!Window::instant(Instant::from_micros(i64::MAX)).is_empty());
    /// ```
    pub fn instant(t: Instant) -> Window {
        match t.as_micros() {
            i64::MAX => Window {
                start: Instant::from_micros(i64::MAX - 1),
                end: t,
            },
            micros => Window {
                start: t,
                end: Instant::from_micros(micros + 1),
            },
        }
    }

    /// The window from `t` to the end of time (`[t, far future)`): what is held at `t` or later
    /// overlaps it. At the far future itself, its last instant, as [`Window::instant`].
    ///
    /// ```
    /// use berth_core::Instant;
    /// use berth_core::model::ledger::Window;
    /// let (t, later) = (Instant::from_micros(10), Window::new(Instant::from_micros(50), Instant::from_micros(60)));
    /// assert!(Window::onwards(t).overlaps(&later.unwrap()));
    /// assert!(!Window::onwards(Instant::from_micros(60)).overlaps(&later.unwrap()));
    /// assert_eq!(Window::onwards(t).end(), Instant::from_micros(i64::MAX));
    /// assert!(!Window::onwards(Instant::from_micros(i64::MAX)).is_empty());
    /// ```
    pub fn onwards(t: Instant) -> Window {
        match t.as_micros() {
            i64::MAX => Window::instant(t),
            _ => Window {
                start: t,
                end: Instant::from_micros(i64::MAX),
            },
        }
    }

    /// The first instant inside the window.
    pub const fn start(&self) -> Instant {
        self.start
    }

    /// The first instant after the window.
    pub const fn end(&self) -> Instant {
        self.end
    }

    /// Whether the window holds no instant (`start >= end`, only possible inside this module).
    pub fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    /// Whether `t` is inside the window.
    pub fn contains(&self, t: Instant) -> bool {
        self.start <= t && t < self.end
    }

    /// Whether both windows share at least one instant. Back-to-back windows do not.
    pub fn overlaps(&self, other: &Window) -> bool {
        self.start.max(other.start) < self.end.min(other.end)
    }

    /// The length (zero for an empty window).
    pub fn duration(&self) -> Span {
        self.end.since(self.start)
    }

    /// The window of the same duration starting at `start` (its end saturates at the far future).
    pub fn shifted_to(&self, start: Instant) -> Window {
        Window {
            start,
            end: start + self.duration(),
        }
    }
}

/// What one reservation holds on one host over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    /// The reservation holding.
    pub reservation: ReservationId,
    /// The host (provider) held. A floating-IP reservation's hold names its address here, by
    /// [`address_slot`]: the ledger keeps an address's timeline as it keeps a host's.
    pub host: ProviderId,
    /// When.
    pub window: Window,
    /// The whole host, exclusively (a host reservation).
    pub exclusive: bool,
    /// Amounts by class (an instance reservation's slots on this host, summed); may be empty.
    /// Shared: a ledger keeps one copy of each distinct list among its holds.
    pub amounts: Amounts,
}

/// What a hold takes, by class: a shared list, cheap to clone.
pub type Amounts = Arc<[(ResourceClass, u64)]>;

/// The distinct amount lists of a ledger's holds, so that holds of the same size share one
/// (most instance reservations have one of a few sizes). Bounded: past
/// [`Shapes::MAX`] lists, a new one is kept by its hold alone.
#[derive(Debug, Clone, Default)]
struct Shapes(std::collections::HashSet<Amounts>);

impl Shapes {
    /// The most distinct lists kept.
    const MAX: usize = 4_096;

    /// The shared list equal to `amounts`, kept when new.
    fn share(&mut self, amounts: &Amounts) -> Amounts {
        if let Some(known) = self.0.get(amounts) {
            return Arc::clone(known);
        }
        if self.0.len() < Shapes::MAX {
            self.0.insert(Arc::clone(amounts));
        }
        Arc::clone(amounts)
    }
}

/// The ledger slot of a floating IP: its address id taken as a host's, so that an address's
/// holds have a timeline like a host's (and admission tracks a taken address as a host taken
/// whole). An address's id is a uuid of its own, never a provider's, so the two do not meet.
pub const fn address_slot(address: Uuid) -> ProviderId {
    ProviderId::new(address)
}

/// Peak use of a host over a window: the maximum over the instants of the window of each
/// dimension separately (the maxima may be reached at different instants).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Peak {
    /// Most exclusive holds at any instant of the window.
    pub exclusive: u32,
    /// Most holds of any kind at any instant of the window.
    pub holds: u32,
    /// Per class, the largest amount reserved at any instant of the window, sorted by class.
    /// Classes never held in the window are absent.
    pub amounts: Vec<(ResourceClass, u64)>,
}

impl Peak {
    /// The peak amount of `class` (0 when never held in the window).
    pub fn amount(&self, class: &ResourceClass) -> u64 {
        self.amounts
            .iter()
            .find(|(held, _)| held == class)
            .map_or(0, |(_, amount)| *amount)
    }
}

/// The level of a step: what is reserved from one breakpoint until the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Level {
    holds: u32,
    exclusive: u32,
    /// By the timeline's class index; trailing zeros trimmed, so equal levels compare equal.
    amounts: Box<[u64]>,
}

impl Level {
    /// The contribution of `hold`, its classes indexed by `index` (unknown classes are skipped).
    fn of(hold: &Hold, mut index: impl FnMut(&ResourceClass) -> Option<usize>) -> Level {
        let mut amounts: Vec<u64> = Vec::new();
        for (class, amount) in hold.amounts.iter() {
            if *amount == 0 {
                continue;
            }
            let Some(i) = index(class) else { continue };
            if amounts.len() <= i {
                amounts.resize(i + 1, 0);
            }
            amounts[i] = amounts[i].saturating_add(*amount);
        }
        Level {
            holds: 1,
            exclusive: u32::from(hold.exclusive),
            amounts: amounts.into_boxed_slice(),
        }
    }

    fn is_zero(&self) -> bool {
        self.holds == 0 && self.exclusive == 0 && self.amounts.is_empty()
    }

    fn amount(&self, index: usize) -> u64 {
        self.amounts.get(index).copied().unwrap_or(0)
    }

    fn grow_to(&mut self, len: usize) {
        if self.amounts.len() < len {
            let mut grown = self.amounts.to_vec();
            grown.resize(len, 0);
            self.amounts = grown.into_boxed_slice();
        }
    }

    fn trim(&mut self) {
        let keep = self
            .amounts
            .iter()
            .rposition(|&a| a != 0)
            .map_or(0, |i| i + 1);
        if keep < self.amounts.len() {
            self.amounts = Box::from(&self.amounts[..keep]);
        }
    }

    fn add(&mut self, delta: &Level) {
        self.holds = self.holds.saturating_add(delta.holds);
        self.exclusive = self.exclusive.saturating_add(delta.exclusive);
        self.grow_to(delta.amounts.len());
        for (mine, more) in self.amounts.iter_mut().zip(&delta.amounts) {
            *mine = mine.saturating_add(*more);
        }
    }

    fn sub(&mut self, delta: &Level) {
        debug_assert!(self.holds >= delta.holds && self.exclusive >= delta.exclusive);
        self.holds = self.holds.saturating_sub(delta.holds);
        self.exclusive = self.exclusive.saturating_sub(delta.exclusive);
        for (mine, less) in self.amounts.iter_mut().zip(&delta.amounts) {
            debug_assert!(*mine >= *less);
            *mine = mine.saturating_sub(*less);
        }
        self.trim();
    }

    /// Raises every dimension to at least `other`'s.
    fn raise_to(&mut self, other: &Level) {
        self.holds = self.holds.max(other.holds);
        self.exclusive = self.exclusive.max(other.exclusive);
        self.grow_to(other.amounts.len());
        for (mine, theirs) in self.amounts.iter_mut().zip(&other.amounts) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Whether going from `self` to `next` lowers some dimension.
    fn decreases_to(&self, next: &Level) -> bool {
        next.holds < self.holds
            || next.exclusive < self.exclusive
            || self
                .amounts
                .iter()
                .enumerate()
                .any(|(i, &a)| next.amount(i) < a)
    }
}

/// One host's share of the ledger.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(PartialEq))]
struct Timeline {
    /// The classes seen on this host; a level's amounts are indexed by position here.
    classes: Vec<ResourceClass>,
    /// The canonical step function.
    steps: BTreeMap<Instant, Level>,
    /// `(start, reservation)` of every hold on this host, for [`Ledger::holds_on`].
    starts: BTreeSet<(Instant, ReservationId)>,
    /// The longest window ever held here (never lowered while the timeline lives).
    max_span: Span,
    /// How many holds are on this host.
    holds: usize,
}

impl Timeline {
    fn find_class(&self, class: &ResourceClass) -> Option<usize> {
        self.classes
            .iter()
            .position(|known| known.is_same(class) || known == class)
    }

    fn intern(&mut self, class: &ResourceClass) -> usize {
        self.find_class(class).unwrap_or_else(|| {
            self.classes.push(class.clone());
            self.classes.len() - 1
        })
    }

    /// The contribution of a hold already on this host.
    fn delta(&self, hold: &Hold) -> Level {
        Level::of(hold, |class| self.find_class(class))
    }

    fn insert(&mut self, hold: &Hold) {
        let delta = Level::of(hold, |class| Some(self.intern(class)));
        self.holds += 1;
        self.starts.insert((hold.window.start, hold.reservation));
        self.max_span = self.max_span.max(hold.window.duration());
        self.change(hold.window, &delta, Level::add);
    }

    /// The timeline of `holds`, all on one host, in the order they were added: the same as
    /// inserting them one by one, built in one sweep over their boundaries.
    fn from_holds(holds: &[&Hold]) -> Timeline {
        let mut line = Timeline {
            holds: holds.len(),
            ..Timeline::default()
        };
        let mut bounds = Vec::with_capacity(2 * holds.len());
        for (index, hold) in holds.iter().enumerate() {
            for (class, amount) in hold.amounts.iter() {
                if *amount != 0 {
                    line.intern(class);
                }
            }
            line.max_span = line.max_span.max(hold.window.duration());
            if !hold.window.is_empty() {
                // At one instant the holds that start are counted before those that end.
                bounds.push((hold.window.start, false, index));
                bounds.push((hold.window.end, true, index));
            }
        }
        line.starts = holds
            .iter()
            .map(|hold| (hold.window.start, hold.reservation))
            .collect();
        bounds.sort_unstable();
        let mut sum = Sum::new(line.classes.len());
        let mut steps: Vec<(Instant, Level)> = Vec::with_capacity(bounds.len());
        for at in bounds.chunk_by(|a, b| a.0 == b.0) {
            for &(_, ends, index) in at {
                sum.apply(holds[index], ends, |class| line.find_class(class));
            }
            let previous = steps.last().map(|(_, level)| level);
            if !sum.equals(previous) {
                steps.push((at[0].0, sum.level()));
            }
        }
        line.steps = steps.into_iter().collect();
        line
    }

    /// Takes `hold` off; `keep_start` when another hold still has its `(start, reservation)`.
    fn remove(&mut self, hold: &Hold, keep_start: bool) {
        let delta = self.delta(hold);
        self.holds -= 1;
        if !keep_start {
            self.starts.remove(&(hold.window.start, hold.reservation));
        }
        self.change(hold.window, &delta, Level::sub);
    }

    fn level_at(&self, t: Instant) -> Option<&Level> {
        self.steps.range(..=t).next_back().map(|(_, level)| level)
    }

    fn change(&mut self, window: Window, delta: &Level, op: fn(&mut Level, &Level)) {
        if window.is_empty() {
            return;
        }
        self.split(window.start);
        self.split(window.end);
        for (_, level) in self.steps.range_mut(window.start..window.end) {
            op(level, delta);
        }
        self.merge(window.end);
        self.merge(window.start);
    }

    /// Makes `t` a breakpoint (with the level already in force there).
    fn split(&mut self, t: Instant) {
        if !self.steps.contains_key(&t) {
            let level = self.level_at(t).cloned().unwrap_or_default();
            self.steps.insert(t, level);
        }
    }

    /// Drops the breakpoint at `t` if it does not change the level.
    fn merge(&mut self, t: Instant) {
        let Some(level) = self.steps.get(&t) else {
            return;
        };
        let redundant = match self.steps.range(..t).next_back() {
            Some((_, previous)) => previous == level,
            None => level.is_zero(),
        };
        if redundant {
            self.steps.remove(&t);
        }
    }

    /// Visits the level in force at every instant of `window` where it may change (the start,
    /// and each breakpoint or excluded hold's boundary inside), the `excluded` contributions
    /// subtracted, until `visit` breaks.
    fn walk(
        &self,
        window: Window,
        excluded: &[(Window, Level)],
        mut visit: impl FnMut(&Level) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if window.is_empty() {
            return ControlFlow::Continue(());
        }
        let zero = Level::default();
        let first = self.level_at(window.start).unwrap_or(&zero);
        let inside = self
            .steps
            .range((Bound::Excluded(window.start), Bound::Excluded(window.end)))
            .map(|(t, level)| (*t, Some(level)));
        if excluded.is_empty() {
            visit(first)?;
            return inside.filter_map(|(_, level)| level).try_for_each(visit);
        }
        let cuts = excluded
            .iter()
            .flat_map(|(held, _)| [held.start, held.end])
            .filter(|t| window.start < *t && *t < window.end)
            .map(|t| (t, None));
        let mut events: Vec<(Instant, Option<&Level>)> = inside.chain(cuts).collect();
        events.sort_by_key(|(t, level)| (*t, level.is_none()));
        let mut current = first;
        visit(&without(current, window.start, excluded))?;
        for (t, level) in events {
            current = level.unwrap_or(current);
            visit(&without(current, t, excluded))?;
        }
        ControlFlow::Continue(())
    }

    fn peak_of(&self, top: &Level) -> Peak {
        let mut amounts: Vec<(ResourceClass, u64)> = top
            .amounts
            .iter()
            .enumerate()
            .filter(|(_, amount)| **amount > 0)
            .map(|(i, amount)| (self.classes[i].clone(), *amount))
            .collect();
        amounts.sort_by(|a, b| a.0.cmp(&b.0));
        Peak {
            exclusive: top.exclusive,
            holds: top.holds,
            amounts,
        }
    }
}

/// The running level of a sweep over a timeline's boundaries, with untrimmed amounts.
struct Sum {
    holds: u32,
    exclusive: u32,
    amounts: Vec<u64>,
}

impl Sum {
    fn new(classes: usize) -> Sum {
        Sum {
            holds: 0,
            exclusive: 0,
            amounts: vec![0; classes],
        }
    }

    /// Adds `hold` (or takes it off, when it `ends`), its classes indexed by `index`.
    fn apply(&mut self, hold: &Hold, ends: bool, index: impl Fn(&ResourceClass) -> Option<usize>) {
        let exclusive = u32::from(hold.exclusive);
        match ends {
            false => {
                self.holds = self.holds.saturating_add(1);
                self.exclusive = self.exclusive.saturating_add(exclusive);
            }
            true => {
                self.holds = self.holds.saturating_sub(1);
                self.exclusive = self.exclusive.saturating_sub(exclusive);
            }
        }
        for (class, amount) in hold.amounts.iter().filter(|(_, amount)| *amount != 0) {
            if let Some(i) = index(class) {
                self.amounts[i] = match ends {
                    false => self.amounts[i].saturating_add(*amount),
                    true => self.amounts[i].saturating_sub(*amount),
                };
            }
        }
    }

    /// The amounts with trailing zeros trimmed, as a [`Level`] keeps them.
    fn trimmed(&self) -> &[u64] {
        let keep = self
            .amounts
            .iter()
            .rposition(|&a| a != 0)
            .map_or(0, |i| i + 1);
        &self.amounts[..keep]
    }

    /// Whether the running level equals `level` (no level: zero).
    fn equals(&self, level: Option<&Level>) -> bool {
        let (holds, exclusive, amounts) =
            level.map_or((0, 0, &[][..]), |l| (l.holds, l.exclusive, &l.amounts[..]));
        self.holds == holds && self.exclusive == exclusive && self.trimmed() == amounts
    }

    fn level(&self) -> Level {
        Level {
            holds: self.holds,
            exclusive: self.exclusive,
            amounts: Box::from(self.trimmed()),
        }
    }
}

/// `level` at `t`, less the excluded holds covering `t`.
fn without(level: &Level, t: Instant, excluded: &[(Window, Level)]) -> Level {
    let mut rest = level.clone();
    for (held, delta) in excluded {
        if held.contains(t) {
            rest.sub(delta);
        }
    }
    rest
}

/// What describes the holds of its reservations (a lease): a ledger can keep it instead of a
/// copy of its holds ([`Ledger::add_holder`]). It must answer the same for as long as a ledger
/// keeps it (leases are shared unchanged).
pub trait Holder: std::fmt::Debug + Send + Sync {
    /// The holds of each of its reservations, one list per reservation.
    fn holds_by_reservation(&self) -> Vec<Vec<Hold>>;

    /// The holds of one of its reservations, in the order [`Holder::holds_by_reservation`]
    /// lists them.
    fn holds_of(&self, reservation: ReservationId) -> Vec<Hold>;
}

/// The time-indexed capacity ledger of every host. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// The holds added as holds ([`Ledger::add`], [`Ledger::from_holds`]), once, by
    /// reservation, in the order added. A persistent map (`imbl`): copies of the ledger share it,
    /// and a change to one copies only the path to the entry it changes; each reservation's list
    /// is shared too, allocated at its length (no spare room), and replaced whole when the
    /// reservation's holds change.
    reservations: imbl::OrdMap<ReservationId, Arc<[Hold]>>,
    /// The reservations whose holds a holder describes ([`Ledger::add_holder`],
    /// [`Ledger::from_holders`]), by reservation: their holds are read from the holder when
    /// asked for, not copied. A reservation is here or in `reservations`, never in both.
    /// Persistent, as `reservations` is.
    described: imbl::OrdMap<ReservationId, Arc<dyn Holder>>,
    /// The timeline of every host with at least one hold; shared between copies of the ledger
    /// until one of them changes it (copying a ledger copies pointers, not timelines).
    hosts: BTreeMap<ProviderId, Arc<Timeline>>,
    /// How many holds are stored.
    len: usize,
    /// The distinct amount lists of the holds (shared between copies until one changes it).
    shapes: Arc<Shapes>,
}

/// Ledgers are equal when they hold the same holds the same way (the shared amount lists
/// aside).
#[cfg(test)]
impl PartialEq for Ledger {
    fn eq(&self, other: &Ledger) -> bool {
        let holds = |ledger: &Ledger| {
            ledger
                .ids()
                .map(|id| (id, ledger.held(id).into_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        holds(self) == holds(other) && self.hosts == other.hosts && self.len == other.len
    }
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// The ledger of `holds`, given in batches (typically one per reservation), in order: the
    /// same as adding them one by one to an empty ledger, built in bulk (each index sorted
    /// once, each host's timeline in one sweep over its holds' boundaries).
    pub fn from_holds(holds: impl IntoIterator<Item = Vec<Hold>>) -> Ledger {
        let mut shapes = Shapes::default();
        let groups = runs(holds.into_iter().map(|mut batch| {
            for hold in &mut batch {
                hold.amounts = shapes.share(&hold.amounts);
            }
            batch
        }));
        Ledger {
            len: groups.iter().map(|(_, holds)| holds.len()).sum(),
            hosts: timelines(&groups),
            reservations: by_reservation(groups).into_iter().collect(),
            described: imbl::OrdMap::default(),
            shapes: Arc::new(shapes),
        }
    }

    /// The ledger of the holds of `holders` (leases), in order: the same as adding them with
    /// [`Ledger::add_holder`] one by one, built in bulk as [`Ledger::from_holds`] builds its
    /// ledger. Each reservation belongs to one holder.
    pub fn from_holders<H: Holder + 'static>(holders: &[Arc<H>]) -> Ledger {
        let mut groups = Vec::new();
        let mut described = Vec::new();
        for holder in holders {
            for holds in holder.holds_by_reservation() {
                if let Some(hold) = holds.first() {
                    described.push((hold.reservation, Arc::clone(holder) as Arc<dyn Holder>));
                    groups.push((hold.reservation, holds));
                }
            }
        }
        described.sort_unstable_by_key(|(id, _)| *id);
        Ledger {
            len: groups.iter().map(|(_, holds)| holds.len()).sum(),
            hosts: timelines(&groups),
            reservations: imbl::OrdMap::default(),
            described: described.into_iter().collect(),
            shapes: Arc::default(),
        }
    }

    /// Adds the holds of every reservation of `holder` (a lease), keeping the holder rather
    /// than a copy of its holds. Returns the holds added.
    pub fn add_holder<H: Holder + 'static>(&mut self, holder: &Arc<H>) -> Vec<Hold> {
        let mut added = Vec::new();
        for holds in holder.holds_by_reservation() {
            let Some(reservation) = holds.first().map(|hold| hold.reservation) else {
                continue;
            };
            if self.holds(reservation) {
                // Already held: kept as a list, as more holds of the reservation.
                self.add_all(holds.clone());
            } else {
                for hold in &holds {
                    Arc::make_mut(self.hosts.entry(hold.host).or_default()).insert(hold);
                }
                self.len += holds.len();
                self.described
                    .insert(reservation, Arc::clone(holder) as Arc<dyn Holder>);
            }
            added.extend(holds);
        }
        added
    }

    /// Adds a hold. A reservation may hold several hosts; holding the same host twice for the
    /// same reservation is allowed (amounts add up, both windows apply). A hold whose window is
    /// empty (only constructible through [`Window`]'s fields) is stored but covers no instant.
    pub fn add(&mut self, hold: Hold) {
        self.add_all(vec![hold]);
    }

    /// Adds the holds of one reservation (all naming `holds[0].reservation`; a hold naming
    /// another is added as [`Ledger::add`] would), in order: the same as adding them one by one,
    /// with the reservation's list allocated once.
    pub fn add_all(&mut self, mut holds: Vec<Hold>) {
        let Some(reservation) = holds.first().map(|hold| hold.reservation) else {
            return;
        };
        if holds.iter().any(|hold| hold.reservation != reservation) {
            for hold in holds {
                self.add_all(vec![hold]);
            }
            return;
        }
        for hold in &mut holds {
            // Looked up first, so that a known list copies no shared set.
            if let Some(known) = self.shapes.0.get(&hold.amounts) {
                hold.amounts = Arc::clone(known);
            } else if self.shapes.0.len() < Shapes::MAX {
                hold.amounts = Arc::make_mut(&mut self.shapes).share(&hold.amounts);
            }
            Arc::make_mut(self.hosts.entry(hold.host).or_default()).insert(hold);
        }
        self.len += holds.len();
        let list: Arc<[Hold]> = match self.take(reservation) {
            Some(held) => held.into_iter().chain(holds).collect(),
            None => Arc::from(holds),
        };
        self.reservations.insert(reservation, list);
    }

    /// Whether the ledger has holds of `reservation`.
    fn holds(&self, reservation: ReservationId) -> bool {
        self.reservations.contains_key(&reservation) || self.described.contains_key(&reservation)
    }

    /// Takes the holds of `reservation` out of the index keeping them (the timelines are left
    /// as they are); `None` when it has none.
    fn take(&mut self, reservation: ReservationId) -> Option<Vec<Hold>> {
        // Looked up first, so that taking what is not there copies no shared index.
        if self.reservations.contains_key(&reservation) {
            let list = self.reservations.remove(&reservation)?;
            Some(list.to_vec())
        } else if self.described.contains_key(&reservation) {
            let holder = self.described.remove(&reservation)?;
            Some(holder.holds_of(reservation))
        } else {
            None
        }
    }

    /// Every reservation with holds, ascending.
    fn ids(&self) -> impl Iterator<Item = ReservationId> + '_ {
        let mut ids: Vec<ReservationId> = self.reservations.keys().copied().collect();
        ids.extend(self.described.keys().copied());
        ids.sort_unstable();
        ids.into_iter()
    }

    /// Removes every hold of `reservation`; returns them, in the order they were added.
    pub fn remove(&mut self, reservation: ReservationId) -> Vec<Hold> {
        let Some(holds) = self.take(reservation) else {
            return Vec::new();
        };
        for hold in &holds {
            self.withdraw(hold, false);
        }
        self.len -= holds.len();
        holds
    }

    fn withdraw(&mut self, hold: &Hold, keep_start: bool) {
        let Some(line) = self.hosts.get_mut(&hold.host).map(Arc::make_mut) else {
            return;
        };
        line.remove(hold, keep_start);
        if line.holds == 0 {
            self.hosts.remove(&hold.host);
        }
    }

    /// The holds of a reservation, in the order they were added.
    pub fn holds_of(&self, reservation: ReservationId) -> impl Iterator<Item = Hold> {
        self.held(reservation).into_owned().into_iter()
    }

    /// The holds of a reservation, borrowed when the ledger keeps them as a list.
    fn held(&self, reservation: ReservationId) -> Cow<'_, [Hold]> {
        if let Some(list) = self.reservations.get(&reservation) {
            Cow::Borrowed(list)
        } else if let Some(holder) = self.described.get(&reservation) {
            Cow::Owned(holder.holds_of(reservation))
        } else {
            Cow::Borrowed(&[])
        }
    }

    /// The contributions of the holds of `excluding` on `host` overlapping `window`.
    fn excluded(
        &self,
        line: &Timeline,
        host: ProviderId,
        window: Window,
        excluding: &[ReservationId],
    ) -> Vec<(Window, Level)> {
        let mut ids = excluding.to_vec();
        ids.sort_unstable();
        ids.dedup();
        ids.iter()
            .flat_map(|id| {
                self.held(*id)
                    .iter()
                    .filter(|hold| hold.host == host && hold.window.overlaps(&window))
                    .map(|hold| (hold.window, line.delta(hold)))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Peak use of `host` over `window`, ignoring the holds of the reservations in `excluding`
    /// (used when a reservation is re-admitted on update: its own holds must not count). Equals
    /// the peak in a ledger from which those reservations were removed.
    pub fn peak(&self, host: ProviderId, window: Window, excluding: &[ReservationId]) -> Peak {
        let Some(line) = self.hosts.get(&host) else {
            return Peak::default();
        };
        let excluded = self.excluded(line, host, window, excluding);
        let mut top = Level::default();
        let _ = line.walk(window, &excluded, |level| {
            top.raise_to(level);
            ControlFlow::Continue(())
        });
        line.peak_of(&top)
    }

    /// Whether `host` has no hold at all over `window` (ignoring the holds of `excluding`).
    pub fn is_free(&self, host: ProviderId, window: Window, excluding: &[ReservationId]) -> bool {
        let Some(line) = self.hosts.get(&host) else {
            return true;
        };
        let excluded = self.excluded(line, host, window, excluding);
        line.walk(window, &excluded, |level| {
            if level.holds > 0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .is_continue()
    }

    /// Instants in `[from, until)` at which use of `host` decreases in some dimension (holds,
    /// exclusive holds or the amount of some class), ascending: the only instants at which a
    /// request that does not fit can start to fit. An instant where one hold ends and an equal
    /// one starts is not among them.
    pub fn release_times(&self, host: ProviderId, from: Instant, until: Instant) -> Vec<Instant> {
        let Some(line) = self.hosts.get(&host) else {
            return Vec::new();
        };
        if from >= until {
            return Vec::new();
        }
        let zero = Level::default();
        let mut previous = line
            .steps
            .range(..from)
            .next_back()
            .map_or(&zero, |(_, level)| level);
        let mut times = Vec::new();
        for (t, level) in line.steps.range(from..until) {
            if previous.decreases_to(level) {
                times.push(*t);
            }
            previous = level;
        }
        times
    }

    /// The step function of `class` on `host` over `window`, read straight off the timeline:
    /// `(instant, amount held, exclusive holds)` at the window's start, then at each breakpoint
    /// inside the window. Empty when nothing was ever held on `host`.
    pub fn steps_of(
        &self,
        host: ProviderId,
        class: &ResourceClass,
        window: Window,
    ) -> Vec<(Instant, u64, u32)> {
        let Some(line) = self.hosts.get(&host) else {
            return Vec::new();
        };
        let index = line.find_class(class);
        let read = |level: &Level| (index.map_or(0, |i| level.amount(i)), level.exclusive);
        let (amount, exclusive) = line.level_at(window.start).map_or((0, 0), read);
        let mut out = vec![(window.start, amount, exclusive)];
        let inside = (Bound::Excluded(window.start), Bound::Excluded(window.end));
        for (t, level) in line.steps.range(inside) {
            let (amount, exclusive) = read(level);
            out.push((*t, amount, exclusive));
        }
        out
    }

    /// Holds on `host` overlapping `window` (for allocation views), in start order, then by
    /// reservation, then in the order added.
    pub fn holds_on(&self, host: ProviderId, window: Window) -> Vec<Hold> {
        let Some(line) = self.hosts.get(&host) else {
            return Vec::new();
        };
        if window.is_empty() {
            return Vec::new();
        }
        let earliest = window.start - line.max_span;
        line.starts
            .range((earliest, ReservationId::MIN)..(window.end, ReservationId::MIN))
            .flat_map(|&(start, reservation)| {
                self.held(reservation)
                    .iter()
                    .filter(|hold| {
                        hold.host == host
                            && hold.window.start == start
                            && hold.window.overlaps(&window)
                    })
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every host with at least one hold, ascending.
    pub fn hosts(&self) -> impl Iterator<Item = ProviderId> + '_ {
        self.hosts.keys().copied()
    }

    /// Whether `host` has at least one hold, at any time.
    pub fn holds_any(&self, host: ProviderId) -> bool {
        self.hosts.contains_key(&host)
    }

    /// Number of holds stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no hold is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every hold whose window ended at or before `t` (housekeeping); returns how many.
    /// It visits every reservation's holds (the ledger keeps no index by end: it would cost a
    /// key per hold for this alone).
    pub fn forget_before(&mut self, t: Instant) -> usize {
        let reservations: Vec<ReservationId> = self
            .ids()
            .filter(|id| self.held(*id).iter().any(|hold| hold.window.end <= t))
            .collect();
        let forgotten: usize = reservations
            .into_iter()
            .map(|id| self.forget_holds(id, t))
            .sum();
        self.len -= forgotten;
        forgotten
    }

    fn forget_holds(&mut self, reservation: ReservationId, t: Instant) -> usize {
        let Some(held) = self.take(reservation) else {
            return 0;
        };
        let (gone, kept): (Vec<Hold>, Vec<Hold>) =
            held.into_iter().partition(|hold| hold.window.end <= t);
        for hold in &gone {
            let keep_start = kept
                .iter()
                .any(|k| k.host == hold.host && k.window.start == hold.window.start);
            self.withdraw(hold, keep_start);
        }
        if !kept.is_empty() {
            self.reservations.insert(reservation, Arc::from(kept));
        }
        gone.len()
    }

    /// Checks the internal indexes against the stored holds (for tests).
    #[cfg(test)]
    fn check_invariants(&self) -> Result<(), String> {
        let held: Vec<Cow<'_, [Hold]>> = self.ids().map(|id| self.held(id)).collect();
        let all: Vec<&Hold> = held.iter().flat_map(|holds| holds.iter()).collect();
        let both = self
            .reservations
            .keys()
            .any(|id| self.described.contains_key(id));
        if all.len() != self.len || held.iter().any(|holds| holds.is_empty()) || both {
            return Err("len, empty or twice indexed reservation entry".into());
        }
        for (host, line) in &self.hosts {
            line.check(host, &all)?;
        }
        if all.iter().any(|h| !self.hosts.contains_key(&h.host)) {
            return Err("host without timeline".into());
        }
        Ok(())
    }
}

/// The holds as runs of one reservation each, in the order given (a reservation may have
/// several runs). A batch of one reservation is kept as it is.
fn runs(batches: impl IntoIterator<Item = Vec<Hold>>) -> Vec<(ReservationId, Vec<Hold>)> {
    let mut runs: Vec<(ReservationId, Vec<Hold>)> = Vec::new();
    for batch in batches {
        let Some(reservation) = batch.first().map(|hold| hold.reservation) else {
            continue;
        };
        if batch.iter().all(|hold| hold.reservation == reservation) {
            runs.push((reservation, batch));
            continue;
        }
        for hold in batch {
            match runs.last_mut() {
                Some((last, holds)) if *last == hold.reservation => holds.push(hold),
                _ => runs.push((hold.reservation, vec![hold])),
            }
        }
    }
    runs
}

/// The timeline of every host the runs hold, each from its holds in the order given.
fn timelines(runs: &[(ReservationId, Vec<Hold>)]) -> BTreeMap<ProviderId, Arc<Timeline>> {
    // `(host, run, position)`: sorted, each host's holds come in the order given.
    let mut by_host: Vec<(ProviderId, usize, usize)> = runs
        .iter()
        .enumerate()
        .flat_map(|(run, (_, holds))| {
            holds
                .iter()
                .enumerate()
                .map(move |(position, hold)| (hold.host, run, position))
        })
        .collect();
    by_host.sort_unstable();
    by_host
        .chunk_by(|a, b| a.0 == b.0)
        .map(|mine| {
            let holds: Vec<&Hold> = mine
                .iter()
                .map(|&(_, run, position)| &runs[run].1[position])
                .collect();
            (mine[0].0, Arc::new(Timeline::from_holds(&holds)))
        })
        .collect()
}

/// The runs merged by reservation, each reservation's holds in the order given.
fn by_reservation(
    mut runs: Vec<(ReservationId, Vec<Hold>)>,
) -> BTreeMap<ReservationId, Arc<[Hold]>> {
    // Stable: a reservation's runs stay in the order given.
    runs.sort_by_key(|(reservation, _)| *reservation);
    let mut merged: Vec<(ReservationId, Vec<Hold>)> = Vec::with_capacity(runs.len());
    for (reservation, holds) in runs {
        match merged.last_mut() {
            Some((last, mine)) if *last == reservation => mine.extend(holds),
            _ => merged.push((reservation, holds)),
        }
    }
    merged
        .into_iter()
        .map(|(reservation, holds)| (reservation, Arc::from(holds)))
        .collect()
}

#[cfg(test)]
impl Timeline {
    fn check(&self, host: &ProviderId, all: &[&Hold]) -> Result<(), String> {
        let mine: Vec<&&Hold> = all.iter().filter(|h| h.host == *host).collect();
        let starts: BTreeSet<(Instant, ReservationId)> = mine
            .iter()
            .map(|h| (h.window.start, h.reservation))
            .collect();
        if mine.len() != self.holds || mine.is_empty() || starts != self.starts {
            return Err(format!("host {host}: hold count or start index"));
        }
        let mut previous = &Level::default();
        for (t, level) in &self.steps {
            if level == previous || level.amounts.last() == Some(&0) {
                return Err(format!("host {host}: non-canonical breakpoint at {t:?}"));
            }
            previous = level;
        }
        if !previous.is_zero() {
            return Err(format!("host {host}: the last level is not zero"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
