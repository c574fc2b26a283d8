// Time on the dashboard: everything is shown in UTC, as the APIs give it. Parsing the API's
// dates, formatting, the chosen window (from the URL, or now - 1 day to now + 7 days), and the
// ticks of a time axis.

export const MINUTE = 60 * 1000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

let skew = 0;

/** Takes the server's clock from a response's `Date` header, so "now" is berth's now. */
export function observeServerDate(header) {
  const at = Date.parse(header || '');
  if (Number.isFinite(at) && Math.abs(at - Date.now()) > 5000) skew = at - Date.now();
}

/** Now, by the server's clock when known. */
export function now() {
  return Date.now() + skew;
}

/**
 * Parses an API date: Blazar's `2030-01-01T10:00:00.000000` (UTC, no zone), RFC 3339, or
 * `2030-01-01 10:00:00`. Returns milliseconds, or NaN.
 */
export function parse(text) {
  if (typeof text !== 'string' || !text) return NaN;
  let value = text.trim().replace(' ', 'T').replace(/(\.\d{3})\d+/, '$1');
  if (!/(Z|[+-]\d\d:?\d\d)$/i.test(value)) value += 'Z';
  return Date.parse(value);
}

const pad = (n) => String(n).padStart(2, '0');

/** `2030-01-01T10:00:00Z`: what the URL and the capacity API take. */
export function iso(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** `Mon 14 Jul`. */
export function day(ms) {
  const d = new Date(ms);
  return `${WEEKDAYS[d.getUTCDay()]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`;
}

/** `10:00`. */
export function clock(ms) {
  const d = new Date(ms);
  return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
}

/** `Mon 14 Jul 10:00`. */
export function stamp(ms) {
  return Number.isFinite(ms) ? `${day(ms)} ${clock(ms)}` : '—';
}

/** `2 d 4 h`, `45 min`. */
export function duration(ms) {
  const minutes = Math.round(Math.abs(ms) / MINUTE);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return minutes % 60 && hours < 10 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

/** `in 6 h`, `2 d ago`. */
export function relative(ms, reference = now()) {
  const delta = ms - reference;
  if (Math.abs(delta) < MINUTE) return 'now';
  return delta > 0 ? `in ${duration(delta)}` : `${duration(delta)} ago`;
}

/** The default window: from one day before now (on the hour) for eight days. */
export function defaultWindow() {
  const from = Math.floor(now() / HOUR) * HOUR - DAY;
  return {from, to: from + 8 * DAY};
}

/** The window named by `from` and `to` parameters, or the default. */
export function windowOf(params) {
  const from = parse(params.get('from') || '');
  const to = parse(params.get('to') || '');
  if (Number.isFinite(from) && Number.isFinite(to) && to > from) return {from, to};
  const fallback = defaultWindow();
  if (Number.isFinite(from)) return {from, to: from + (fallback.to - fallback.from)};
  return fallback;
}

/** Zooms `win` by `factor` (< 1 zooms in) around `center`, keeping at least one hour. */
export function zoom(win, factor, center = (win.from + win.to) / 2) {
  const span = Math.min(Math.max((win.to - win.from) * factor, HOUR), 366 * DAY);
  const ratio = (center - win.from) / (win.to - win.from);
  const from = Math.round((center - span * ratio) / MINUTE) * MINUTE;
  return {from, to: from + Math.round(span / MINUTE) * MINUTE};
}

/** Moves `win` by `fraction` of its span. */
export function pan(win, fraction) {
  const shift = Math.round(((win.to - win.from) * fraction) / MINUTE) * MINUTE;
  return {from: win.from + shift, to: win.to + shift};
}

const STEPS = [HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY];

/** The smallest tick step that leaves at least `pixels` between ticks. */
export function tickStep(win, width, pixels) {
  const perPixel = (win.to - win.from) / Math.max(width, 1);
  return STEPS.find((step) => step / perPixel >= pixels) || STEPS[STEPS.length - 1];
}

/** Tick instants of `step` within the window (days and weeks on UTC midnight). */
export function ticks(win, step) {
  const base = step >= DAY ? DAY : step;
  const out = [];
  let at = Math.ceil(win.from / base) * base;
  if (step === 7 * DAY || step === 14 * DAY || step === 28 * DAY) {
    while (new Date(at).getUTCDay() !== 1) at += DAY; // weeks start on Monday
  }
  for (; at <= win.to && out.length < 500; at += step) out.push(at);
  return out;
}

/** Whether the UTC day of `ms` is a Saturday or a Sunday. */
export function weekend(ms) {
  const weekday = new Date(ms).getUTCDay();
  return weekday === 0 || weekday === 6;
}
