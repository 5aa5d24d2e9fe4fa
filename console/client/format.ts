/** Dates, times and durations as the page's locale writes them (Intl), never the browser's default. */
/** A mute's end: the time of day, with the date when it is not the day of `now` (the page's clock). */
export function untilText(iso: string, now: number, locale: string): string {
  const at = new Date(iso);
  const today = at.toDateString() === new Date(now).toDateString();
  const time = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" } as const;
  return new Intl.DateTimeFormat(locale, today ? time : { month: "2-digit", day: "2-digit", ...time }).format(at);
}

export const dateTimeText = (iso: string, locale: string): string =>
  new Intl.DateTimeFormat(locale, { dateStyle: "short", timeStyle: "medium" }).format(new Date(iso));

const UNITS = [
  ["day", 86_400],
  ["hour", 3_600],
  ["minute", 60],
  ["second", 1],
] as const;

/** How long ago, relative to `now`; never in the future (clocks differ a little). */
export function agoText(iso: string, now: number, locale: string): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  const [unit, size] = UNITS.find(([, size]) => seconds >= size) ?? UNITS[3];
  return new Intl.RelativeTimeFormat(locale, { numeric: "always" }).format(-Math.round(seconds / size), unit);
}

/** A duration in its largest whole unit and the next (3 min 5 s, 1 h 2 min). */
export function durationText(ms: number, locale: string): string {
  const seconds = Math.round(ms / 1000);
  const index = UNITS.findIndex(([, size]) => seconds >= size);
  const [unit, size] = UNITS[index === -1 ? 3 : index]!;
  const whole = Math.floor(seconds / size);
  const unitText = (value: number, name: string) => new Intl.NumberFormat(locale, { style: "unit", unit: name, unitDisplay: "short" }).format(value);
  const next = UNITS[index + 1];
  const remainder = next ? Math.floor((seconds - whole * size) / next[1]) : 0;
  return next && remainder > 0 && index !== -1 ? `${unitText(whole, unit)} ${unitText(remainder, next[0])}` : unitText(whole, unit);
}

/** `<key>.<category>` by the locale's plural rules (English one/other, Chinese other). */
export const countKey = (key: string, n: number, locale: string): string => `${key}.${new Intl.PluralRules(locale).select(n)}`;
