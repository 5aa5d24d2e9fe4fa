/** Times, dates and durations as a locale writes them: never an ISO string or bare milliseconds in text. */

const unit = (locale: string, name: "second" | "minute" | "hour", count: number) =>
  new Intl.NumberFormat(locale, { style: "unit", unit: name, unitDisplay: "long", maximumFractionDigits: 0 }).format(count);

export function formatsIn(locale: string) {
  return {
    minutes: (count: number) => unit(locale, "minute", count),
    /** A span in the largest unit that keeps it readable: seconds up to 90 s, minutes up to 90 min, then hours. */
    duration: (ms: number) => {
      const seconds = Math.max(0, Math.round(ms / 1000));
      if (seconds < 90) return unit(locale, "second", seconds);
      if (seconds < 90 * 60) return unit(locale, "minute", Math.round(seconds / 60));
      return unit(locale, "hour", Math.round(seconds / 3600));
    },
    /** The time of day, to the second (the footer's "since …"). */
    clock: (ms: number) => new Intl.DateTimeFormat(locale, { timeStyle: "medium" }).format(ms),
    dateTime: (ms: number) => new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "medium" }).format(ms),
  };
}
